"""HELR's cubic: the published coefficients are the least-squares fit of sigma(-t) on [-16, 16]."""
import numpy as np
import pytest

from ml.sigmoid import HELR_CUBIC, HELR_INTERVAL, fit_sigmoid_least_squares, poly_eval


def test_published_cubic_is_the_rounded_least_squares_fit():
    fitted = fit_sigmoid_least_squares(3, HELR_INTERVAL)
    assert fitted[0] == pytest.approx(0.5, abs=1e-12) and fitted[2] == 0.0
    assert round(fitted[1], 4) == HELR_CUBIC[1]  # -0.08427 -> -0.0843
    assert round(fitted[3], 4) == HELR_CUBIC[3]  # 0.000247 -> 0.0002


def test_cubic_approximates_sigmoid_of_minus_t():
    t = np.linspace(-HELR_INTERVAL, HELR_INTERVAL, 2001)
    approx, exact = poly_eval(HELR_CUBIC, t), 1.0 / (1.0 + np.exp(t))
    assert np.abs(approx - exact).max() < 0.22  # a cubic on [-16, 16] is crude: 0.2174 at |t|=2.3
    assert np.sqrt(np.mean((approx - exact) ** 2)) < 0.14  # measured 0.134
    # sign convention: it decreases like sigma(-t), above 1/2 for t < 0 and below for t > 0
    assert (approx[t < 0] > 0.5).all() and (approx[(t > 0) & (t < 15)] < 0.5).all()


def test_poly_eval_matches_numpy_polyval():
    t = np.random.default_rng(0).normal(size=50) * 10
    coefficients = (0.3, -1.2, 0.05, 0.7, -0.01)
    np.testing.assert_allclose(poly_eval(coefficients, t), np.polyval(coefficients[::-1], t),
                               rtol=1e-13, atol=1e-10)
