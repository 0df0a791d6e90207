"""Polynomial activations on CKKS ciphertexts with their constants folded (no level spent on a
constant alone).

HELR's gradient needs, per sample, s * p(t) * z with the cubic p(t) = c0 + c1 t + c3 t^3 (no t^2
term, see :mod:`ml.sigmoid`), t = z . v and s a step constant. Written as

    s p(t) z = T (T^2 + b) z + s c0 z,   T = mu t,  mu = cbrt(s c3),  b = s c1 / mu,

the odd part costs two levels after T: T^2 and T z in parallel (one level), then
(T^2 + b) (T z) (one level), and mu is folded into the plaintext that produces T (the mask of a
masked extraction, :mod:`ml.rotsum`), b is a constant *added* (no level). The constant part s c0 z
is linear in z: the caller adds it at the result's scale (e.g. from a sum of the z's).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from fhe_core.errors import ParameterError


@dataclass(frozen=True)
class FoldedCubic:
    """factor * (c0 + c1 t + c3 t^3) as T (T^2 + b) + constant with T = mu t."""

    mu: float
    b: float
    constant: float

    @classmethod
    def from_coefficients(cls, coefficients, factor: float = 1.0) -> FoldedCubic:
        """``coefficients`` c0..c3 (lowest degree first, c2 = 0, c3 != 0) scaled by ``factor``."""
        c = [float(x) for x in coefficients]
        if len(c) != 4 or c[2] != 0.0 or c[3] == 0.0:
            raise ParameterError(f"FoldedCubic: expected c0, c1, 0, c3 with c3 != 0, got {tuple(coefficients)}")
        factor = float(factor)
        if not math.isfinite(factor) or factor == 0.0:
            raise ParameterError(f"FoldedCubic: factor must be finite and nonzero, got {factor}")
        mu = math.copysign(abs(factor * c[3]) ** (1.0 / 3.0), factor * c[3])
        return cls(mu=mu, b=factor * c[1] / mu, constant=factor * c[0])

    def __call__(self, t):
        """The plaintext value factor * p(t) (numpy arrays or floats)."""
        big_t = self.mu * t
        return big_t * (big_t * big_t + self.b) + self.constant


DEPTH = 2
"""Levels :func:`odd_cubic_times` consumes after T (and Z) are available."""


def odd_cubic_times(ev, t_scaled, z, cubic: FoldedCubic):
    """T (T^2 + b) z, slot-wise, for T = ``t_scaled`` (holding mu t) and ``z`` ciphertexts.

    ev: a :class:`fhe_core.ckks.Evaluator` with the relinearization key. t_scaled at level a >= 2,
    z at level >= a (dropped). Returns a ciphertext at level a - 2 (:data:`DEPTH`) with scale
    S_T^3 S_z / (q_(a) q_(a) q_(a-1)) (every product rescaled once). The constant term
    (``cubic.constant * z``) is not included.
    """
    square = ev.rescale(ev.mul_relin(t_scaled, t_scaled))           # T^2         level a - 1
    t_times_z = ev.rescale(ev.mul_relin(t_scaled, z))               # T z         level a - 1
    return ev.rescale(ev.mul_relin(ev.add(square, cubic.b), t_times_z))  # (T^2 + b) T z, level a - 2
