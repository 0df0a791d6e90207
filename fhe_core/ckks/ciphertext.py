"""CKKS ciphertexts and their encryption and decryption.

A CKKS :class:`Ciphertext` is an :class:`fhe_core.rlwe.Ciphertext` (``[d+1, l+1, N]`` int64,
NTT domain, level l, params_id) that also carries the exact ``scale`` of the message it hides and
its number of ``slots`` (a power of two dividing N/2, as for :class:`Plaintext`). Every RLWE
operation builds its result with ``replace``, so scale and slots pass through key switching,
relinearization and Galois automorphisms unchanged.

:class:`Encryptor` (secret or public key) and :class:`Decryptor` (secret key) go Plaintext <->
Ciphertext. Only client-side code holds them: the :class:`~fhe_core.ckks.evaluator.Evaluator`
never sees a secret key.

The CKKS-specific errors live here for now (they belong in :mod:`fhe_core.errors`).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from fhe_core import rlwe
from fhe_core.ckks.plaintext import Plaintext
from fhe_core.errors import (  # noqa: F401  (the two mismatch errors are re-exported by fhe_core.ckks)
    DomainMismatchError,
    LevelMismatchError,
    ParameterError,
    ParamsMismatchError,
    ScaleMismatchError,
    SchemeMismatchError,
    SlotMismatchError,
)
from fhe_core.params import Params
from fhe_core.ops import KernelPlan
from fhe_core.rlwe.checks import check_key, mark_canonical


@dataclass(frozen=True, kw_only=True, eq=False)
class Ciphertext(rlwe.Ciphertext):
    """An RLWE ciphertext of a CKKS message: decrypts to m + e with m ~ scale * message.

    Attributes (besides the RLWE ones: ``data`` ``[d+1, l+1, N]`` int64, ``level`` l,
    ``params_id``, ``is_ntt``):
        scale: the exact scale of the message (float bookkeeping, see the evaluator).
        slots: n, a power of two dividing N/2; n < N/2 is sparse packing.
    """

    scale: float
    slots: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (isinstance(self.scale, float) and math.isfinite(self.scale) and self.scale > 0):
            raise ParameterError(f"CKKS ciphertext: scale must be a finite positive float, got {self.scale!r}")
        if not (self.slots >= 1 and self.slots & (self.slots - 1) == 0 and 2 * self.slots <= self.n):
            raise ParameterError(f"CKKS ciphertext: slots must be a power of two <= N/2, got {self.slots}")

    def __repr__(self) -> str:
        return (f"ckks.Ciphertext(degree={self.degree}, level={self.level}, N={self.n}, "
                f"scale=2^{math.log2(self.scale):.4f}, slots={self.slots}, device={self.device}, "
                f"params_id={self.params_id[:12]!r})")


def rlwe_context(params: Params, plan: KernelPlan | None = None) -> rlwe.RLWEContext:
    """The RLWE context of ``params`` on ``params.device`` (public tables only; one per Params and plan,
    shared by every encryptor, decryptor and evaluator of these parameters). ``plan``: its kernel plan
    (default: resolved for the device, N and primes; see :class:`fhe_core.ops.KernelPlan`)."""
    if not isinstance(params, Params):
        raise ParameterError(f"expected a Params, got {type(params).__name__}")
    if plan is not None and not isinstance(plan, KernelPlan):
        raise ParameterError(f"expected a KernelPlan or None, got {type(plan).__name__}")
    return _context(params, plan)


@functools.lru_cache(maxsize=16)
def _context(params: Params, plan: KernelPlan | None) -> rlwe.RLWEContext:
    return rlwe.RLWEContext.from_params(params, device=params.device, plan=plan)


def check_ckks_params(params: Params, op: str) -> Params:
    """``params`` if they are CKKS Params; ParameterError for anything else, SchemeMismatchError
    for BFV parameters (CKKS objects built on them would compute garbage), naming ``op``."""
    if not isinstance(params, Params):
        raise ParameterError(f"{op}: expected a Params, got {type(params).__name__}")
    if params.scheme != "ckks":
        raise SchemeMismatchError(f"{op}: these are {params.scheme.upper()} parameters ({params!r}); CKKS needs "
                                  "CKKS parameters (fhe_core.params.PRESETS; BFV objects live in fhe_core.bfv)")
    return params


def _check_plaintext(params: Params, pt: Plaintext, op: str) -> None:
    if not isinstance(pt, Plaintext):
        raise ParameterError(f"{op}: expected a ckks.Plaintext, got {type(pt).__name__}")
    if pt.params_id != params.params_id:
        raise ParamsMismatchError(f"{op}: the plaintext belongs to params {pt.params_id[:12]!r}, "
                                  f"the {op} to {params.params_id[:12]!r}")
    if not pt.is_ntt:
        raise DomainMismatchError(f"{op}: the plaintext must be in the NTT domain")
    if not 0 <= pt.level <= params.max_level:
        raise LevelMismatchError(f"{op}: plaintext level {pt.level} outside [0, {params.max_level}]")


class Encryptor:
    """Encrypts CKKS plaintexts under a secret key (symmetric) or a public key.

    Args:
        params: the parameter set; the key must belong to it (params_id).
        key: an :class:`fhe_core.rlwe.SecretKey` or :class:`fhe_core.rlwe.PublicKey`.
    """

    def __init__(self, params: Params, key: rlwe.SecretKey | rlwe.PublicKey):
        check_ckks_params(params, "Encryptor")
        check_key(key, (rlwe.SecretKey, rlwe.PublicKey), params.params_id, "Encryptor")
        self.params = params
        self._ctx = rlwe_context(params)
        self._key = key

    def encrypt(self, pt: Plaintext, *, seed: bytes | None = None) -> Ciphertext:
        """A fresh ciphertext of ``pt`` at the plaintext's level, scale and slots.

        Returns ``[2, l+1, N]`` int64, NTT domain. Secret-key encryption adds an error of at most
        eta per coefficient; public-key encryption about sqrt(N) times more (see
        :mod:`fhe_core.rlwe.encryption`). ``seed``: tests only.
        """
        op = "encrypt"
        _check_plaintext(self.params, pt, op)
        if isinstance(self._key, rlwe.SecretKey):
            ct = rlwe.encrypt_sk(self._ctx, self._key, pt.data, pt.level, seed=seed)
        else:
            ct = rlwe.encrypt_pk(self._ctx, self._key, pt.data, pt.level, seed=seed)
        return mark_canonical(Ciphertext(data=ct.data, level=ct.level, params_id=ct.params_id,
                                         uniform_seed=ct.uniform_seed, scale=float(pt.scale), slots=pt.slots))


class Decryptor:
    """Decrypts CKKS ciphertexts with the secret key (client side only)."""

    def __init__(self, params: Params, sk: rlwe.SecretKey):
        check_ckks_params(params, "Decryptor")
        check_key(sk, (rlwe.SecretKey,), params.params_id, "Decryptor")
        self.params = params
        self._ctx = rlwe_context(params)
        self._sk = sk

    def decrypt(self, ct: Ciphertext) -> Plaintext:
        """The plaintext m + e = c_0 + c_1 s (+ c_2 s^2) at the ciphertext's level, scale, slots.

        Accepts any degree (relinearized or not). Returns data ``[l+1, N]`` int64, NTT domain.
        """
        op = "decrypt"
        if not isinstance(ct, Ciphertext):
            raise ParameterError(f"{op}: expected a ckks.Ciphertext, got {type(ct).__name__}")
        m = rlwe.decrypt(self._ctx, self._sk, ct)
        return Plaintext(data=m, level=ct.level, scale=ct.scale, params_id=ct.params_id, slots=ct.slots)
