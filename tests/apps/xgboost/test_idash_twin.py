"""The iDASH 2020 workload's integer twin: 81/99 as the reference reports."""
import numpy as np

from apps.xgboost.idash import evaluate_idash, node_tests
from data.idash import load_idash


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
    assert np.abs(result.scores).max() == 85498  # fits a 20-bit BFV plaintext modulus
    assert result.scores.dtype == np.int64
    floats = evaluate_idash(workload, workload.leaves_float)
    np.testing.assert_array_equal(floats.predicted, result.predicted)
    np.testing.assert_allclose(floats.scores * 1e4, result.scores, atol=128 * 4)  # truncation
