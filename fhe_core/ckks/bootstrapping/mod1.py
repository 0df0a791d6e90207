"""EvalMod: the homomorphic reduction modulo 1 of bootstrapping, by a scaled cosine with
double-angle steps (Han and Ki, CT-RSA 2020; Bossuat, Mouchet, Troncoso-Pastoriza and Hubaux,
Eurocrypt 2021; Lattigo's ``circuits/ckks/mod1``).

**What it computes.** After ModRaise and CoeffsToSlots each slot holds a real

    y = m / R + I,      R = q_0 / Delta (the message ratio),  I an integer, |y| < K,

m being the message in units of its scale Delta (|m| << R). EvalMod returns, at the requested
output scale,

    f(y) = (R / (2 pi)) * sin(2 pi y)  =  m - (2 pi)^2 m^3 / (6 R^2) + ...

which equals m up to a relative (2 pi m / R)^2 / 6 (2^-27.3 for |m| <= 1, R = 2^15).

**How** (r = ``double_angles``):

1. p(y) ~ cos(2 pi (y - 1/4) / 2^r), a Chebyshev interpolant of degree ``degree`` on [-K, K]
   (the shift by 1/4 turns the cosine into the sine, the division by 2^r shrinks the number
   of periods the polynomial must follow to 2K / 2^r), evaluated by the merged
   :class:`~fhe_core.ckks.polynomial.PolynomialEvaluator`: depth(p) = ceil(log2(degree + 1)),
   plus 1 for the affine map t = y / K when 1/K is not an integer (every K > 1);
2. r double-angle steps c <- 2 c^2 - 1 (cos 2t = 2 cos^2 t - 1), one level each, giving
   cos(2 pi (y - 1/4)) = sin(2 pi y);
3. the final factor R / (2 pi) costs no level: the last ciphertext is simply *declared* at the
   scale S_r * 2 pi / R, where S_r is its scale as a ciphertext of sin(2 pi y). The scales are
   planned backwards so that this is exactly the output scale: S_r = out * R / (2 pi),
   S_(i-1) = sqrt(S_i * q_l) for the prime q_l the i-th squaring rescales by, and the
   polynomial is evaluated to land on S_0.

    depth = ceil(log2(degree + 1)) + [K > 1] + r

Each double angle multiplies the absolute error of the cosine by up to 4 and the final factor
by R / (2 pi); the polynomial's approximation error and the ciphertext noise are thus amplified by
~4^r R / (2 pi) (about 2^18.4 for r = 3, R = 2^15), which is what limits the precision.
Measured at N = 2^11 (tests): with 45-bit primes and input scale 2^45 the result is good to
only ~14 bits (max error; 19 bits mean); with 55-bit primes and scale 2^55, ~26 bits (max;
29 mean), the sin(x) ~ x error (2^-27.3) then dominating. Bootstrapping parameters should
therefore give EvalMod ~60-bit primes and run it at scale ~q_0 (Lattigo does the same).

**Interval.** Inputs must satisfy |y| < K: the Chebyshev interpolant diverges outside
[-K, K]. After ModRaise |I| <= (h + 1) / 2 in the worst case but ~sqrt(h) in practice; K
and the resulting failure probability belong to the bootstrapping parameters.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from fhe_core.ckks.ciphertext import ScaleMismatchError
from fhe_core.ckks.evaluator import SCALE_TOLERANCE
from fhe_core.ckks.polynomial import (ChebyshevInterpolant, PolynomialEvaluator, chebyshev_interpolant,
                                     combines_in_one_pass)
from fhe_core.ckks.polynomial import depth as polynomial_depth
from fhe_core.errors import LevelMismatchError, ParameterError
from fhe_core.rlwe.checks import mark_canonical


@dataclass(frozen=True)
class EvalModParameters:
    """The EvalMod circuit (Lattigo's ``mod1.ParametersLiteral``, scaled-cosine variant).

    Attributes:
        k: K, the half-width of the interval [-K, K] the polynomial approximates on; inputs
            y = m / R + I need |y| < K, i.e. |I| <= K - 1 (|I| <~ sqrt(h) for a secret of
            Hamming weight h, by the ModRaise bound). Default 16.
        degree: degree of the Chebyshev interpolant of the scaled cosine. Default 31.
        double_angles: r, the number of double-angle steps. Default 4 (with K = 16 the
            polynomial follows 2K / 2^r = 2 periods, which degree 31 reaches to ~2^-50).
        message_ratio: R = q_0 / Delta (> 1). Default 2^15.
        input_scale: the scale of the input ciphertext (checked). Default 2^45.
        output_scale: the scale of the result; None for the input scale.
    """

    k: float = 16.0
    degree: int = 31
    double_angles: int = 4
    message_ratio: float = 2.0 ** 15
    input_scale: float = 2.0 ** 45
    output_scale: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.k) and self.k >= 1):
            raise ParameterError(f"EvalModParameters: k must be a finite number >= 1, got {self.k!r}")
        if isinstance(self.degree, bool) or not isinstance(self.degree, int) or self.degree < 1:
            raise ParameterError(f"EvalModParameters: degree must be an int >= 1, got {self.degree!r}")
        if isinstance(self.double_angles, bool) or not isinstance(self.double_angles, int) or self.double_angles < 0:
            raise ParameterError(f"EvalModParameters: double_angles must be an int >= 0, got {self.double_angles!r}")
        if not (math.isfinite(self.message_ratio) and self.message_ratio > 1):
            raise ParameterError(f"EvalModParameters: message_ratio must be > 1, got {self.message_ratio!r}")
        for name in ("input_scale", "output_scale"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 1):
                raise ParameterError(f"EvalModParameters: {name} must be a finite float >= 1, got {value!r}")

    def scaled_cosine(self, y: np.ndarray) -> np.ndarray:
        """cos(2 pi (y - 1/4) / 2^r): the function the polynomial interpolates."""
        return np.cos(2 * np.pi * (np.asarray(y) - 0.25) / 2 ** self.double_angles)

    @cached_property
    def interpolant(self) -> ChebyshevInterpolant:
        """The Chebyshev interpolant of :meth:`scaled_cosine` on [-K, K] and its error estimate."""
        return chebyshev_interpolant(self.scaled_cosine, -self.k, self.k, self.degree)

    @property
    def polynomial(self):
        return self.interpolant.polynomial

    @property
    def depth(self) -> int:
        """Levels consumed: ceil(log2(degree + 1)) + [1/K not an integer] + double_angles."""
        return polynomial_depth(self.polynomial) + self.double_angles

    @property
    def approximation_error(self) -> float:
        """A bound (estimate) on max |reference - target| over [-K, K], from the interpolation
        error e of the cosine amplified by 4^r (double angles) and R / (2 pi)."""
        return self.interpolant.error_estimate * 4.0 ** self.double_angles * self.message_ratio / (2 * np.pi)

    def reference(self, y: np.ndarray) -> np.ndarray:
        """The exact plaintext map the circuit implements, in float64: the polynomial, r double
        angles, times R / (2 pi). The homomorphic result differs from it by the CKKS noise only."""
        c = self.polynomial(np.asarray(y))
        for _ in range(self.double_angles):
            c = 2 * c * c - 1
        return c * self.message_ratio / (2 * np.pi)

    def target(self, y: np.ndarray) -> np.ndarray:
        """The ideal (R / (2 pi)) sin(2 pi y), which equals m up to O(m^3 / R^2)."""
        return self.message_ratio / (2 * np.pi) * np.sin(2 * np.pi * np.asarray(y))


class EvalModEvaluator:
    """Evaluates :class:`EvalModParameters` on ciphertexts.

    Args:
        evaluator: a :class:`fhe_core.ckks.Evaluator` holding the relinearization key, or a
            :class:`~fhe_core.ckks.polynomial.SimEvaluator` (then it plans on SimCiphertexts).
        parameters: the circuit.
    """

    def __init__(self, evaluator, parameters: EvalModParameters):
        if not isinstance(parameters, EvalModParameters):
            raise ParameterError(f"EvalModEvaluator: expected EvalModParameters, got {type(parameters).__name__}")
        self.evaluator = evaluator
        self.parameters = parameters
        self.params = evaluator.params
        self._polynomials = PolynomialEvaluator(evaluator)

    def target_scales(self, level: int) -> list[float]:
        """[S_0, ..., S_r] for an input at ``level``: the scale of the cosine after the polynomial
        (S_0) and after each double angle, S_r = output * R / (2 pi) (module docstring)."""
        p = self.parameters
        out = p.input_scale if p.output_scale is None else p.output_scale
        scales = [out * p.message_ratio / (2 * math.pi)]
        after_polynomial = level - polynomial_depth(p.polynomial)
        for i in range(p.double_angles, 0, -1):  # the i-th squaring rescales by q at level after_polynomial - i + 1
            scales.append(math.sqrt(scales[-1] * self.params.q_primes[after_polynomial - i + 1]))
        return scales[::-1]

    def evaluate(self, ct):
        """f(y) = (R / (2 pi)) sin(2 pi y) ~ m slot-wise, for real slots y = m / R + I in (-K, K).

        ct: degree 1 at level l >= :attr:`EvalModParameters.depth`, scale ``input_scale``.
        Returns a ciphertext at level l - depth with scale ``output_scale`` (default the input
        scale), exactly up to float rounding. Consumes ``depth`` levels; needs the
        relinearization key. Raises ``LevelMismatchError("eval_mod: ...")`` or
        ``ScaleMismatchError("eval_mod: ...")`` before any work.
        """
        op = "eval_mod"
        p, ev = self.parameters, self.evaluator
        if ct.level < p.depth:
            raise LevelMismatchError(f"{op}: needs {p.depth} levels (polynomial {p.depth - p.double_angles}, "
                                     f"double angles {p.double_angles}), the ciphertext is at level {ct.level}")
        if abs(ct.scale - p.input_scale) > SCALE_TOLERANCE * max(ct.scale, p.input_scale):
            raise ScaleMismatchError(f"{op}: the ciphertext's scale 2^{math.log2(ct.scale):.6f} is not the "
                                     f"input scale 2^{math.log2(p.input_scale):.6f}")
        scales = self.target_scales(ct.level)
        c = self._polynomials.evaluate(ct, p.polynomial, output_scale=scales[0])
        for _ in range(p.double_angles):
            square = ev.mul_relin(c, c)
            if combines_in_one_pass(ev, 1):  # 2 c^2 - 1 at the product's scale, one pass
                square = ev.linear_combination([(square, 2, 1.0, 1)], square.level, (1.0, -1))
            else:
                square = ev.sub(ev.add(square, square), 1.0)  # 2 c^2 - 1 at the product's scale
            c = ev.rescale(square)
        # c holds sin(2 pi y) at scale ~S_r: declare it a ciphertext of (R / 2 pi) sin(2 pi y)
        return mark_canonical(dataclasses.replace(c, scale=c.scale * 2 * math.pi / p.message_ratio))


__all__ = ["EvalModParameters", "EvalModEvaluator"]
