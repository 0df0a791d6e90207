"""Secret, public and switching keys (hybrid key switching, HK20), and the evaluation key set.

Layouts (all NTT domain, generated at the top level L, usable at every level l <= L):
    SecretKey.data      ``[alpha + L + 1, N]`` s over QP_L = (P, Q_L)
    PublicKey.data      ``[2, L + 1, N]``     (b, a) over Q_L with b = -a s + e
    SwitchingKey.data   ``[dnum, 2, alpha + L + 1, N]`` over QP_L; digit j holds (b_j, a_j) with
                        b_j = -a_j s + e_j + P * g_j * s'   (s' -> s)
where g_j = (Q/Q_j) * [(Q/Q_j)^-1]_{Q_j} is the CRT gadget of digit j: g_j = 1 mod the primes of
digit j and 0 mod every other q_i (and P * g_j = 0 mod P), so P * g_j * s' only touches the
rows of digit j, and the key restricted to QP_l (prefix views) is the key of level l.

Linear key switching (``ctx.key_switching == "linear"``, :mod:`fhe_core.rlwe.linear_switching`) uses the same
construction with one prime per digit (L + 1 digits), preprocessed once into the auxiliary base {m_k}:
    SwitchingKey.data   ``[L + 1, alpha + L + 1, 2, A, N]``: digit i, target prime t of QP_L, component (b, a),
                        aux prime m_k: NTT_{m_k}([k_i]_t * (M/m_k)^-1 mod m_k), [k_i]_t read as an integer
                        polynomial with coefficients in [0, t)
(digit-major, then target rows: a level's part is a prefix of each digit's rows, contiguous). ``method`` records
which of the two a key is for; a context refuses the other's.

An :class:`EncapsulationKey` is a switching key of one digit (gadget P alone) between the main secret
and a sparse ephemeral one (sparse-secret encapsulation for bootstrapping, :mod:`fhe_core.rlwe.encapsulation`).

Every key gets its own seeds (see ``sampling``); the public ``uniform_seed`` kept on public and
switching keys regenerates their ``a`` parts, so they can be stored compressed.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import torch

from fhe_core import ops
from fhe_core.errors import MissingKeyError, ParameterError, ParamsMismatchError
from fhe_core.rlwe.checks import check_params_id, check_tensor
from fhe_core.rlwe.context import RLWEContext
from fhe_core.rlwe.galois import check_galois_element, rotation_for_galois_element
from fhe_core.rlwe.sampling import (
    Domain, Seeds, error_ntt, nonce, seeds_for, sub_seed, ternary_ntt, uniform_ntt,
)


@dataclass(frozen=True, kw_only=True, eq=False)
class SecretKey:
    """A ternary secret s. ``data``: ``[alpha + L + 1, N]`` int64, NTT domain over QP_L (P first).
    ``seed`` is the master seed that regenerates it (secret, like the key). Client side only."""

    data: torch.Tensor = field(repr=False)
    params_id: str
    hamming_weight: int
    seed: bytes = field(repr=False)


@dataclass(frozen=True, kw_only=True, eq=False)
class PublicKey:
    """(b, a) = (-a s + e, a): ``data`` ``[2, L + 1, N]`` int64, NTT domain over Q_L."""

    data: torch.Tensor = field(repr=False)
    params_id: str
    uniform_seed: bytes = field(repr=False)


@dataclass(frozen=True, kw_only=True, eq=False)
class SwitchingKey:
    """A key switching s' -> s. Hybrid: ``data`` ``[dnum, 2, alpha + L + 1, N]`` int64, NTT domain over
    QP_L; ``data[j, 0]`` = b_j, ``data[j, 1]`` = a_j (regenerable from ``uniform_seed``). Linear
    (``method="linear"``): the preprocessed form ``[L + 1, alpha + L + 1, 2, A, N]`` of the module docstring."""

    data: torch.Tensor = field(repr=False)
    params_id: str
    uniform_seed: bytes = field(repr=False)
    method: str = "hybrid"


@dataclass(frozen=True, kw_only=True, eq=False)
class RelinKey(SwitchingKey):
    """Switches s^2 -> s (relinearization)."""


@dataclass(frozen=True, kw_only=True, eq=False)
class GaloisKey(SwitchingKey):
    """Switches sigma_k(s) -> s for the Galois element k = ``galois_element``."""

    galois_element: int


DENSE_TO_SPARSE = "dense_to_sparse"
SPARSE_TO_DENSE = "sparse_to_dense"
ENCAPSULATION_DIRECTIONS = (DENSE_TO_SPARSE, SPARSE_TO_DENSE)
EPHEMERAL_ID_BYTES = 16


@dataclass(frozen=True, kw_only=True, eq=False)
class EncapsulationKey(SwitchingKey):
    """One key of sparse-secret encapsulation (Bossuat, Troncoso-Pastoriza and Hubaux, ACNS 2022): a
    one-digit key (b, a) with b = -a s_to + e + P' s_from, for inputs that are a single small digit.

    ``direction`` DENSE_TO_SPARSE: main secret s -> ephemeral s', over (p_0, q_0) only, ``data``
    ``[1, 2, 2, N]`` (P' = p_0: the sparse secret is exposed at this small modulus alone);
    SPARSE_TO_DENSE: s' -> s over QP_L, ``data`` ``[1, 2, alpha + L + 1, N]`` (P' = P), for the
    lift of a level-0 polynomial (|d| < q_0 / 2, so it needs no decomposition).
    ``ephemeral_weight``: h' of s'; ``ephemeral_id``: a public tag of s' (16 bytes) that the two keys of
    one ephemeral secret share, so that a mixed pair is refused."""

    direction: str
    ephemeral_weight: int
    ephemeral_id: bytes


# ---- views ---------------------------------------------------------------------------------------

def secret_over_q(ctx: RLWEContext, sk: SecretKey, level: int) -> torch.Tensor:
    """``[l+1, N]`` view of s over Q_l (NTT domain)."""
    return sk.data[ctx.alpha:ctx.alpha + level + 1]


def check_secret_key(ctx: RLWEContext, sk: SecretKey, op: str) -> None:
    if not isinstance(sk, SecretKey):
        raise ParameterError(f"{op}: expected a SecretKey, got {type(sk).__name__}")
    check_params_id(ctx, sk, op, "the secret key")
    check_tensor(ctx, sk.data, (len(ctx.qp_basis), ctx.n), op, "the secret key")


def switching_key_shape(ctx: RLWEContext) -> tuple[int, ...]:
    """The shape of ``SwitchingKey.data`` for this context's key-switching method."""
    rows = len(ctx.qp_basis)
    if ctx.key_switching == "linear":
        return (ctx.max_level + 1, rows, 2, len(ctx.linear.aux), ctx.n)
    return (ctx.dnum, 2, rows, ctx.n)


def check_switching_key(ctx: RLWEContext, key: SwitchingKey, op: str) -> None:
    if not isinstance(key, SwitchingKey):
        raise ParameterError(f"{op}: expected a SwitchingKey, got {type(key).__name__}")
    if key.method != ctx.key_switching:  # before params_id: the two methods' parameter sets differ in it
        raise ParamsMismatchError(f"{op}: the switching key was made for {key.method} key switching, the context "
                                  f"switches keys by the {ctx.key_switching} method (params key_switching)")
    check_params_id(ctx, key, op, "the switching key")
    check_tensor(ctx, key.data, switching_key_shape(ctx), op, "the switching key")


# ---- generation ------------------------------------------------------------------------------------

def gen_secret_key(ctx: RLWEContext, *, seed: bytes | None = None) -> SecretKey:
    """A fresh ternary secret (Hamming weight ``ctx.hamming_weight``, or uniform if 0).
    ``seed``: tests only."""
    seeds = seeds_for(ctx, seed, "gen_secret_key")
    s = ternary_ntt(ctx.qp_basis, seeds.secret, nonce(Domain.SECRET_KEY, 0), ctx.hamming_weight)
    return SecretKey(data=s, params_id=ctx.params_id, hamming_weight=ctx.hamming_weight, seed=seeds.master)


def gen_public_key(ctx: RLWEContext, sk: SecretKey, *, seed: bytes | None = None) -> PublicKey:
    """(b, a) = (-a s + e, a) over Q_L. ``seed``: tests only."""
    check_secret_key(ctx, sk, "gen_public_key")
    seeds = seeds_for(ctx, seed, "gen_public_key")
    q = ctx.q_basis
    a = uniform_ntt(q, seeds.uniform, nonce(Domain.KEY_UNIFORM, 0))
    e = error_ntt(q, seeds.secret, nonce(Domain.KEY_ERROR, 0), ctx.error_eta)
    b = ops.sub(e, ops.mul(a, secret_over_q(ctx, sk, ctx.max_level), q.moduli), q.moduli)
    return PublicKey(data=torch.stack((b, a)), params_id=ctx.params_id, uniform_seed=seeds.uniform)


def switching_key_uniform(ctx: RLWEContext, uniform_seed: bytes, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """The a_j of a switching key from its uniform seed: hybrid ``[dnum, alpha + L + 1, N]``; linear, preprocessed,
    ``[L + 1, alpha + L + 1, A, N]`` (``data[:, :, 1]``). ``out``: a tensor of that shape to write them into, e.g.
    the a half of a key being loaded (each digit written once, no stacked copy)."""
    qp, linear = ctx.qp_basis, ctx.key_switching == "linear"
    rows, digits = len(qp), _digit_count(ctx)
    shape = (digits, rows, len(ctx.linear.aux), ctx.n) if linear else (digits, rows, ctx.n)
    if out is None:
        out = torch.empty(shape, dtype=torch.int64, device=ctx.device)
    elif tuple(out.shape) != shape:
        raise ParameterError(f"switching_key_uniform: out has shape {list(out.shape)}, the a_j need {list(shape)}")
    for j in range(digits):
        a = uniform_ntt(qp, uniform_seed, nonce(Domain.KEY_UNIFORM, j))
        out[j] = linear_preprocess(ctx, a[None])[:, 0] if linear else a
    return out


def _digit_count(ctx: RLWEContext) -> int:
    """The key's digits: dnum of alpha primes (hybrid), L + 1 of one prime (linear)."""
    return ctx.max_level + 1 if ctx.key_switching == "linear" else ctx.dnum


def linear_preprocess(ctx: RLWEContext, parts: torch.Tensor) -> torch.Tensor:
    """A linear key's digit in its preprocessed form: parts ``[c, alpha + L + 1, N]`` (NTT domain over QP_L) ->
    ``[alpha + L + 1, c, A, N]``: each row's coefficients (in [0, t), below 4 m_k: the forward NTT takes them as
    they are) transformed mod every auxiliary prime and multiplied by (M/m_k)^-1 (the CRT's factor, once here
    instead of once per key switch)."""
    base = ctx.linear
    coeffs = ctx.qp_basis.intt(parts).transpose(0, 1)                      # [rows, c, N]
    lifted = coeffs[:, :, None, :].expand(-1, -1, len(base.aux), -1).contiguous()
    base.aux.ntt(lifted, out=lifted)
    return ops.mul_const(lifted, base.m_hat_inv, base.m_hat_inv_shoup, base.aux.moduli, out=lifted)


def _digit_rows(ctx: RLWEContext) -> list[slice]:
    """The Q rows (within QP_L) of each gadget digit of a switching key: alpha primes each (hybrid), one (linear)."""
    alpha, size = ctx.alpha, 1 if ctx.key_switching == "linear" else ctx.alpha
    return [slice(alpha + j * size, alpha + min((j + 1) * size, ctx.max_level + 1)) for j in range(_digit_count(ctx))]


def _switching_key_data(ctx: RLWEContext, s_to: torch.Tensor, s_from: torch.Tensor, seeds: Seeds,
                        digits: list[slice] | None = None) -> torch.Tensor:
    """The key's data (:func:`switching_key_shape`): digit j is (b_j, a_j) with b_j = -a_j s_to + e_j + P g_j s_from
    (s_to, s_from over QP_L), built digit by digit in the one output buffer (a key is 100+ MB at N = 2^16: no stacked
    copies, and the per-digit temporaries are reused rather than faulted in fresh); a linear key's digits are single
    primes, each preprocessed (:func:`linear_preprocess`) as it is made. ``digits``: the Q rows of each digit's
    gadget, in the hybrid layout ``[len(digits), 2, alpha + L + 1, N]`` (one slice of every Q row: the one-digit
    gadget P); default: the context's own digits."""
    qp, alpha, moduli = ctx.qp_basis, ctx.alpha, ctx.qp_basis.moduli
    linear = digits is None and ctx.key_switching == "linear"
    digits = _digit_rows(ctx) if digits is None else digits
    gadget = ops.mul_const(s_from[alpha:], ctx.p_mod_q, ctx.p_mod_q_shoup, ctx.q_basis.moduli)  # P s' mod q_i
    shape = switching_key_shape(ctx) if linear else (len(digits), 2, len(qp), ctx.n)
    data = torch.empty(shape, dtype=torch.int64, device=ctx.device)
    digit = torch.empty((2, len(qp), ctx.n), dtype=torch.int64, device=ctx.device) if linear else None
    for j, rows in enumerate(digits):
        b, a = digit if linear else data[j]
        a.copy_(uniform_ntt(qp, seeds.uniform, nonce(Domain.KEY_UNIFORM, j)))
        e = ops.sample_cbd(moduli, ctx.n, seeds.secret, nonce(Domain.KEY_ERROR, j), ctx.error_eta)
        ops.sub(qp.ntt(e, out=e), ops.mul(a, s_to, moduli, out=b), moduli, out=b)
        ops.add(b[rows], gadget[rows.start - alpha:rows.stop - alpha], moduli[rows], out=b[rows])
        if linear:
            data[j] = linear_preprocess(ctx, digit)
    return data


def one_digit_key_data(ctx: RLWEContext, s_to: torch.Tensor, s_from: torch.Tensor, seeds: Seeds) -> torch.Tensor:
    """``[1, 2, alpha + L + 1, N]``: (b, a) with b = -a s_to + e + P s_from over QP_L: the key of inputs that
    need no decomposition (a small d: d (b, a) / P ~ d s_from)."""
    return _switching_key_data(ctx, s_to, s_from, seeds, [slice(ctx.alpha, ctx.alpha + ctx.max_level + 1)])


def gen_switching_key(ctx: RLWEContext, sk_from: SecretKey, sk_to: SecretKey, *,
                      seed: bytes | None = None) -> SwitchingKey:
    """A key switching ciphertexts under ``sk_from`` (s') to ``sk_to`` (s). ``seed``: tests only."""
    check_secret_key(ctx, sk_from, "gen_switching_key")
    check_secret_key(ctx, sk_to, "gen_switching_key")
    seeds = seeds_for(ctx, seed, "gen_switching_key")
    return SwitchingKey(data=_switching_key_data(ctx, sk_to.data, sk_from.data, seeds), params_id=ctx.params_id,
                        uniform_seed=seeds.uniform, method=ctx.key_switching)


def gen_relin_key(ctx: RLWEContext, sk: SecretKey, *, seed: bytes | None = None) -> RelinKey:
    """The switching key s^2 -> s. ``seed``: tests only."""
    check_secret_key(ctx, sk, "gen_relin_key")
    seeds = seeds_for(ctx, seed, "gen_relin_key")
    s_squared = ops.mul(sk.data, sk.data, ctx.qp_basis.moduli)
    return RelinKey(data=_switching_key_data(ctx, sk.data, s_squared, seeds), params_id=ctx.params_id,
                    uniform_seed=seeds.uniform, method=ctx.key_switching)


def gen_galois_key(ctx: RLWEContext, sk: SecretKey, galois_element: int, *,
                   seed: bytes | None = None) -> GaloisKey:
    """The switching key sigma_k(s) -> s for k = ``galois_element``. ``seed``: tests only."""
    check_secret_key(ctx, sk, "gen_galois_key")
    k = check_galois_element(galois_element, ctx.n, "gen_galois_key")
    seeds = seeds_for(ctx, seed, "gen_galois_key")
    s_k = ops.automorphism_ntt(sk.data, ctx.qp_basis.moduli, k)
    return GaloisKey(data=_switching_key_data(ctx, sk.data, s_k, seeds), params_id=ctx.params_id,
                     uniform_seed=seeds.uniform, galois_element=k, method=ctx.key_switching)


def gen_eval_keys(ctx: RLWEContext, sk: SecretKey, galois_elements: Iterable[int] = (), *,
                  relin: bool = True, seed: bytes | None = None) -> EvalKeySet:
    """An EvalKeySet with a relinearization key (if ``relin``) and one Galois key per element.
    ``seed``: tests only (each key then gets its own seed derived from it)."""
    relin_key = gen_relin_key(ctx, sk, seed=sub_seed(seed, "relin")) if relin else None
    galois = [gen_galois_key(ctx, sk, k, seed=sub_seed(seed, f"galois/{k}")) for k in dict.fromkeys(galois_elements)]
    return EvalKeySet(ctx.params_id, relin=relin_key, galois=galois)


# ---- the key set ---------------------------------------------------------------------------------

class EvalKeySet:
    """The evaluation keys of one session: an optional relinearization key, Galois keys by
    element and the encapsulation keys by direction. It knows what it holds; a missing key raises
    MissingKeyError naming the operation. Holds no secret key, so evaluators and servers may keep one."""

    def __init__(self, params_id: str, *, relin: RelinKey | None = None, galois: Iterable[GaloisKey] = (),
                 encapsulation: Iterable[EncapsulationKey] = ()):
        self.params_id = params_id
        self._relin: RelinKey | None = None
        self._galois: dict[int, GaloisKey] = {}
        self._encapsulation: dict[str, EncapsulationKey] = {}
        if relin is not None:
            self.add(relin)
        for key in (*galois, *encapsulation):
            self.add(key)

    def add(self, key: RelinKey | GaloisKey | EncapsulationKey) -> None:
        """Insert (or replace) a key of this parameter set."""
        if key.params_id != self.params_id:
            raise ParamsMismatchError(f"EvalKeySet.add: key belongs to params {key.params_id!r}, "
                                      f"the set to {self.params_id!r}")
        if isinstance(key, GaloisKey):
            self._galois[key.galois_element] = key
        elif isinstance(key, RelinKey):
            self._relin = key
        elif isinstance(key, EncapsulationKey):
            self._encapsulation[key.direction] = key
        else:
            raise ParameterError(f"EvalKeySet.add: expected a RelinKey, GaloisKey or EncapsulationKey, got "
                                 f"{type(key).__name__}")

    @property
    def has_relin(self) -> bool:
        return self._relin is not None

    @property
    def encapsulation_directions(self) -> frozenset[str]:
        """The directions (DENSE_TO_SPARSE, SPARSE_TO_DENSE) of the encapsulation keys held."""
        return frozenset(self._encapsulation)

    def encapsulation_key(self, direction: str, op: str) -> EncapsulationKey:
        """The encapsulation key of ``direction`` (MissingKeyError naming ``op`` if absent)."""
        try:
            return self._encapsulation[direction]
        except KeyError:
            raise MissingKeyError(f"{op}: the key set holds no {direction} encapsulation key") from None

    def encapsulation_keys(self, op: str) -> tuple[EncapsulationKey, EncapsulationKey]:
        """(dense -> sparse, sparse -> dense): both held, of one ephemeral secret (else MissingKeyError /
        ParameterError naming ``op``)."""
        to_sparse, to_dense = (self.encapsulation_key(d, op) for d in ENCAPSULATION_DIRECTIONS)
        if to_sparse.ephemeral_id != to_dense.ephemeral_id:
            raise ParameterError(f"{op}: the two encapsulation keys belong to different ephemeral secrets "
                                 f"(ids {to_sparse.ephemeral_id.hex()} and {to_dense.ephemeral_id.hex()}): "
                                 "generate them together (rlwe.gen_encapsulation_keys)")
        return to_sparse, to_dense

    @property
    def galois_elements(self) -> frozenset[int]:
        return frozenset(self._galois)

    def __contains__(self, galois_element: int) -> bool:
        return galois_element in self._galois

    def rotation_steps(self, n: int) -> tuple[list[int], bool]:
        """(sorted left-rotation steps r with a key for 5^r, whether conjugation has a key)."""
        steps, conj = [], False
        for k in self._galois:
            r, is_conj = rotation_for_galois_element(k, n)
            if is_conj and r == 0:
                conj = True
            elif not is_conj:
                steps.append(r)
        return sorted(steps), conj

    def relin_key(self, op: str) -> RelinKey:
        if self._relin is None:
            raise MissingKeyError(f"{op}: the key set holds no relinearization key")
        return self._relin

    def galois_key(self, galois_element: int, op: str) -> GaloisKey:
        try:
            return self._galois[galois_element]
        except KeyError:
            held = sorted(self._galois)
            raise MissingKeyError(f"{op}: no Galois key for element {galois_element} "
                                  f"(the key set holds {held})") from None

    def __repr__(self) -> str:
        return (f"EvalKeySet(params_id={self.params_id!r}, relin={self.has_relin}, "
                f"galois_elements={sorted(self._galois)}, encapsulation={sorted(self._encapsulation)})")
