"""Polynomial approximations of the sigmoid for encrypted training.

HELR's cubic approximates sigma(-t) = 1 / (1 + e^t), least squares on [-16, 16]:
0.5 - 0.0843 t + 0.0002 t^3 (coefficients rounded as the study publishes them). With labels in
{-1, +1} and z_i = y_i x_i, the log-likelihood gradient is sum_i sigma(-z_i . w) z_i, so this
polynomial is evaluated at z_i . w directly.
"""
from __future__ import annotations

import numpy as np

HELR_CUBIC = (0.5, -0.0843, 0.0, 0.0002)
"""Coefficients c0..c3 of HELR's cubic for sigma(-t), lowest degree first."""
HELR_INTERVAL = 16.0


def fit_sigmoid_least_squares(degree: int, bound: float, samples: int = 100_001) -> np.ndarray:
    """Coefficients (lowest degree first) of the least-squares fit of sigma(-t) on [-bound, bound].

    Only the constant and odd powers are fitted (sigma(-t) - 1/2 is odd); even powers are 0.
    """
    t = np.linspace(-bound, bound, samples)
    powers = [0] + list(range(1, degree + 1, 2))
    basis = np.stack([t**p for p in powers], axis=1)
    fitted, *_ = np.linalg.lstsq(basis, 1.0 / (1.0 + np.exp(t)), rcond=None)
    coefficients = np.zeros(degree + 1)
    coefficients[powers] = fitted
    return coefficients


def poly_eval(coefficients: tuple[float, ...] | np.ndarray, t: np.ndarray) -> np.ndarray:
    """Evaluate sum_k c_k t^k (Horner) on a float64 array."""
    result = np.zeros_like(np.asarray(t, dtype=np.float64))
    for c in reversed(tuple(coefficients)):
        result = result * t + c
    return result
