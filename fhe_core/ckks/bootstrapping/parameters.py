"""Bootstrapping parameters: the ciphertext chain and the settings of every circuit piece, with
the depth, the minimum input level and the output level derived from the pieces' own depth
reports (Lattigo's ``bootstrapping.ParametersLiteral`` / ``Parameters``).

**The chain.** Levels are numbered from the bottom (q_0) up. ModRaise lifts a level-0
ciphertext to the top level L; then, in the order ``"cts_first"``,

    CoeffsToSlots   levels L ... L - cts + 1        (one rescale per DFT factor)
    EvalMod         the next ``EvalModParameters.depth`` levels
    SlotsToCoeffs   the next ``stc`` levels
    output          level L - cts - evalmod - stc

and in the order ``"slim"`` SlotsToCoeffs runs first, on the input, from level ``stc`` down to
level 0, and the output is EvalMod's, at level L - cts - evalmod. In both orders

    depth = cts + evalmod + stc = L - output_level + min_input_level.

EvalMod and CoeffsToSlots need large primes, 55-60 bits (EvalMod runs at scale q_0, see
:mod:`~fhe_core.ckks.bootstrapping.mod1`); SlotsToCoeffs and the levels left to the
application run at the default scale (45-bit primes in the tiny presets, 40-bit at N = 2^16).
EvalMod's error is amplified by ~4^r R / (2 pi), R = q_0 / Delta the message ratio, which
``log_message_ratio`` lowers by scaling the input up by an integer before ModRaise.

The TINY_* presets at the bottom are tiny and **insecure** (N = 2^10 and 2^11, h = 32; TINY_N10_DENSE a dense
secret with encapsulation): CPU tests only. N16_H192_FULL / N16_H192_SPARSE are the 128-bit N = 2^16 presets
(h = 192; see their comment), N16_DENSE_FULL the one with a dense main secret (sparse-secret encapsulation).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

from fhe_core.ckks.bootstrapping.dft import DFTFactors, coeffs_to_slots_factors, slots_to_coeffs_factors
from fhe_core.ckks.bootstrapping.mod1 import EvalModParameters
from fhe_core.errors import ParameterError
from fhe_core.params import Params, ParamsLiteral, check_encapsulation_security

ORDERS = ("cts_first", "slim")


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParameterError(f"BootstrappingParameters: {name} must be an int >= 1, got {value!r}")
    return value


@dataclass(frozen=True)
class BootstrappingParameters:
    """A bootstrappable parameter set.

    Attributes:
        literal: the CKKS chain (checked here for its depth; validated by ``Params.from_literal``).
        slots: n, a power of two <= N/2 (n < N/2: sparse packing, SubSum runs).
        cts_levels: levels (DFT factors, radix) of CoeffsToSlots, in [1, log2 n].
        stc_levels: levels of SlotsToCoeffs, in [1, log2 n].
        k: EvalMod's interval [-K, K] (|I| <= K - 1 after ModRaise; |I| ~ sqrt(h) in practice).
        degree: degree of EvalMod's Chebyshev interpolant.
        double_angles: EvalMod's double-angle steps r.
        order: ``"cts_first"`` (ModRaise, SubSum, CtS, EvalMod, StC) or ``"slim"`` (StC first).
        log_message_ratio: log2 of R, the ratio q_0 / (message scale) EvalMod works with. None:
            R = q_0 / Delta (the input as it is). Smaller: the level-0 input is first multiplied by
            the integer k = round(q_0 / (Delta 2^log_message_ratio)) (no level, no noise relative to
            the message), so R = q_0 / (k Delta) ~ 2^log_message_ratio. EvalMod's error is
            amplified by ~4^r R / (2 pi), so each bit off R is a bit of precision, until the
            sin(x) ~ x error, (2 pi m / R)^2 / 6 relative on a message m, takes over (Lattigo's
            ``LogMessageRatio``; see :meth:`scale_up_factor`).
        baby_step_factor: a power of two; the DFT transforms use this many times the default BSGS
            baby step n1 (:func:`fhe_core.ckks.lintrans.default_baby_step`, about sqrt(#diagonals)),
            capped at the slot count. With double hoisting a baby step costs an inner product
            and a giant step a ModUp, an inner product and half a ModDown, so more baby steps and
            fewer giant steps are cheaper, for more Galois keys (N16_H192_FULL: 39 keys at 1,
            53 at 2).
        ephemeral_weight: h' > 0: sparse-secret encapsulation (:mod:`fhe_core.rlwe.encapsulation`): the level-0
            input is switched to an ephemeral secret of Hamming weight h' before ModRaise and back to the main
            secret after it, so ModRaise's overflow I is that of h' (K sized for h', not for the main secret,
            which may then be dense); needs the two encapsulation keys. 0: ModRaise under the main secret.
    """

    literal: ParamsLiteral
    slots: int
    cts_levels: int
    stc_levels: int
    k: float = 16.0
    degree: int = 31
    double_angles: int = 4
    order: str = "cts_first"
    log_message_ratio: int | None = None
    baby_step_factor: int = 1
    ephemeral_weight: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.literal, ParamsLiteral) or self.literal.scheme != "ckks":
            raise ParameterError("BootstrappingParameters: literal must be a CKKS ParamsLiteral")
        n = _positive_int("slots", self.slots)
        if n < 2 or n & (n - 1) or 2 * n > 1 << self.literal.log_n:
            raise ParameterError(f"BootstrappingParameters: slots must be a power of two in [2, N/2], got {n}")
        for name in ("cts_levels", "stc_levels"):
            if _positive_int(name, getattr(self, name)) > n.bit_length() - 1:
                raise ParameterError(f"BootstrappingParameters: {name} must be <= log2(slots) = {n.bit_length() - 1}")
        factor = _positive_int("baby_step_factor", self.baby_step_factor)
        if factor & (factor - 1):
            raise ParameterError(f"BootstrappingParameters: baby_step_factor must be a power of two, got {factor}")
        weight = self.ephemeral_weight
        if isinstance(weight, bool) or not isinstance(weight, int) or not 0 <= weight <= self.ring_degree:
            raise ParameterError(f"BootstrappingParameters: ephemeral_weight must be an int in [0, N], got {weight!r}")
        if self.order not in ORDERS:
            raise ParameterError(f"BootstrappingParameters: order must be one of {ORDERS}, got {self.order!r}")
        EvalModParameters(k=self.k, degree=self.degree, double_angles=self.double_angles)  # checks the settings
        if self.log_message_ratio is not None:
            headroom = self.literal.log_q[0] - self.literal.log_default_scale
            if _positive_int("log_message_ratio", self.log_message_ratio) > headroom:
                raise ParameterError(f"BootstrappingParameters: log_message_ratio must be <= log2(q_0 / Delta) = "
                                     f"{headroom}, got {self.log_message_ratio}")
        if self.output_level < self.min_input_level:
            raise ParameterError(f"BootstrappingParameters: the chain has L = {self.max_level} levels; bootstrapping "
                                 f"needs {self.depth} (output level {self.output_level} below the minimum input "
                                 f"level {self.min_input_level}): add levels to the literal")

    # ---- the pieces ------------------------------------------------------------------------------

    @property
    def ring_degree(self) -> int:
        return 1 << self.literal.log_n

    @property
    def max_level(self) -> int:
        """L, the top of the chain (where ModRaise lands)."""
        return len(self.literal.log_q) - 1

    @property
    def sparse_factor(self) -> int:
        """g = N / (2 n): SubSum multiplies the message by g (1 for full packing)."""
        return self.ring_degree // (2 * self.slots)

    @property
    def packs_real_and_imaginary(self) -> bool:
        """True when EvalMod runs once, on the real and imaginary parts packed in the 2n slots of
        one ciphertext: sparse packing (n <= N/4, room for 2n slots) in the order ``cts_first``
        (the first StC factor unpacks them; in the slim order nothing follows EvalMod). Full
        packing needs two ciphertexts of real slots: EvalMod runs twice."""
        return self.order == "cts_first" and self.sparse_factor > 1

    def cts_factors(self) -> DFTFactors:
        """CoeffsToSlots' factors, scaled by 1 / (2 g): absorbs SubSum's g and the 2 of the
        real/imaginary split (see :mod:`~fhe_core.ckks.bootstrapping.dft`)."""
        return coeffs_to_slots_factors(self.slots, self.cts_levels, scaling=1 / (2 * self.sparse_factor))

    def stc_factors(self) -> DFTFactors:
        """SlotsToCoeffs' factors (unscaled)."""
        return slots_to_coeffs_factors(self.slots, self.stc_levels)

    def scale_up_factor(self, params: Params) -> int:
        """k, the integer the level-0 input is multiplied by before ModRaise: 1 without
        ``log_message_ratio``, else round(q_0 / (Delta 2^log_message_ratio)) (>= 1)."""
        if self.log_message_ratio is None:
            return 1
        return max(1, round(params.q_primes[0] / (params.default_scale * 2.0 ** self.log_message_ratio)))

    def eval_mod_parameters(self, params: Params | None = None) -> EvalModParameters:
        """EvalMod's settings; with ``params``, also R = q_0 / (k Delta) (k of
        :meth:`scale_up_factor`), input scale q_0 and output scale Delta (the default scale) from
        its primes (without, the defaults: depth only)."""
        if params is None:
            return EvalModParameters(k=self.k, degree=self.degree, double_angles=self.double_angles)
        q0, delta = float(params.q_primes[0]), float(params.default_scale)
        return EvalModParameters(k=self.k, degree=self.degree, double_angles=self.double_angles,
                                 message_ratio=q0 / (delta * self.scale_up_factor(params)), input_scale=q0,
                                 output_scale=delta)

    # ---- derived levels --------------------------------------------------------------------------

    @property
    def cts_depth(self) -> int:
        """``cts_levels``: one rescale per DFT factor (``cts_factors().depth``, without building them)."""
        return self.cts_levels

    @property
    def stc_depth(self) -> int:
        """``stc_levels`` (``stc_factors().depth``)."""
        return self.stc_levels

    @cached_property
    def eval_mod_depth(self) -> int:
        """EvalMod's depth (its interpolant is computed once per parameter set)."""
        return self.eval_mod_parameters().depth

    @property
    def depth(self) -> int:
        """Levels the whole circuit consumes: CtS + EvalMod + StC (in both orders)."""
        return self.cts_depth + self.eval_mod_depth + self.stc_depth

    @property
    def min_input_level(self) -> int:
        """0 for ``cts_first``; the StC depth for ``slim`` (StC runs on the input)."""
        return self.stc_depth if self.order == "slim" else 0

    @property
    def output_level(self) -> int:
        """L - CtS - EvalMod (- StC for ``cts_first``)."""
        top = self.max_level - self.cts_depth - self.eval_mod_depth
        return top - self.stc_depth if self.order == "cts_first" else top

    def params(self, *, device: str = "cpu", allow_insecure: bool = False) -> Params:
        """``Params.from_literal(literal)`` (``allow_insecure`` for the tiny presets). With encapsulation, also the
        ephemeral secret's check at its small modulus q_0 p_0 (:func:`fhe_core.params.check_encapsulation_security`)."""
        params = Params.from_literal(self.literal, allow_insecure=allow_insecure, device=device)
        if self.ephemeral_weight and not allow_insecure:
            check_encapsulation_security(params.log_n, encapsulation_log_modulus(params), self.ephemeral_weight)
        return params

    @property
    def overflow_weight(self) -> int:
        """The Hamming weight ModRaise sees: the ephemeral one, else the main secret's (2N/3 on average for a
        uniform ternary secret)."""
        return self.ephemeral_weight or self.literal.hamming_weight or round(2 * self.ring_degree / 3)

    def failure_probability(self) -> tuple[float, float]:
        """(per coefficient, per bootstrap): the probability that ModRaise's overflow reaches |I| >= K for one
        coefficient (:func:`overflow_probability` of :attr:`overflow_weight`), and N times it (a union bound over
        the N coefficients a bootstrap raises)."""
        p = overflow_probability(self.overflow_weight, self.k)
        return p, min(1.0, p * self.ring_degree)

    def describe(self) -> str:
        """One line: ring, slots, order, depths and levels, log2 Q, h."""
        return (f"N=2^{self.literal.log_n} slots={self.slots} order={self.order} L={self.max_level} "
                f"depth={self.depth} (CtS {self.cts_depth}, EvalMod {self.eval_mod_depth}, StC {self.stc_depth}) "
                f"input>={self.min_input_level} output={self.output_level} "
                f"logQ={sum(self.literal.log_q)} h={self.literal.hamming_weight}"
                + (f" ephemeral h={self.ephemeral_weight}" if self.ephemeral_weight else ""))


def encapsulation_log_modulus(params: Params) -> float:
    """log2(q_0 p_0): the modulus the dense -> sparse encapsulation key lives at."""
    return math.log2(params.q_primes[0]) + math.log2(params.p_primes[0])


EXACT_OVERFLOW_TERMS = 1024  # beyond this many terms the tail is taken from the normal approximation


def overflow_probability(weight: int, k: float) -> float:
    """P(|I| >= K) for one coefficient of ModRaise's overflow under a secret of Hamming weight ``weight``.

    After the key switch (or a fresh encryption), c_0 and c_1 are uniform mod q_0, so
    (c_0 + c_1 s) / q_0 = S + m / q_0 with S a sum of weight + 1 independent uniforms on [-1/2, 1/2]
    (c_0's and one signed coefficient of c_1 per nonzero of s), and I = round(S) (m / q_0 is negligible).
    EvalMod's |y| < K fails from |I| >= ceil(K) on, i.e. |S| >= ceil(K) - 1/2: exactly, from the Irwin-Hall
    distribution in rational arithmetic (no cancellation) up to EXACT_OVERFLOW_TERMS terms, else the normal
    approximation (variance (weight + 1) / 12).
    This is OpenFHE's per-coefficient failure probability of bootstrapping (its PR 1318).
    """
    terms, threshold = weight + 1, Fraction(2 * math.ceil(k) - 1, 2)
    if terms > EXACT_OVERFLOW_TERMS:
        return math.erfc(float(threshold) / math.sqrt(2 * terms / 12))
    x = Fraction(terms, 2) - threshold  # P(S >= t) = P(U <= n/2 - t), U the Irwin-Hall sum on [0, n]
    if x <= 0:
        return 0.0
    cdf = sum((-1) ** j * math.comb(terms, j) * (x - j) ** terms for j in range(math.floor(x) + 1))
    return float(2 * cdf / math.factorial(terms))


# ---- tiny insecure presets (CPU tests only) ------------------------------------------------------

def _tiny_literal(levels_45: int, levels_60: int, log_n: int = 10) -> ParamsLiteral:
    """N = 2^log_n (default 2^10), h = 32, q_0 60 bits, then ``levels_45`` 45-bit primes (output levels and StC),
    then ``levels_60`` 60-bit primes (EvalMod and CtS), four 61-bit special primes. Insecure."""
    return ParamsLiteral(log_n=log_n, log_q=[60] + [45] * levels_45 + [60] * levels_60, log_p=[61] * 4,
                         log_default_scale=45, hamming_weight=32)


# EvalMod: K = 16, degree 31, r = 4 -> depth 10 (ceil(log2 32) + 1 + 4); failure needs |I| >= 16.
_EVALMOD_DEPTH = 10

TINY_N10_FULL = BootstrappingParameters(
    literal=_tiny_literal(1 + 3, _EVALMOD_DEPTH + 3), slots=512, cts_levels=3, stc_levels=3)
"""N = 2^10, 512 slots (full), CtS 3 + EvalMod 10 + StC 3 levels, one 45-bit level left. Insecure."""

TINY_N10_SPARSE = BootstrappingParameters(
    literal=_tiny_literal(1 + 2, _EVALMOD_DEPTH + 2), slots=64, cts_levels=2, stc_levels=2)
"""N = 2^10, 64 slots (sparse, g = 8), CtS 2 + EvalMod 10 + StC 2, one 45-bit level left. Insecure."""

TINY_N10_SLIM = BootstrappingParameters(
    literal=_tiny_literal(2 + 1, _EVALMOD_DEPTH + 2), slots=64, cts_levels=2, stc_levels=2, order="slim")
"""N = 2^10, 64 slots, slim order: StC on the input from level 2 down to 0, output at level 3 (one
level above the minimum input level, for a multiplication between bootstraps). Insecure."""

TINY_N11_FULL = BootstrappingParameters(
    literal=_tiny_literal(1 + 3, _EVALMOD_DEPTH + 3, log_n=11), slots=1024, cts_levels=3, stc_levels=3)
"""N = 2^11, 1024 slots (full), CtS 3 + EvalMod 10 + StC 3, one 45-bit level left. Insecure."""

TINY_N11_HELR = BootstrappingParameters(
    literal=_tiny_literal(9 + 3, _EVALMOD_DEPTH + 3, log_n=11), slots=1024, cts_levels=3, stc_levels=3)
"""N = 2^11, 1024 slots (full), CtS 3 + EvalMod 10 + StC 3, nine 45-bit levels left (the output level of
the N = 2^16 presets, for CPU tests of encrypted HELR training: two iterations per bootstrap). Insecure."""

TINY_N10_DENSE = BootstrappingParameters(
    literal=dataclasses.replace(TINY_N10_FULL.literal, hamming_weight=0), slots=512, cts_levels=3, stc_levels=3,
    ephemeral_weight=32)
"""TINY_N10_FULL with a uniform ternary (dense) main secret and sparse-secret encapsulation (ephemeral h' = 32,
the weight TINY_N10_FULL's main secret has, so the same K = 16 holds). Insecure."""

# ---- 128-bit N = 2^16 presets (h = 192) ---------------------------------------------------------
#
# Security: a sparse ternary secret with h = 192 and log2(QP) <= 1546 at N = 2^16 is the 128-bit
# set N16QP1546H192H32 of Bossuat, Troncoso-Pastoriza and Hubaux (ACNS 2022, eprint 2022/024;
# bound from Bossuat, Mouchet, Troncoso-Pastoriza and Hubaux, Eurocrypt 2021), shipped as Lattigo
# v6's circuits/ckks/bootstrapping/default_parameters.go; enforced by
# fhe_core.params.security.check_security (no allow_insecure needed). We do NOT implement
# Lattigo's sparse-secret encapsulation (its "H32"), so the bootstrapping circuit itself sees the
# h = 192 secret.
#
# EvalMod interval: after ModRaise each coefficient's integer I is a sum of h terms uniform in
# [-1/2, 1/2], standard deviation sqrt(h / 12) = 4 for h = 192. K = 16 (|I| <= 15, 3.75 sigma)
# would fail on ~1.8e-4 of the 2^16 coefficients, ~12 per full bootstrap; K = 32 (|I| <= 31,
# 7.75 sigma) fails on ~1e-14 per coefficient, ~1e-9 per bootstrap. With r = 3 double angles the
# polynomial follows 2K / 2^r = 8 periods, which degree 63 resolves (Chebyshev coefficients
# ~J_63(8 pi) ~ 2^-60): EvalMod depth = ceil(log2 64) + 1 + 3 = 10.
#
# The chain, bottom up (26 primes, L = 25; 1292 + 244 = 1536 bits of QP <= 1546):
#   q_0                  58 bits  x 1   EvalMod's input scale; R = q_0 / (k Delta) = 2^10 after the
#                                       integer scale-up k ~ 2^8 (log_message_ratio = 10)
#   application levels   40 bits  x 9   Delta = 2^40: the 9 levels left after bootstrapping
#   SlotsToCoeffs        40 bits  x 3   runs at scale Delta (diagonals encoded at the prime's scale)
#   EvalMod              58 bits  x 10  runs at scale ~q_0
#   CoeffsToSlots        58 bits  x 3   input declared at scale q_0 after ModRaise
#   special primes P     61 bits  x 4   alpha = 4, dnum = ceil(26 / 4) = 7; P (244 bits) exceeds
#                                       every digit (<= 4 x 58 = 232 bits) by 2^12, so key-switching
#                                       noise stays below the rounding noise of rescaling
# Why these sizes (measured at N = 2^16 on an H200, 2026-11-21, scratch runs of this chain):
# precision is EvalMod's noise amplified by ~4^r R / (2 pi) and spread over the slots by
# SlotsToCoeffs. The first version of this preset (60-bit EvalMod primes, two special primes,
# dnum 14, r = 4, R = 2^20) bootstrapped to only 13.6 bits mean: R = 2^20 and the key-switching
# noise of a P barely larger than the digits. Here R = 2^10 (log_message_ratio) and r = 3 cut the
# amplification by 2^12; 58 rather than 60 bits pays for four special primes. Measured: [-1, 1]
# min 19.4 / mean 21.3 bits; [-8, 8] 19.5 / 21.2 (R = 2^8: 20.0 / 21.8 on [-1, 1] but 17.7 / 19.3
# on [-8, 8], the sin(x) ~ x error of larger coefficients; 55-bit primes with five 59-bit special
# primes: 18.5 / 20.5).
# Output level: L - CtS - EvalMod - StC = 25 - 3 - 10 - 3 = 9: nine rescales (multiplications)
# before the next bootstrap, which takes its input at level 0.
# Keys: the stride-aware BSGS plan needs 39 Galois keys (2^15 slots; 40 for 2^13), each
# dnum x 2 x 30 limbs x N x 8 bytes = 220 MB: 8.6 GB, plus the relinearization key.

_N16_EVALMOD = dict(k=32.0, degree=63, double_angles=3, log_message_ratio=10)
_N16_EVALMOD_DEPTH = 10
_N16_LOG_P = [61] * 4


def _n16_literal(cts: int, stc: int, output_levels: int = 9) -> ParamsLiteral:
    """N = 2^16, h = 192: q_0 58, ``output_levels`` + ``stc`` 40-bit primes, EvalMod + ``cts``
    58-bit primes, four 61-bit special primes (sizes justified above)."""
    return ParamsLiteral(log_n=16, log_q=[58] + [40] * (output_levels + stc) + [58] * (_N16_EVALMOD_DEPTH + cts),
                         log_p=list(_N16_LOG_P), log_default_scale=40, hamming_weight=192)


N16_H192_FULL = BootstrappingParameters(
    literal=_n16_literal(cts=3, stc=3), slots=1 << 15, cts_levels=3, stc_levels=3, **_N16_EVALMOD)
"""N = 2^16, 2^15 slots (full), h = 192, 128-bit (log QP = 1536 <= 1546): CtS 3 + EvalMod 10 + StC 3
= 16 levels, output level 9."""

N16_H192_SPARSE = BootstrappingParameters(
    literal=_n16_literal(cts=3, stc=3), slots=1 << 13, cts_levels=3, stc_levels=3, **_N16_EVALMOD)
"""N = 2^16, 2^13 slots (sparse, g = 4, SubSum), h = 192, 128-bit: same chain as N16_H192_FULL, output
level 9; 40 Galois keys."""

# ---- a 128-bit N = 2^16 preset with a dense main secret (sparse-secret encapsulation) ----------------------
#
# Security, two checks (fhe_core.params.security): the uniform ternary main secret at the full modulus,
# log2(QP) = 1758 <= 1772 (the HE Standard's bound, dense); the ephemeral secret (h' = 32) at the small modulus
# of the dense -> sparse key, log2(q_0 p_0) = 58 + 61 = 119 <= 121 (BootstrappingParameters.params checks both).
#
# EvalMod: ModRaise's overflow is that of h' = 32, a sum of 33 uniforms (sigma = sqrt(33 / 12) = 1.66), so K = 16
# instead of 32: |I| >= 16 has probability 2^-121.7 per coefficient (overflow_probability, exact), 2^-105.7 per
# bootstrap of N = 2^16 coefficients (union bound); N16_H192_FULL's K = 32 with h = 192: 2^-49.3 and 2^-33.3.
# The smaller K lets one double angle go: r = 2 with degree 63 follows 2K / 2^r = 8 periods, like
# N16_H192_FULL's K = 32, r = 3 (interpolation error estimate 2^-25.4 against 2^-23.4; the noise is amplified by
# 4^2 instead of 4^3), so EvalMod takes ceil(log2 64) + 1 + 2 = 9 levels instead of 10.
#
# The chain, bottom up (32 primes, L = 31; 1514 + 244 = 1758 bits of QP <= 1772):
#   q_0                  58 bits  x 1   as N16_H192_FULL (R = 2^10 after the integer scale-up)
#   application levels   40 bits  x 16  the 16 levels left after bootstrapping (N16_H192_FULL: 9)
#   SlotsToCoeffs        40 bits  x 3
#   EvalMod              58 bits  x 9
#   CoeffsToSlots        58 bits  x 3
#   special primes P     61 bits  x 4   alpha = 4, dnum = 8; P (244 bits) exceeds every digit (<= 232 bits)
# Extra cost against N16_H192_FULL: the chain is 32 primes instead of 26 (CtS and EvalMod run on 6 more limbs),
# two one-digit key switches at the entry, and one EvalMod level less.
# Precision (CPU, 2026-11-28, one run each, both chains at a smaller ring, allow_insecure, [-1, 1], min / mean
# bits): N = 2^12: N16_H192_FULL's chain 23.7 / 25.4, this one 22.4 / 24.1; N = 2^14: 21.6 / 23.4 against
# 19.3 / 21.1. The loss is the dense secret's, not the encapsulation's: every rescale and key switch rounds
# with an error e_0 + e_1 s that grows with |s|_1 (the same chain with an h = 192 main secret and the
# encapsulation: 24.2 / 25.9 at 2^12; N16_H192_FULL's chain with a dense secret: 21.5 / 23.0), so it grows
# with N. Measured against it at 2^12: r = 1 with degree 127 (same depth) 22.4 / 24.1, no gain; R = 2^8
# 22.1 / 23.8, R = 2^12 21.4 / 23.0; 60-bit q_0, CtS and EvalMod primes 22.6 / 24.3; Delta = 2^45 on 45-bit
# StC and application primes (14 levels left within 1772 bits) 23.5 / 25.2 at 2^12, 20.4 / 22.2 at 2^14.
# N = 2^16 on the H200: ``python scripts/bench.py --device cuda --only boot-dense``.

_N16_DENSE_EVALMOD = dict(k=16.0, degree=63, double_angles=2, log_message_ratio=10)
_N16_DENSE_EVALMOD_DEPTH = 9

N16_DENSE_FULL = BootstrappingParameters(
    literal=ParamsLiteral(log_n=16, log_q=[58] + [40] * (16 + 3) + [58] * (_N16_DENSE_EVALMOD_DEPTH + 3),
                          log_p=list(_N16_LOG_P), log_default_scale=40, hamming_weight=0),
    slots=1 << 15, cts_levels=3, stc_levels=3, ephemeral_weight=32, **_N16_DENSE_EVALMOD)
"""N = 2^16, 2^15 slots (full), uniform ternary main secret, ephemeral h' = 32, 128-bit (log QP = 1758 <= 1772;
log q_0 p_0 = 119 <= 121): CtS 3 + EvalMod 9 + StC 3 = 15 levels, output level 16."""

__all__ = ["BootstrappingParameters", "ORDERS", "TINY_N10_FULL", "TINY_N10_SPARSE", "TINY_N10_SLIM",
           "TINY_N11_FULL", "TINY_N11_HELR", "TINY_N10_DENSE", "N16_H192_FULL", "N16_H192_SPARSE", "N16_DENSE_FULL",
           "encapsulation_log_modulus", "overflow_probability"]
