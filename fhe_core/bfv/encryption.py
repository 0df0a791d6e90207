"""BFV encryption, decryption and the invariant noise budget.

**Scaling.** A plaintext m (coefficients in [0, t)) is encrypted as the RLWE message
round(Q_l m / t) = Delta_l m + round(r m / t), Delta_l = floor(Q_l / t), r = Q_l mod t (SEAL's
scaling variant): it leaves |t round(Q m/t) - Q m| <= t/2 in the invariant noise instead of the
r m < t^2 of plain Delta_l m. Exactly per limb: with h = floor(t/2) and w = [r m + h]_t,
floor((Q m + h) / t) = (Q m + h - w) / t = (h - w) t^-1 (mod q_i), as Q = 0 mod q_i.
Encryption then goes through ``rlwe.encrypt_pk`` / ``rlwe.encrypt_sk``, so
c0 + c1 s = round(Q_l m / t) + e (mod Q_l).

**Decryption** returns m = round(t/Q_l * x) mod t with x = [c0 + c1 s (+ c2 s^2)]_{Q_l}. It
is computed exactly: the phase x is formed on the device (NTT domain, then one inverse NTT),
its CRT lift to [0, Q_l) and the rounding run on the host in Python integers (vectorised over
the coefficients through numpy object arrays). Choice: decryption needs the secret key, so it
runs on the client, once per result, never inside the server's circuits; an exact host CRT
keeps it simple and exactly right (the noise budget needs the exact [t x]_Q anyway). About
0.1 s at N = 2^14, 8 primes on one CPU core. A device kernel (BEHZ/HPS scale-and-round with an
auxiliary prime gamma) would remove the host step if decryption ever becomes a hot path.

**Invariant noise** (SEAL's definition): t/Q_l x = m + v + t k (k integral) for the invariant
noise v, so t x = Q_l v (mod Q_l): [t x]_{Q_l} = Q_l v exactly while |v|_inf < 1/2, which is
when decryption is right. The budget is log2(Q_l / (2 max|[t x]_{Q_l}|)) = -log2(2 |v|_inf)
bits (0 when v reaches 1/2). Past that point [t x]_Q shows v wrapped mod 1: a ciphertext just
past the limit has coefficients with v mod 1 in [1/4, 3/4), and one far past it has [t x]_Q
spread uniformly over (-Q/2, Q/2], whose maximum over N >= 1024 coefficients exceeds Q/4 except
with probability 2^-N. So decryption refuses (``DecryptionError``) any ciphertext with less than
``MIN_BUDGET_BITS`` = 1 bit of budget (max |[t x]_Q| >= Q/4): it detects exhausted noise with
overwhelming probability, at the cost of refusing ciphertexts one step from failing anyway.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import torch

from fhe_core import ops, rlwe
from fhe_core.bfv.context import BFVContext
from fhe_core.bfv.encoder import Plaintext
from fhe_core.errors import DecryptionError, ParameterError, ParamsMismatchError, ResidueError
from fhe_core.ring import RNSBasis, shoup_constants
from fhe_core.rlwe import Ciphertext, PublicKey, SecretKey
from fhe_core.rlwe.checks import check_key, is_marked_canonical, mark_canonical

MIN_BUDGET_BITS = 1.0


def check_plaintext(ctx: BFVContext, pt: Plaintext, op: str) -> None:
    """ParameterError / ParamsMismatchError unless ``pt`` is a BFV plaintext of this context;
    ResidueError unless its coefficients are in [0, t) (checked once per object: the encoder's
    and the decryptor's plaintexts carry the canonical mark, see :mod:`fhe_core.rlwe.checks`)."""
    if not isinstance(pt, Plaintext):
        raise ParameterError(f"{op}: expected a BFV Plaintext, got {type(pt).__name__}")
    if pt.params_id != ctx.params_id:
        raise ParamsMismatchError(f"{op}: the plaintext belongs to params {pt.params_id!r}, "
                                  f"the context to {ctx.params_id!r}")
    if pt.n != ctx.n or pt.data.device != ctx.device:
        raise ParameterError(f"{op}: the plaintext ({pt.n} coefficients on {pt.data.device}) does not fit {ctx}")
    if not is_marked_canonical(pt):
        bad = torch.logical_or(pt.data < 0, pt.data >= ctx.t)
        if bool(bad.any()):
            index = int(bad.nonzero()[0, 0])
            raise ResidueError(f"{op}: the plaintext has a coefficient outside [0, t = {ctx.t}) at index {index} "
                               "(hand-built or corrupted data: encode with the BatchEncoder)")
        mark_canonical(pt)


def scaled_message(ctx: BFVContext, pt: Plaintext, level: int) -> torch.Tensor:
    """round(Q_l m / t) (see the module docstring): ``[l+1, N]`` int64, NTT domain over Q_l."""
    tab, t = ctx.scaling(level), ctx.t
    h = t // 2
    rm = ops.mul_const(pt.data.unsqueeze(0), tab.q_mod_t, tab.q_mod_t_shoup, ctx.t_basis.moduli)  # [1, N]
    w = torch.remainder(rm + h, t)                                        # [r m + h]_t
    residues = torch.remainder(h - w, tab.prime_column)                   # [l+1, N]
    return tab.q.ntt(ops.mul_const(residues, tab.t_inv, tab.t_inv_shoup, tab.q.moduli))


def lifted_message(ctx: BFVContext, pt: Plaintext, level: int) -> torch.Tensor:
    """m with centred coefficients in (-t/2, t/2): ``[l+1, N]`` int64, NTT domain over Q_l
    (the multiplier of a ciphertext-plaintext product: smallest noise growth)."""
    return lifted_many(ctx, pt.data.unsqueeze(0), level)[0]


def lifted_many(ctx: BFVContext, coefficients: torch.Tensor, level: int) -> torch.Tensor:
    """:func:`lifted_message` of ``[M, N]`` plaintext coefficients mod t at once: ``[M, l+1, N]``."""
    tab = ctx.scaling(level)
    m = coefficients.unsqueeze(1)
    residues = torch.where(m > ctx.t // 2, m + (tab.prime_column - ctx.t), m)
    return tab.q.ntt(residues.contiguous())


PLAIN_FORMS = "_operand_forms"  # a plaintext's cached operand forms (see plain_operand); not a dataclass field


def plain_operand(ctx: BFVContext, pt: Plaintext, level: int, *, scaled: bool) -> torch.Tensor:
    """:func:`scaled_message` (``scaled``: the addend of add_plain) or :func:`lifted_message` (the multiplier of
    multiply_plain) of a checked plaintext, kept on the plaintext per level after its first use, as SEAL keeps
    plaintexts in NTT form: a circuit's constants are transformed once, not at every call (5 and 9 ops on the
    device). Costs (l+1) words per coefficient of device memory per form and level while the plaintext lives (it
    is immutable: the cache never goes stale). Not kept while a CUDA graph is being captured (its kernels are only
    recorded then, so the tensor would hold nothing until a replay)."""
    forms = pt.__dict__.setdefault(PLAIN_FORMS, {})
    key = (ctx.params_id, level, scaled)
    if key in forms:
        return forms[key]
    form = (scaled_message if scaled else lifted_message)(ctx, pt, level)
    if not (form.is_cuda and torch.cuda.is_current_stream_capturing()):
        forms[key] = form
    return form


class Encryptor:
    """Encrypts BFV plaintexts under a public key (anyone) or a secret key (its owner)."""

    def __init__(self, ctx: BFVContext, key: PublicKey | SecretKey):
        ctx = BFVContext.check(ctx, "Encryptor")
        check_key(key, (PublicKey, SecretKey), ctx.params_id, "Encryptor")
        self.ctx, self._key = ctx, key

    def encrypt(self, pt: Plaintext, *, level: int | None = None, seed: bytes | None = None) -> Ciphertext:
        """A fresh ``[2, l+1, N]`` NTT-domain ciphertext of ``pt`` at ``level`` (default: the
        top level L). ``seed``: tests only (reproducible encryptions)."""
        op = "encrypt"
        check_plaintext(self.ctx, pt, op)
        level = self.ctx.max_level if level is None else self.ctx.check_level(level, op)
        m = scaled_message(self.ctx, pt, level)
        if isinstance(self._key, PublicKey):
            return rlwe.encrypt_pk(self.ctx.rlwe, self._key, m, level, seed=seed)
        return rlwe.encrypt_sk(self.ctx.rlwe, self._key, m, level, seed=seed)


@functools.lru_cache(maxsize=64)
def _crt_constants(primes: tuple[int, ...], device: str):
    """((Q/q_i)^-1 mod q_i as Shoup constants, [Q/q_i] as Python ints, Q)."""
    big_q = math.prod(primes)
    qhat = [big_q // q for q in primes]
    inv = shoup_constants([pow(h % q, -1, q) for h, q in zip(qhat, primes)], primes, device)
    return inv, np.array(qhat, dtype=object), big_q


def crt_lift(basis: RNSBasis, residues: torch.Tensor) -> tuple[np.ndarray, int]:
    """Exact CRT: ``[l+1, N]`` coefficient residues over ``basis`` -> (``[N]`` object array of
    Python ints in [0, Q), Q). y_i = [x_i (Q/q_i)^-1]_{q_i} on the device, then
    x = sum_i y_i (Q/q_i) mod Q on the host."""
    (inv, inv_shoup), qhat, big_q = _crt_constants(basis.primes, str(basis.device))
    y = ops.mul_const(residues, inv, inv_shoup, basis.moduli).cpu().numpy().view(np.uint64).astype(object)
    return (y * qhat[:, None]).sum(axis=0) % big_q, big_q


class Decryptor:
    """Decrypts BFV ciphertexts and measures their invariant noise budget. Holds the secret
    key: client side only."""

    def __init__(self, ctx: BFVContext, sk: SecretKey):
        ctx = BFVContext.check(ctx, "Decryptor")
        check_key(sk, (SecretKey,), ctx.params_id, "Decryptor")
        self.ctx, self._sk = ctx, sk

    def _phase(self, ct: Ciphertext) -> tuple[np.ndarray, int]:
        """x = [c0 + c1 s + ... + c_d s^d]_{Q_l} as Python ints, and Q_l."""
        phase = rlwe.decrypt(self.ctx.rlwe, self._sk, ct)  # validates ct
        basis = self.ctx.rlwe.q_at(ct.level)
        return crt_lift(basis, basis.intt(phase))

    def _budget(self, x: np.ndarray, big_q: int) -> float:
        scaled = (x * self.ctx.t) % big_q
        norm = int(np.max(np.where(scaled > big_q // 2, big_q - scaled, scaled)))
        if norm == 0:
            return math.log2(big_q) - 1
        return max(0.0, math.log2(big_q) - 1 - math.log2(norm))

    def invariant_noise_budget(self, ct: Ciphertext) -> float:
        """-log2(2 |v|_inf) in bits, v the invariant noise (0 when decryption fails); see the
        module docstring. Works for any degree (before or after relinearization)."""
        return self._budget(*self._phase(ct))

    def decrypt(self, ct: Ciphertext, *, check: bool = True) -> Plaintext:
        """round(t/Q_l [c0 + c1 s + ...]_{Q_l}) mod t, exactly. With ``check`` (default), raises
        DecryptionError when the noise budget is below ``MIN_BUDGET_BITS`` (exhausted noise)."""
        x, big_q = self._phase(ct)
        if check:
            budget = self._budget(x, big_q)
            if budget < MIN_BUDGET_BITS:
                raise DecryptionError(f"decrypt: the noise budget is exhausted ({budget:.2f} bits left, "
                                      f"need >= {MIN_BUDGET_BITS}); the result would be wrong")
        t = self.ctx.t
        m = ((x * t + big_q // 2) // big_q) % t
        plain = Plaintext(torch.from_numpy(m.astype(np.int64)).to(self.ctx.device), self.ctx.params_id)
        return mark_canonical(plain)
