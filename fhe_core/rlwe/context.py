"""The RLWE context: public parameters of one modulus chain and its per-level tables.

Bases and layout
    Q_l = (q_0, ..., q_l)      the ciphertext modulus at level l (every level is a prefix of Q_L)
    P   = (p_0, ..., p_{a-1})  the special primes of hybrid key switching, alpha = len(P)
    QP_l = (p_0, ..., p_{a-1}, q_0, ..., q_l)   the extended basis at level l, **P first**

Putting P first makes every QP_l a prefix of one basis QP_L, so all levels share one NTT table
(views, no copies) and a key generated over QP_L restricts to level l by a prefix view of each of
its rows. Digit j of the gadget decomposition (HK20) holds the primes q_{j*alpha} ..
q_{(j+1)*alpha - 1}; at level l only the dnum_l = ceil((l+1)/alpha) digits that meet Q_l are
used, the last one possibly truncated.

With ``key_switching="linear"`` the context also holds the auxiliary base of linear key switching
(:class:`LinearBase`, :mod:`fhe_core.rlwe.linear_switching`), checked at construction.

A context holds no key. It lives on one device; every table is built once and cached. Its kernel plan
(:class:`fhe_core.ops.KernelPlan`, resolved once from the device, N and the primes) says which implementation each
step runs; its bases carry it to the ops.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

import torch

from fhe_core import ops
from fhe_core.errors import LevelMismatchError, ParameterError
from fhe_core.ops import KernelPlan
from fhe_core.params.security import meets_128_bits
from fhe_core.ring import (
    BasisConverter, RNSBasis, modulus_table, ntt_primes, resolve_device, shoup_constants, words_tensor,
)

MAX_CBD_ETA = 32  # the sampler's limit


@dataclass(frozen=True, eq=False)
class ExtensionPart:
    """A contiguous run of QP_l rows outside a digit, with the Conv constants onto it."""

    start: int                # first QP_l row
    stop: int                 # one past the last
    basis: RNSBasis           # those rows of QP_l (table views)
    qhat_mod_p: torch.Tensor  # [|D_j|, stop - start] (Q_j/q_i) mod each of those primes


@dataclass(frozen=True, eq=False)
class DigitExtension:
    """How ModUp extends digit j (primes D_j, Q rows start..stop-1) to QP_l = (P, Q_l).

    On its own rows the extended digit equals the input (the residues of [d]_{Q_j} mod q_i are
    those of d), so ModUp copies them, still in the NTT domain; only the other rows (at most two
    runs, ``parts``) are converted and transformed. Their values are [d]_{D_j} + u * Q_j with
    0 <= u < |D_j| (the usual approximate extension of HK20).
    """

    start: int               # first Q row of the digit
    stop: int                # one past its last Q row
    own_start: int           # its first row in QP_l (alpha + start)
    src_moduli: torch.Tensor  # [|D_j|, 4] view of Q's moduli
    qhat_inv: torch.Tensor    # [|D_j|] (Q_j/q_i)^-1 mod q_i
    qhat_inv_shoup: torch.Tensor
    parts: tuple[ExtensionPart, ...]


@dataclass(frozen=True, eq=False)
class BatchedModUp:
    """Constants of ``ops.mod_up_conv``: every digit extended by one kernel, then one NTT."""

    qhat_inv: torch.Tensor        # [l+1] (Q_j/q_k)^-1 mod q_k within each prime's digit
    qhat_inv_shoup: torch.Tensor
    qhat_mod_p: torch.Tensor      # [dnum_l, alpha, alpha + l + 1], zero past the last digit's primes
    mma_fragments: torch.Tensor | None = None  # ops.conv_mma_fragments of qhat_mod_p (CUDA, alpha <= 16)


# Small digits favour one batched ModUp (a few launches, own rows recomputed) over the per-digit
# path (copy own rows, convert and transform the rest: ~7 launches per digit). Measured on an H200:
# alpha = 1 (BFV, dnum up to 15) gains from batching; alpha = 11, dnum = 3 (CKKS N=2^16) does not.
BATCHED_MODUP_MAX_ALPHA = 4


@dataclass(frozen=True, eq=False)
class LevelTables:
    """Everything key switching needs at one level l (built once per context and level)."""

    level: int
    q: RNSBasis                     # Q_l
    qp: RNSBasis                    # QP_l (P first)
    digits: tuple[DigitExtension, ...]  # ModUp: one per digit meeting Q_l
    batched_mod_up: BatchedModUp    # ModUp of every digit in one Conv (KernelPlan.mod_up_in_one_launch)
    p_to_q: BasisConverter          # ModDown: Conv_{P -> Q_l}
    p_inv: torch.Tensor             # [l+1] P^-1 mod q_i
    p_inv_shoup: torch.Tensor
                                    # (coefficient domain; a prefix view of one tensor): ModDown rounding


# Linear key switching's auxiliary primes: the largest NTT-friendly primes the kernels take (61 bits), two where their
# product covers the bound (the paper's choice), else three (a 60-bit q_0 needs three at every N: see
# linear_aux_primes); no parameter set the params layer accepts needs more.
LINEAR_AUX_BITS = 61
LINEAR_MAX_AUX_PRIMES = 3


def linear_aux_primes(n: int, digit_primes: Sequence[int], target_primes: Sequence[int],
                      max_count: int | None = None) -> tuple[int, ...]:
    """The auxiliary base {m_k} of linear key switching: the fewest of the largest 61-bit primes = 1 mod 2N outside
    the parameters' primes whose product M satisfies M > 4 B, with B = N * max(target) * sum(digit primes).

    Why B: the key switch computes, for each target prime t of QP, the integer negacyclic products
    sum_i [c]_{q_i} * [k_i]_t with [c]_{q_i} in [0, q_i) and [k_i]_t in [0, t): each coefficient is a sum of
    N * (l + 1) terms of either sign, so |x| < N * t * sum_i q_i <= B. With M > 4 B the centred CRT of x from its
    residues mod m_k is exact, and the float64 estimate of x's multiple of M (|x| / M < 1/4) rounds correctly with a
    margin of 1/4, so the result does not depend on how either backend rounds. For a 60-bit q_0 at N = 2^10,
    B > 2^(10 + 60 + 60) = 2^130 already exceeds two 61-bit primes' 2^122 / 4: such sets take three.
    Raises ParameterError when ``max_count`` (default :data:`LINEAR_MAX_AUX_PRIMES`) primes cannot cover the
    bound."""
    max_count = LINEAR_MAX_AUX_PRIMES if max_count is None else max_count
    bound = n * max(target_primes) * sum(digit_primes)
    excluded = set(digit_primes) | set(target_primes)
    candidates = ntt_primes(LINEAR_AUX_BITS, n, max_count, exclude=excluded)
    for count in range(2, max_count + 1):
        if prod(candidates[:count]) > 4 * bound:
            return tuple(candidates[:count])
    raise ParameterError(f"linear key switching: {max_count} auxiliary primes of {LINEAR_AUX_BITS} bits (product "
                         f"2^{math.log2(prod(candidates)):.1f}) cannot hold the products' bound 4 N t_max sum(q_i) = "
                         f"2^{math.log2(4 * bound):.1f}; use smaller primes or hybrid key switching")


@dataclass(frozen=True, eq=False)
class LinearBase:
    """The auxiliary base of linear key switching and its exact CRT to every prime of QP_L.

    The CRT of y_k = [x * (M/m_k)^-1]_{m_k} (the keys carry the factor (M/m_k)^-1, so the inverse NTTs give y_k):
    x = sum_k y_k (M/m_k) - v M with v = round(sum_k y_k / m_k), hence mod each target t:
    [x]_t = sum_k [y_k]_t [M/m_k]_t - [v]_t [M]_t."""

    aux: RNSBasis                     # m_0..m_{A-1}, with NTT tables
    m_hat_inv: torch.Tensor           # [A] (M/m_k)^-1 mod m_k (key preprocessing), Shoup below
    m_hat_inv_shoup: torch.Tensor
    m_float: torch.Tensor             # [A, 1] float64 m_k (the estimate of v)
    targets: torch.Tensor             # [alpha + L + 1, 1] int64: the primes of QP_L (torch.remainder)
    m_hat_mod_t: torch.Tensor         # [A, alpha + L + 1] (M/m_k) mod t, Shoup below
    m_hat_mod_t_shoup: torch.Tensor
    m_mod_t: torch.Tensor             # [alpha + L + 1] M mod t, Shoup below
    m_mod_t_shoup: torch.Tensor

    @classmethod
    def build(cls, n: int, digit_primes: Sequence[int], target_primes: Sequence[int], device,
              plan: KernelPlan) -> LinearBase:
        primes = linear_aux_primes(n, digit_primes, target_primes)
        big_m = prod(primes)
        m_hat = [big_m // m for m in primes]
        inv, inv_shoup = shoup_constants([pow(h % m, -1, m) for h, m in zip(m_hat, primes)], primes, device)
        pairs = [shoup_constants([h % t for t in target_primes], target_primes, device) for h in m_hat]
        m_mod_t, m_mod_t_shoup = shoup_constants([big_m % t for t in target_primes], target_primes, device)
        return cls(aux=RNSBasis.get(primes, n, device).with_plan(plan), m_hat_inv=inv, m_hat_inv_shoup=inv_shoup,
                   m_float=torch.tensor(primes, dtype=torch.float64, device=device).reshape(-1, 1),
                   targets=words_tensor(target_primes, device).reshape(-1, 1),
                   m_hat_mod_t=torch.stack([c for c, _ in pairs]), m_hat_mod_t_shoup=torch.stack([w for _, w in pairs]),
                   m_mod_t=m_mod_t, m_mod_t_shoup=m_mod_t_shoup)


def _content_id(n: int, q: Sequence[int], p: Sequence[int], h: int, eta: int, key_switching: str) -> str:
    text = f"rlwe/n={n}/q={','.join(map(str, q))}/p={','.join(map(str, p))}/h={h}/eta={eta}"
    if key_switching != "hybrid":  # (hybrid ids as before the method existed)
        text += f"/ks={key_switching}"
    return "rlwe-" + hashlib.sha256(text.encode()).hexdigest()[:16]


class RLWEContext:
    """Public parameters of an RLWE scheme over Z[X]/(X^N + 1) with hybrid key switching.

    Args:
        n: ring degree N (a power of two, 2^10..2^17).
        q_primes: q_0..q_L, the ciphertext chain (level l uses the first l+1).
        p_primes: the alpha special primes; dnum = ceil((L+1)/alpha) digits of alpha primes.
        key_switching: "hybrid" (HK20) or "linear" (one prime per digit, :mod:`fhe_core.rlwe.linear_switching`);
            the keys this context makes and takes are of that method. Linear checks its auxiliary base here
            (:func:`linear_aux_primes`).
        device: where every table, key and ciphertext of this context lives.
        hamming_weight: secrets with exactly h nonzero coefficients; 0 for uniform ternary.
        error_eta: errors from the centered binomial distribution with parameter eta
            (variance eta/2; 21 gives sigma ~ 3.24).
        params_id: stamped on every object this context creates; defaults to a hash of the
            content above. ``Params`` objects give their own (see :meth:`from_params`).
        plan: the kernel plan (which implementation each step runs); default: ``KernelPlan.resolve`` for
            this device, N and primes. Every plan gives the same residues.

    No security check happens here: the params layer decides which parameters are acceptable.
    ``meets_128_bits`` records whether they reach 128 bits; such contexts refuse fixed test
    seeds (:func:`fhe_core.rlwe.sampling.seeds_for`).
    """

    def __init__(self, n: int, q_primes: Sequence[int], p_primes: Sequence[int],
                 device: torch.device | str = "cpu", *, hamming_weight: int = 0, error_eta: int = 21,
                 params_id: str | None = None, plan: KernelPlan | None = None, key_switching: str = "hybrid"):
        self.n = int(n)
        self.q_primes = tuple(int(q) for q in q_primes)
        self.p_primes = tuple(int(p) for p in p_primes)
        self.hamming_weight = int(hamming_weight)
        self.error_eta = int(error_eta)
        self.key_switching = key_switching
        self._validate()
        device = resolve_device(device, "RLWEContext")
        self.alpha = len(self.p_primes)
        self.max_level = len(self.q_primes) - 1
        self.dnum = -(-len(self.q_primes) // self.alpha)
        self.params_id = params_id or _content_id(self.n, self.q_primes, self.p_primes,
                                                  self.hamming_weight, self.error_eta, key_switching)
        all_primes = self.p_primes + self.q_primes
        self.plan = (KernelPlan.resolve(device, self.n, all_primes) if plan is None else plan).on(device)
        self.q_basis = RNSBasis.get(self.q_primes, self.n, device).with_plan(self.plan)
        self.p_basis = RNSBasis.get(self.p_primes, self.n, device).with_plan(self.plan)
        self.qp_basis = RNSBasis.get(all_primes, self.n, device).with_plan(self.plan)
        # the device the tables actually live on ("cuda" resolves to "cuda:<index>"): every
        # tensor of this context is compared against it
        self.device = self.q_basis.moduli.device
        self.big_p = prod(self.p_primes)
        # P mod q_i for the gadget P * g_j of the switching keys (level independent per row)
        self.p_mod_q, self.p_mod_q_shoup = shoup_constants(
            [self.big_p % q for q in self.q_primes], self.q_primes, self.device)
        self._level_tables: dict[int, LevelTables] = {}
        self.linear = (LinearBase.build(self.n, self.q_primes, all_primes, self.device, self.plan)
                       if key_switching == "linear" else None)
        # 128-bit parameters refuse fixed test seeds (see sampling.seeds_for)
        log_qp = sum(math.log2(p) for p in self.q_primes + self.p_primes)
        self.meets_128_bits = meets_128_bits(self.n.bit_length() - 1, log_qp, self.hamming_weight, self.error_eta)

    @classmethod
    def from_params(cls, params, device: torch.device | str = "cpu", *, plan: KernelPlan | None = None) -> RLWEContext:
        """The context of a validated ``fhe_core.params.Params`` (n, q_primes, p_primes,
        hamming_weight, error_eta, key_switching, params_id), with ``plan`` (default: resolved)."""
        return cls(params.n, params.q_primes, params.p_primes, device,
                   hamming_weight=params.hamming_weight, error_eta=params.error_eta,
                   params_id=params.params_id, plan=plan, key_switching=params.key_switching)

    def _validate(self) -> None:
        if not self.q_primes or not self.p_primes:
            raise ParameterError("an RLWE context needs at least one q prime and one special prime")
        if set(self.q_primes) & set(self.p_primes):
            raise ParameterError("the special primes P must be disjoint from the q primes")
        if not 0 <= self.hamming_weight <= self.n:
            raise ParameterError(f"hamming_weight must be in [0, N={self.n}], got {self.hamming_weight}")
        if self.key_switching not in ("hybrid", "linear"):
            raise ParameterError(f"key_switching must be 'hybrid' or 'linear', got {self.key_switching!r}")
        if not 1 <= self.error_eta <= MAX_CBD_ETA:
            raise ParameterError(f"error_eta must be in [1, {MAX_CBD_ETA}], got {self.error_eta}")

    def __repr__(self) -> str:
        return (f"RLWEContext(N=2^{self.n.bit_length() - 1}, L={self.max_level}, alpha={self.alpha}, "
                f"dnum={self.dnum}, {self.key_switching}, h={self.hamming_weight}, eta={self.error_eta}, "
                f"device={self.device}, params_id={self.params_id!r}, plan={self.plan})")

    # ---- levels ------------------------------------------------------------------------------

    def check_level(self, level: int, op: str) -> int:
        """``level`` as an int in [0, L], or LevelMismatchError naming ``op``."""
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= self.max_level:
            raise LevelMismatchError(f"{op}: level must be an int in [0, {self.max_level}], got {level!r}")
        return level

    def digit_count(self, level: int) -> int:
        """dnum_l = ceil((l+1)/alpha): the digits that meet Q_l."""
        return -(-(level + 1) // self.alpha)

    def q_at(self, level: int) -> RNSBasis:
        """Q_l as an RNSBasis (a prefix view of Q's tables)."""
        return self.tables(level).q

    def qp_at(self, level: int) -> RNSBasis:
        """QP_l = P ∪ Q_l (P first) as an RNSBasis (a prefix view of QP_L's tables)."""
        return self.tables(level).qp

    def tables(self, level: int) -> LevelTables:
        """The cached key-switching tables of ``level``."""
        level = self.check_level(level, "tables")
        if level not in self._level_tables:
            self._level_tables[level] = self._build_tables(level)
        return self._level_tables[level]

    def _build_tables(self, level: int) -> LevelTables:
        q = self.q_basis.prefix(level + 1)
        qp = self.qp_basis.prefix(self.alpha + level + 1)
        p_inv = [pow(self.big_p % qi, -1, qi) for qi in q.primes]
        p_inv_t, p_inv_shoup = shoup_constants(p_inv, q.primes, self.device)
        return LevelTables(
            level=level, q=q, qp=qp, digits=self._digit_extensions(level, q, qp),
            batched_mod_up=self._batched_mod_up(level, q, qp),
            p_to_q=BasisConverter.get(self.p_basis, q), p_inv=p_inv_t, p_inv_shoup=p_inv_shoup)

    def _digit_extensions(self, level: int, q: RNSBasis, qp: RNSBasis) -> tuple[DigitExtension, ...]:
        out = []
        for j in range(self.digit_count(level)):
            start, stop = j * self.alpha, min((j + 1) * self.alpha, level + 1)
            digit = q.primes[start:stop]
            q_j = prod(digit)
            qhat = [q_j // qi for qi in digit]
            inv, inv_shoup = shoup_constants([pow(h % qi, -1, qi) for h, qi in zip(qhat, digit)], digit,
                                             self.device)
            own_start, own_stop = self.alpha + start, self.alpha + stop
            parts = tuple(self._extension_part(qhat, qp, a, b)
                          for a, b in ((0, own_start), (own_stop, len(qp))) if b > a)
            out.append(DigitExtension(start, stop, own_start, q.moduli[start:stop], inv, inv_shoup, parts))
        return tuple(out)

    def _batched_mod_up(self, level: int, q: RNSBasis, qp: RNSBasis) -> BatchedModUp:
        inverses, table = [], []
        for j in range(self.digit_count(level)):
            digit = q.primes[j * self.alpha:min((j + 1) * self.alpha, level + 1)]
            q_j = prod(digit)
            qhat = [q_j // qi for qi in digit]
            inverses += [pow(h % qi, -1, qi) for h, qi in zip(qhat, digit)]
            padded = qhat + [0] * (self.alpha - len(qhat))
            table += [h % r for h in padded for r in qp.primes]
        inv, inv_shoup = shoup_constants(inverses, q.primes, self.device)
        table_cpu = words_tensor(table).reshape(-1, self.alpha, len(qp))
        fragments = None
        if torch.device(self.device).type == "cuda" and self.alpha <= 16:
            fragments = ops.conv_mma_fragments(table_cpu, modulus_table(qp.primes)).to(self.device)
        return BatchedModUp(inv, inv_shoup, table_cpu.to(self.device), fragments)

    def _extension_part(self, qhat: Sequence[int], qp: RNSBasis, start: int, stop: int) -> ExtensionPart:
        rows = qp.rows(start, stop)
        to_dst = words_tensor([h % r for h in qhat for r in rows.primes], self.device)
        return ExtensionPart(start, stop, rows, to_dst.reshape(len(qhat), len(rows)))
