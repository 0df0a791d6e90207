"""The folded cubic (ml.activations) against numpy: the folding identity exactly in float64, and
T (T^2 + b) z on ciphertexts (N = 2^11) within 2^-20 of numpy, two levels consumed."""
import numpy as np
import pytest

from fhe_core.errors import ParameterError
from ml.activations import DEPTH, FoldedCubic, odd_cubic_times
from ml.sigmoid import HELR_CUBIC, poly_eval
from tests.ml.encrypted_helpers import TinyCkks


@pytest.mark.parametrize("factor", [1.0, 1.0 / 1024, -0.37, 2.5e-3])
def test_folding_reproduces_the_scaled_polynomial(factor):
    t = np.linspace(-16, 16, 1001)
    cubic = FoldedCubic.from_coefficients(HELR_CUBIC, factor)
    np.testing.assert_allclose(cubic(t), factor * poly_eval(HELR_CUBIC, t), rtol=1e-12, atol=1e-15)
    assert cubic.mu ** 3 == pytest.approx(factor * HELR_CUBIC[3], rel=1e-14)
    assert cubic.constant == factor * HELR_CUBIC[0]


@pytest.mark.parametrize("bad", [(0.5, -0.08, 0.1, 0.0002), (0.5, -0.08, 0.0, 0.0), (0.5, 1.0, 0.0)])
def test_folding_needs_an_odd_cubic(bad):
    with pytest.raises(ParameterError):
        FoldedCubic.from_coefficients(bad)
    with pytest.raises(ParameterError):
        FoldedCubic.from_coefficients(HELR_CUBIC, 0.0)


def test_odd_cubic_times_z_on_ciphertexts():
    setup = TinyCkks()
    rng = np.random.default_rng()
    n = setup.slots
    t, z = rng.uniform(-16, 16, n), rng.uniform(-1, 1, n)
    cubic = FoldedCubic.from_coefficients(HELR_CUBIC, 1.0 / 64)
    top = setup.params.max_level
    big_t, z_ct = setup.encrypt(cubic.mu * t, level=top - 1), setup.encrypt(z)   # z above T: dropped
    out = odd_cubic_times(setup.evaluator, big_t, z_ct, cubic)
    assert out.level == top - 1 - DEPTH
    expected = (cubic(t) - cubic.constant) * z
    assert np.abs(setup.decrypt(out).real - expected).max() < 2.0 ** -20
