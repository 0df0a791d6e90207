"""Encrypted rotate-and-sum and replicate (ml.rotsum) against numpy on random slot vectors,
N = 2^11 (1024 slots), and their key account. Errors stay below 2^-20 (sums of up to 64 values
in [-1, 1]; the measured worst case is ~2^-27)."""
import numpy as np
import pytest

from fhe_core.errors import MissingKeyError, ParameterError
from ml.packing import ColumnMajorLayout, RowMajorLayout
from ml.rotsum import replicate, replicate_steps, rotate_sum, rotation_steps
from tests.ml.encrypted_helpers import TinyCkks

TOLERANCE = 2.0 ** -20
LAYOUT = RowMajorLayout(slots=1024, columns=64)  # 16 rows of 64 columns


def numpy_rotate_sum(x: np.ndarray, count: int, stride: int) -> np.ndarray:
    return sum(np.roll(x, -k * stride) for k in range(count))


def test_key_accounts():
    assert rotation_steps(64) == [1, 2, 4, 8, 16, 32]
    assert rotation_steps(16, 64) == [64, 128, 256, 512]
    assert replicate_steps(8, 2) == [-2, -4, -8]
    assert rotation_steps(64, radix=4) == [1, 2, 3, 4, 8, 12, 16, 32, 48]
    assert rotation_steps(8, radix=4) == [1, 2, 3, 4]            # last stage of radix 2
    assert rotation_steps(1) == []
    for bad in (dict(count=3), dict(count=8, radix=3), dict(count=8, stride=0), dict(count=8, radix=1)):
        with pytest.raises(ParameterError):
            rotation_steps(**bad)


@pytest.fixture(scope="module")
def ckks_setup():
    steps = (rotation_steps(64) + rotation_steps(64, radix=4) + replicate_steps(64)
             + rotation_steps(16, 64) + rotation_steps(64, 16) + rotation_steps(16) + replicate_steps(16))
    return TinyCkks(steps=steps)


@pytest.mark.parametrize("radix", [2, 4])
def test_rotate_sum_along_rows_and_over_rows(ckks_setup, radix):
    rng = np.random.default_rng()
    x = rng.uniform(-1, 1, 1024)
    ct = ckks_setup.encrypt(x)
    along = ckks_setup.decrypt(rotate_sum(ckks_setup.evaluator, ct, 64, radix=radix)).real
    assert np.abs(along - numpy_rotate_sum(x, 64, 1)).max() < TOLERANCE
    row_sums = along.reshape(16, 64)[:, 0]
    np.testing.assert_allclose(row_sums, x.reshape(16, 64).sum(axis=1), atol=TOLERANCE)
    over = ckks_setup.decrypt(rotate_sum(ckks_setup.evaluator, ct, 16, 64)).real
    # cyclic over all slots: every row holds the sum of all rows
    expected = np.tile(x.reshape(16, 64).sum(axis=0), 16)
    assert np.abs(over - expected).max() < TOLERANCE
    assert np.abs(over - numpy_rotate_sum(x, 16, 64)).max() < TOLERANCE


def test_replicate_spreads_column_zero_over_its_row(ckks_setup):
    rng = np.random.default_rng()
    values = rng.uniform(-1, 1, 16)
    x = LAYOUT.column_mask(0) * np.repeat(values, 64)
    ct = ckks_setup.encrypt(x)
    out_ct = replicate(ckks_setup.evaluator, ct, 64)
    out = ckks_setup.decrypt(out_ct).real
    assert np.abs(out - np.repeat(values, 64)).max() < TOLERANCE
    assert (out_ct.level, out_ct.scale) == (ct.level, ct.scale)  # depth 0


def test_missing_keys_are_named(ckks_setup):
    ct = ckks_setup.encrypt(np.zeros(4))
    with pytest.raises(MissingKeyError, match="rotation steps"):
        rotate_sum(ckks_setup.evaluator, ct, 16, 3)


def test_feature_major_inner_products_and_sample_sums(ckks_setup):
    """ColumnMajorLayout, 16 samples x 64 features: the feature sum leaves each sample's inner
    product in all its slots; the sample sum, a mask and a replicate give the column sums in
    every sample (what encrypted HELR does)."""
    rng = np.random.default_rng()
    layout = ColumnMajorLayout(1024, 64)
    x, v = rng.uniform(-1, 1, (16, 64)), rng.uniform(-1, 1, 64)
    ev = ckks_setup.evaluator
    product = ckks_setup.encrypt(layout.pack(x)[0] * layout.replicated(v))
    inner = ckks_setup.decrypt(rotate_sum(ev, product, 64, layout.feature_stride)).real
    assert np.abs(inner - np.tile(x @ v, 64)).max() < TOLERANCE
    sums = rotate_sum(ev, ckks_setup.encrypt(layout.pack(x)[0]), 16)
    masked = ev.rescale(ev.mul(sums, ckks_setup.encoder.encode(layout.row_mask(0), level=sums.level,
                                                                 scale=float(ckks_setup.params.q_primes[sums.level]))))
    spread = ckks_setup.decrypt(replicate(ev, masked, 16)).real
    assert np.abs(spread - layout.replicated(x.sum(axis=0))).max() < TOLERANCE
