"""Polynomial evaluation on CKKS ciphertexts: Chebyshev interpolation and baby-step giant-step
(Paterson-Stockmeyer style) evaluation at optimal depth with exact scale management.

**Polynomials.** A :class:`Polynomial` is ``sum_k c_k B_k`` in the ``"power"`` basis
(B_k = x^k) or the ``"chebyshev"`` basis on [a, b] (B_k = T_k(t), t = (2x - a - b)/(b - a) the
affine map of [a, b] onto [-1, 1]). :func:`chebyshev_interpolant` builds one from a function by
interpolation at the Chebyshev nodes and estimates its error.

**Depth.** :func:`depth` is ceil(log2(d + 1)) for a polynomial of degree d >= 1, plus one level
for the Chebyshev affine map when alpha = 2/(b - a) is not an integer (x * alpha needs a constant
encoded at scale q_l and a rescale; an integer alpha, e.g. [-1, 1] or [0, 1], is an exact integer
multiplication, and beta = -(a + b)/(b - a) is a constant addition: both free). The affine map
cannot be folded into the scale for free in general: declaring the ciphertext of x at scale Delta
to be one of alpha*x at scale Delta/alpha costs nothing, but the scale of T_(2^k) is then
(Delta/alpha)^(2^k) / (q...q), which leaves the modulus budget after a few squarings.

**Algorithm** (the scale-invariant evaluation of Bossuat et al., Eurocrypt 2021, as in Lattigo's
``circuits/common/polynomial``).
1. Baby steps T_1..T_(2^b - 1) (b ~ D/2) and giant steps T_(2^j) for 2^j <= d, each at the
   lowest depth possible: T_(2n) = 2 T_n^2 - 1, T_(m+n) = 2 T_m T_n - T_(m-n) (m the largest
   power of two below m + n), x^(m+n) = x^m x^n in the power basis. T_k sits at level
   l_in - ceil(log2 k). T_(m-n) meets 2 T_m T_n before the rescale: it is multiplied by 1
   encoded at scale(T_m) scale(T_n) / scale(T_(m-n)) (~2^40), which gives it the product's
   scale exactly and consumes no level.
2. p is split by the largest power of two G <= deg p: p = q T_G + r (Chebyshev:
   q = c_G + sum_(j>=1) 2 c_(G+j) T_j, r = sum_(k<G) c_k T_k - sum_(j>=1) c_(G+j) T_(G-j), from
   2 T_G T_j = T_(G+j) + T_(G-j)); q and r are split again until a part is a *leaf*: degree
   below 2^b and every baby step it uses at least at the level where the leaf is summed.
   Leaves that lack such baby steps (those on the critical path) are split further, which is
   what keeps the depth at ceil(log2(d + 1)).
3. **Exact scales.** Every node is asked for a target (level l, scale S) and returns a
   ciphertext at exactly that level and scale: ``_evaluate`` sums the node at (l + 1, S q_(l+1))
   and rescales once. A leaf multiplies each T_i (dropped to level l + 1) by c_i encoded at the
   scale S q_(l+1) / scale(T_i), so every product lands on the scale S q_(l+1) and they add with
   identical scales; the constant c_0 is then added at that scale. A split evaluates q at
   (l + 1, S q_(l+1) / scale(T_G)), multiplies by T_G (scale S q_(l+1)), and adds r summed at
   (l + 1, S q_(l+1)). Round-off only enters as the rounding of each constant to an integer at a
   scale of ~2^40 (a relative 2^-41 of that coefficient), never as a scale mismatch.
4. **Lazy relinearization.** The giant-step products of one node (q T_G, and those of r, r's
   remainder, ... all summed at the same level before the one rescale) are tensor products left
   at degree 2, added, and relinearized once before the rescale: one key switch per node
   instead of one per product (degree 15: 7 key switches instead of 8; EvalMod's degree 63:
   15 instead of 18 per evaluation). Powers T_k are relinearized at once (they are reused).

**Simulation.** :class:`SimEvaluator` mirrors the evaluator methods the algorithm uses
(add, sub, mul, mul_relin, tensor, relinearize, rescale, drop_level) on :class:`SimCiphertext` (level, scale only),
so :func:`plan` runs the same code path as the real evaluation without encrypting anything
(Lattigo's ``SimEvaluator``) and reports the levels consumed and the operation counts.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np
import numpy.polynomial.chebyshev as npcheb

from fhe_core.ckks.ciphertext import ScaleMismatchError
from fhe_core.ckks.evaluator import MAX_COMBINATION_TERMS, SCALE_TOLERANCE
from fhe_core.errors import LevelMismatchError, ParameterError
from fhe_core.ops import TUNED
from fhe_core.params import Params

BASES = ("power", "chebyshev")


# ---- polynomials (plaintext) ---------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Polynomial:
    """p = sum_k coefficients[k] * B_k on ``interval`` = (a, b).

    Attributes:
        coefficients: real coefficients, lowest degree first (``[d + 1]`` float64; trailing
            zeros are kept, so the degree is the index of the last nonzero one).
        basis: ``"power"`` (B_k = x^k; the interval only documents the intended domain) or
            ``"chebyshev"`` (B_k = T_k((2x - a - b)/(b - a))).
        interval: (a, b) with a < b.
    """

    coefficients: np.ndarray
    basis: str = "power"
    interval: tuple[float, float] = (-1.0, 1.0)

    def __post_init__(self) -> None:
        c = np.asarray(self.coefficients, dtype=np.float64).reshape(-1).copy()
        if c.size == 0 or not np.all(np.isfinite(c)):
            raise ParameterError(f"Polynomial: coefficients must be finite and non-empty, got {self.coefficients!r}")
        if self.basis not in BASES:
            raise ParameterError(f"Polynomial: basis must be one of {BASES}, got {self.basis!r}")
        a, b = (float(v) for v in self.interval)
        if not (math.isfinite(a) and math.isfinite(b) and a < b):
            raise ParameterError(f"Polynomial: the interval must be finite with a < b, got {self.interval!r}")
        c.setflags(write=False)
        object.__setattr__(self, "coefficients", c)
        object.__setattr__(self, "interval", (a, b))

    @property
    def degree(self) -> int:
        """Index of the last nonzero coefficient (0 for a constant or the zero polynomial)."""
        nonzero = np.flatnonzero(self.coefficients)
        return int(nonzero[-1]) if nonzero.size else 0

    @property
    def affine(self) -> tuple[float, float]:
        """(alpha, beta) with t = alpha x + beta mapping the interval onto [-1, 1] (Chebyshev
        basis), or (1, 0) in the power basis."""
        if self.basis == "power":
            return 1.0, 0.0
        a, b = self.interval
        return 2.0 / (b - a), -(a + b) / (b - a)

    def __call__(self, x) -> np.ndarray:
        """p(x) in float64 (numpy's Clenshaw / Horner): the plaintext reference."""
        x = np.asarray(x)
        if self.basis == "power":
            return np.polynomial.polynomial.polyval(x, self.coefficients)
        alpha, beta = self.affine
        return npcheb.chebval(alpha * x + beta, self.coefficients)


class ChebyshevInterpolant(NamedTuple):
    """:func:`chebyshev_interpolant`'s result."""

    polynomial: Polynomial
    error_estimate: float  # estimate of max |f - p| on [a, b] (see chebyshev_interpolant)


def chebyshev_nodes(a: float, b: float, count: int) -> np.ndarray:
    """The ``count`` Chebyshev nodes of the first kind on [a, b] (roots of T_count, mapped)."""
    k = np.arange(count)
    t = np.cos(np.pi * (k + 0.5) / count)
    return (b - a) / 2 * t + (a + b) / 2


def _interpolate(f: Callable, a: float, b: float, degree: int) -> np.ndarray:
    """Chebyshev coefficients of the degree-``degree`` interpolant of f at degree + 1 nodes
    (discrete orthogonality of T_k at the roots of T_(degree+1))."""
    n = degree + 1
    t = chebyshev_nodes(-1.0, 1.0, n)
    values = np.asarray(f(chebyshev_nodes(a, b, n)), dtype=np.float64)
    if values.shape != (n,) or not np.all(np.isfinite(values)):
        raise ParameterError(f"chebyshev_interpolant: f must map a vector of {n} nodes to {n} finite reals")
    c = 2.0 / n * npcheb.chebvander(t, degree).T @ values
    c[0] /= 2
    return c


def chebyshev_interpolant(f: Callable, a: float, b: float, degree: int) -> ChebyshevInterpolant:
    """Interpolate ``f`` (vectorised, real) at the degree + 1 Chebyshev nodes of [a, b].

    Returns the :class:`Polynomial` (Chebyshev basis on [a, b]) and an error estimate: the
    interpolant of degree m = 2 * degree + 16 is computed as well, and since
    f - p = sum_(k > degree) c_k (T_k - T_(alias(k))) for the coefficients c_k of f, the estimate is
    2 * sum_(degree < k <= m) |c_k| of that finer interpolant (an upper bound for max |f - p| up to
    the neglected tail beyond m, which decays geometrically for smooth f).
    """
    if isinstance(degree, bool) or not isinstance(degree, int) or degree < 0:
        raise ParameterError(f"chebyshev_interpolant: degree must be an int >= 0, got {degree!r}")
    a, b = float(a), float(b)
    if not (math.isfinite(a) and math.isfinite(b) and a < b):
        raise ParameterError(f"chebyshev_interpolant: need a finite interval a < b, got [{a}, {b}]")
    coefficients = _interpolate(f, a, b, degree)
    fine = _interpolate(f, a, b, 2 * degree + 16)
    estimate = 2.0 * float(np.sum(np.abs(fine[degree + 1:])))
    return ChebyshevInterpolant(Polynomial(coefficients, "chebyshev", (a, b)), estimate)


def split(p: Polynomial, giant: int) -> tuple[Polynomial, Polynomial]:
    """(q, r) with p = q * B_giant + r, deg r < giant, for giant <= deg p < 2 * giant.

    Power basis: q = sum_j c_(giant+j) x^j, r = the low part. Chebyshev basis (from
    2 T_G T_j = T_(G+j) + T_(G-j)): q_0 = c_G, q_j = 2 c_(G+j), r_k = c_k - c_(2G-k) (k < G).
    """
    c, d = p.coefficients[:p.degree + 1], p.degree
    if not giant <= d < 2 * giant:
        raise ParameterError(f"split: need giant <= degree < 2 * giant, got giant {giant}, degree {d}")
    q, r = c[giant:].copy(), c[:giant].copy()
    if p.basis == "chebyshev":
        q[1:] *= 2
        r[2 * giant - d:] -= c[d:giant:-1]  # r_(G-j) -= c_(G+j), j = 1..d-G
    return replace(p, coefficients=q), replace(p, coefficients=r)


# ---- depth and scale simulation ------------------------------------------------------------------

def _affine_levels(p: Polynomial) -> int:
    """1 when the Chebyshev affine map needs a non-integer constant multiplication, else 0."""
    alpha, _ = p.affine
    return 0 if float(alpha).is_integer() else 1


def depth(p: Polynomial) -> int:
    """Levels :meth:`PolynomialEvaluator.evaluate` consumes: ceil(log2(deg + 1)), plus 1 for a
    Chebyshev interval whose alpha = 2/(b - a) is not an integer."""
    if p.degree < 1:
        raise ParameterError("depth: the polynomial is constant; there is nothing to evaluate")
    return math.ceil(math.log2(p.degree + 1)) + _affine_levels(p)


@dataclass(frozen=True)
class SimCiphertext:
    """What :class:`SimEvaluator` tracks of a ciphertext: level, scale and slot count."""

    level: int
    scale: float
    slots: int = 1


class SimEvaluator:
    """The level/scale bookkeeping of :class:`fhe_core.ckks.Evaluator` without any data.

    Implements the methods the polynomial evaluator calls, with the same level and scale rules
    and the same typed errors (``LevelMismatchError("rescale: ...")``,
    ``ScaleMismatchError("add: ...")``), and counts every operation in ``counts``, as the default plan
    runs them (linear combinations in one pass).
    """

    plan = TUNED

    def __init__(self, params: Params):
        self.params = params
        self.counts: Counter[str] = Counter()

    def _level(self, ct: SimCiphertext, op: str) -> int:
        self.counts[op] += 1
        return ct.level

    def add(self, a: SimCiphertext, b) -> SimCiphertext:
        """Lower level of the two, a's scale; scales must agree to 1e-9. No level."""
        return self._add_or_sub(a, b, "add")

    def sub(self, a: SimCiphertext, b) -> SimCiphertext:
        """As :meth:`add`."""
        return self._add_or_sub(a, b, "sub")

    def _add_or_sub(self, a: SimCiphertext, b, op: str) -> SimCiphertext:
        self._level(a, op)
        if not isinstance(b, SimCiphertext):
            return a
        if abs(a.scale - b.scale) > SCALE_TOLERANCE * max(a.scale, b.scale):
            raise ScaleMismatchError(f"{op}: scales differ: 2^{math.log2(a.scale):.6f} vs 2^{math.log2(b.scale):.6f}")
        return replace(a, level=min(a.level, b.level))

    def mul(self, a: SimCiphertext, b, *, constant_scale: float | None = None) -> SimCiphertext:
        """ct-ct: :meth:`mul_relin`. Constant: scale times constant_scale (1 for an integer,
        default q_l otherwise). No level."""
        if isinstance(b, SimCiphertext):
            return self.mul_relin(a, b)
        level = self._level(a, "mul_const")
        if constant_scale is None:
            if complex(b).real.is_integer() and complex(b).imag.is_integer():
                return a
            if level == 0:
                raise LevelMismatchError("mul: a non-integer constant is encoded at scale q_l and needs a level")
            constant_scale = float(self.params.q_primes[level])
        if not constant_scale >= 1:
            raise ParameterError(f"mul: constant_scale must be a finite float >= 1, got {constant_scale}")
        return replace(a, scale=a.scale * float(constant_scale))

    def linear_combination(self, terms, level: int, constant=None) -> SimCiphertext:
        """One pass of sum_k sign_k c_k a_k (+ a constant), terms ``[(a, c, constant_scale, sign)]``
        (:meth:`fhe_core.ckks.Evaluator.linear_combination`): at ``level``, with the first term's scale
        times its constant_scale; every term's scale must agree to 1e-9. No level."""
        first = terms[0][0]
        self._level(first, "linear_combination")
        scale = None
        for ct, _, constant_scale, _ in terms:
            if not 0 <= level <= ct.level:
                raise LevelMismatchError(f"linear_combination: target level must be in [0, {ct.level}], got {level}")
            term_scale = ct.scale * float(constant_scale)
            if scale is None:
                scale = term_scale
            elif abs(scale - term_scale) > SCALE_TOLERANCE * max(scale, term_scale):
                raise ScaleMismatchError(f"linear_combination: scales differ: 2^{math.log2(scale):.6f} vs "
                                         f"2^{math.log2(term_scale):.6f}")
        return replace(first, level=level, scale=scale)

    def mul_relin(self, a: SimCiphertext, b: SimCiphertext) -> SimCiphertext:
        """Lower level of the two, product of the scales. No level."""
        self._level(a, "mul_relin")
        return replace(a, level=min(a.level, b.level), scale=a.scale * b.scale)

    def tensor(self, a: SimCiphertext, b: SimCiphertext) -> SimCiphertext:
        """As :meth:`mul_relin`, without the relinearization (counted apart)."""
        self._level(a, "tensor")
        return replace(a, level=min(a.level, b.level), scale=a.scale * b.scale)

    def relinearize(self, ct: SimCiphertext) -> SimCiphertext:
        """Level and scale unchanged (one key switch, counted)."""
        self._level(ct, "relinearize")
        return ct

    def rescale(self, ct: SimCiphertext) -> SimCiphertext:
        """Level l -> l - 1, scale / q_l. One level."""
        level = self._level(ct, "rescale")
        if level == 0:
            raise LevelMismatchError("rescale: the ciphertext is at level 0, there is no prime left to divide by")
        return replace(ct, level=level - 1, scale=ct.scale / self.params.q_primes[level])

    def drop_level(self, ct: SimCiphertext, level: int) -> SimCiphertext:
        """To a lower ``level``, same scale."""
        if not 0 <= level <= self._level(ct, "drop_level"):
            raise LevelMismatchError(f"drop_level: target level must be in [0, {ct.level}], got {level}")
        return replace(ct, level=level)


@dataclass(frozen=True)
class PolynomialPlan:
    """What evaluating a polynomial from (input_level, input_scale) does, found by simulation."""

    depth: int            # levels consumed
    input_level: int
    output_level: int
    output_scale: float
    counts: dict[str, int] = field(default_factory=dict)  # operations by name (mul_relin, rescale, ...)


def plan(params: Params, p: Polynomial, level: int | None = None, scale: float | None = None,
         *, output_scale: float | None = None) -> PolynomialPlan:
    """Simulate :meth:`PolynomialEvaluator.evaluate` of ``p`` on a ciphertext at ``level``
    (default L) and ``scale`` (default the parameters' scale) with :class:`SimEvaluator`.

    Raises what the evaluation would raise (``LevelMismatchError`` when the levels run out).
    """
    level = params.max_level if level is None else level
    scale = params.default_scale if scale is None else float(scale)
    sim = SimEvaluator(params)
    out = PolynomialEvaluator(sim).evaluate(SimCiphertext(level, scale), p, output_scale=output_scale)
    return PolynomialPlan(level - out.level, level, out.level, out.scale, dict(sim.counts))


# ---- homomorphic evaluation ----------------------------------------------------------------------

def _add_optional(evaluator, a, b):
    """a + b where either may be None (then the other, or None)."""
    if a is None or b is None:
        return a if b is None else b
    return evaluator.add(a, b)


class _Powers(dict):
    """{k: B_k} of one evaluation, and each B_k dropped to a lower level at most once (the leaves
    and giant-step products at one level share the copy instead of dropping it again each)."""

    def __init__(self, evaluator):
        super().__init__()
        self._evaluator = evaluator
        self._dropped: dict[tuple[int, int], object] = {}

    def at(self, k: int, level: int):
        """B_k at ``level`` (<= its own)."""
        power = self[k]
        if power.level == level:
            return power
        if (k, level) not in self._dropped:
            self._dropped[k, level] = self._evaluator.drop_level(power, level)
        return self._dropped[k, level]


def combines_in_one_pass(evaluator, terms: int) -> bool:
    """Whether linear combinations of ``terms`` ciphertexts go through ``evaluator.linear_combination``
    (one pass; the evaluator's plan's fused circuit) instead of a product and an addition per term."""
    return terms <= MAX_COMBINATION_TERMS and evaluator.plan.fused_circuit


def _baby_log(d: int) -> int:
    """log2 of the baby-step bound 2^b: about half the depth (at least 1)."""
    return max(1, math.ceil(math.log2(d + 1)) // 2)


class PolynomialEvaluator:
    """Evaluates :class:`Polynomial` objects on ciphertexts by baby-step giant-step.

    Args:
        evaluator: a :class:`fhe_core.ckks.Evaluator` holding the relinearization key, or a
            :class:`SimEvaluator` (then it runs on :class:`SimCiphertext` and plans).
    """

    def __init__(self, evaluator):
        self.evaluator = evaluator
        self.params: Params = evaluator.params

    def evaluate(self, ct, p: Polynomial, *, output_scale: float | None = None):
        """p(ct) slot-wise.

        ct: a degree-1 ciphertext at level l >= :func:`depth` (p), slots in p.interval (in the
        Chebyshev basis; outside it T_k grows like (|t| + sqrt(t^2 - 1))^k).
        Returns a ciphertext at level l - depth(p) with scale ``output_scale`` (default ct.scale,
        exactly up to float rounding). Consumes :func:`depth` (p) levels; needs the
        relinearization key. Raises ``LevelMismatchError("evaluate_polynomial: ...")`` up front
        when ct has too few levels.
        """
        op = "evaluate_polynomial"
        if not isinstance(p, Polynomial):
            raise ParameterError(f"{op}: expected a Polynomial, got {type(p).__name__}")
        if p.degree < 1:
            raise ParameterError(f"{op}: the polynomial is constant ({p.coefficients[0]}); nothing to evaluate")
        need = depth(p)
        if ct.level < need:
            raise LevelMismatchError(f"{op}: a degree-{p.degree} {p.basis} polynomial on {p.interval} needs "
                                     f"{need} levels, the ciphertext is at level {ct.level}")
        scale = ct.scale if output_scale is None else float(output_scale)
        if not (math.isfinite(scale) and scale >= 1):
            raise ParameterError(f"{op}: output_scale must be a finite float >= 1, got {output_scale!r}")
        powers = self._powers(self._affine(ct, p), p)
        return self._evaluate(p, ct.level - need, scale, powers)

    # ---- baby and giant steps

    def _affine(self, ct, p: Polynomial):
        """T_1 = alpha * x + beta: free for an integer alpha, one level (constant at scale q_l,
        rescale: the scale returns to ct.scale) otherwise."""
        ev = self.evaluator
        alpha, beta = p.affine
        if alpha != 1.0:
            t = ev.mul(ct, alpha)
            ct = t if alpha.is_integer() else ev.rescale(t)
        return ev.add(ct, beta) if beta != 0.0 else ct

    def _powers(self, t1, p: Polynomial) -> _Powers:
        """{k: B_k} for the baby steps k < 2^b and the giant steps 2^j <= deg p."""
        d = p.degree
        needed = list(range(2, 1 << _baby_log(d)))
        needed += [1 << j for j in range(_baby_log(d), d.bit_length()) if 1 << j <= d]
        powers = _Powers(self.evaluator)
        powers[1] = t1
        for k in needed:
            powers[k] = self._power(powers, k, p.basis)
        return powers

    def _power(self, powers: _Powers, k: int, basis: str):
        """B_k from B_m and B_n, m the largest power of two below k, n = k - m; one level below
        the deeper of the two (T_k at level l_in - ceil(log2 k))."""
        ev = self.evaluator
        m = 1 << ((k - 1).bit_length() - 1)
        n = k - m
        product = ev.mul_relin(powers[m], powers[n])
        if basis == "chebyshev" and combines_in_one_pass(ev, 2):  # 2 T_m T_n - T_(m-n) (or - 1) in one pass
            level = product.level
            if m == n:
                product = ev.linear_combination([(product, 2, 1.0, 1)], level, (1.0, -1))
            else:
                lower = powers[m - n]
                product = ev.linear_combination([(product, 2, 1.0, 1), (lower, 1.0, product.scale / lower.scale, -1)],
                                                level)
        elif basis == "chebyshev":
            product = ev.add(product, product)            # 2 T_m T_n (exact)
            if m == n:
                product = ev.sub(product, 1.0)            # T_0 at the product's scale
            else:
                lower = powers.at(m - n, product.level)
                product = ev.sub(product, ev.mul(lower, 1.0, constant_scale=product.scale / lower.scale))
        return ev.rescale(product)

    # ---- the recursion

    def _evaluate(self, p: Polynomial, level: int, scale: float, powers: _Powers):
        """p at exactly (level, scale): sum at (level + 1, scale * q_(level+1)), one
        relinearization of all its giant-step products, then rescale."""
        if level + 1 > max(c.level for c in powers.values()):
            raise LevelMismatchError(f"evaluate_polynomial: no level left above {level} for a degree-{p.degree} part")
        ev = self.evaluator
        products, linear = self._sum(p, level + 1, scale * self.params.q_primes[level + 1], powers)
        out = None if products is None else ev.relinearize(products)
        if linear is not None:
            out = linear if out is None else ev.add(out, linear)
        return ev.rescale(out)

    def _sum(self, p: Polynomial, level: int, scale: float, powers: _Powers):
        """p (degree >= 1) at (level, scale) with no rescale of its own, as (products, linear):
        the sum of its giant-step products left unrelinearized (degree 2; they all sit at this
        level, so one relinearization serves them: lazy relinearization) and the sum of its
        degree-1 terms, either None when empty. A leaf, or p = q B_g + r for the largest giant g."""
        if self._is_leaf(p, level, powers):
            return None, self._leaf(p, level, scale, powers)
        ev = self.evaluator
        giant = 1 << (p.degree.bit_length() - 1)
        q, r = split(p, giant)
        term = self._times_giant(q, giant, level, scale, powers)
        products, linear = (term, None) if q.degree >= 1 else (None, term)
        if r.degree >= 1:
            rest_products, rest_linear = self._sum(r, level, scale, powers)
            products = _add_optional(ev, products, rest_products)
            linear = _add_optional(ev, linear, rest_linear)
        elif float(r.coefficients[0]) != 0.0:
            constant = float(r.coefficients[0])
            if linear is not None:
                linear = ev.add(linear, constant)
            else:
                products = ev.add(products, constant)  # onto c_0, as for any degree
        return products, linear

    def _times_giant(self, q: Polynomial, g: int, level: int, scale: float, powers: _Powers):
        """q * B_g at (level, scale): q evaluated at (level, scale / scale(B_g)) and tensored with
        B_g (degree 2, not relinearized), or B_g times the constant q_0 when q is constant
        (degree 1). Consumes no level itself."""
        ev = self.evaluator
        giant = powers.at(g, level)
        if q.degree == 0:
            return ev.mul(giant, float(q.coefficients[0]), constant_scale=scale / giant.scale)
        return ev.tensor(self._evaluate(q, level, scale / giant.scale, powers), giant)

    @staticmethod
    def _is_leaf(p: Polynomial, level: int, powers: _Powers) -> bool:
        """A leaf: every B_k it uses (nonzero c_k, k >= 1) is a computed power at >= level."""
        used = np.flatnonzero(p.coefficients[1:]) + 1
        return all(int(k) in powers and powers[int(k)].level >= level for k in used)

    def _leaf(self, p: Polynomial, level: int, scale: float, powers: _Powers):
        """sum_k c_k B_k + c_0 at (level, scale): each B_k dropped to ``level`` and multiplied by
        c_k encoded at scale / scale(B_k), so every term has scale ``scale``. No level consumed.
        With the fused passes one linear combination (the powers read in place, no level drop)."""
        ev = self.evaluator
        used = [int(k) for k in np.flatnonzero(p.coefficients[1:]) + 1]
        if combines_in_one_pass(ev, len(used)):
            terms = [(powers[k], float(p.coefficients[k]), scale / powers[k].scale, 1) for k in used]
            constant = (float(p.coefficients[0]), 1) if p.coefficients[0] != 0.0 else None
            return ev.linear_combination(terms, level, constant)
        out = None
        for k in np.flatnonzero(p.coefficients[1:]) + 1:
            power = powers.at(int(k), level)
            term = ev.mul(power, float(p.coefficients[k]), constant_scale=scale / power.scale)
            out = term if out is None else ev.add(out, term)
        if p.coefficients[0] != 0.0:
            out = ev.add(out, float(p.coefficients[0]))
        return out


__all__ = ["Polynomial", "ChebyshevInterpolant", "chebyshev_interpolant", "chebyshev_nodes", "split", "depth",
           "SimCiphertext", "SimEvaluator", "PolynomialPlan", "plan", "PolynomialEvaluator"]
