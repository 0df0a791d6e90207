"""The iDASH 2020 workload's integer twin: 81/99 as the reference reports."""
import numpy as np

from apps.xgboost.idash import N_CLASSES, evaluate_idash, node_tests
from data.idash import load_idash
from fhe_core.params import preset_literal

IDASH_PRESET = "BFVN13QP218L3D4T20"  # the preset the encrypted iDASH runs use


def test_node_test_truth_table():
    x0, x2, y = np.meshgrid([0, 1], [0, 1], [0, 1], indexing="ij")
    z = node_tests(x0, x2, y)
    for a, b, c, out in zip(x0.ravel(), x2.ravel(), y.ravel(), z.ravel()):
        if a == 1 and b == 1:
            continue  # never both low and high
        expected = 1 if a == 1 else (0 if b == 1 else 1 - c)  # low: left, high: right, else 1-y
        assert out == expected


def test_81_of_99(idash_dir):
    workload = load_idash(idash_dir)
    result = evaluate_idash(workload)
    assert (result.correct, result.total) == (81, 99)
    assert result.scores.dtype == np.int64
    # Every class score the model can produce (one leaf of each of its trees, the largest in
    # magnitude) fits the plaintext modulus of the encrypted runs in centered form, so
    # decryption returns these integers exactly; the samples' scores stay within that bound.
    trees_per_class = len(workload.thresholds) // N_CLASSES
    per_tree = np.abs(workload.leaves).max(axis=1)
    worst = max(per_tree[c * trees_per_class:(c + 1) * trees_per_class].sum() for c in range(N_CLASSES))
    t = preset_literal(IDASH_PRESET).plaintext_modulus
    assert np.abs(result.scores).max() <= worst <= (t - 1) // 2
    # The integer leaves are the float leaves x 10^4 truncated: each of a score's trees_per_class
    # leaves is off by less than 1, so the float model's scores x 10^4 are within that many.
    floats = evaluate_idash(workload, workload.leaves_float)
    np.testing.assert_array_equal(floats.predicted, result.predicted)
    assert np.abs(floats.scores * 1e4 - result.scores).max() < trees_per_class
