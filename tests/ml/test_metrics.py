"""Metrics against direct numpy computations on random inputs."""
import numpy as np
import pytest

from ml.metrics import binary_report, logistic_loss, multiclass_report


def test_binary_report_matches_direct_computation():
    rng = np.random.default_rng(11)
    y = rng.integers(0, 2, 300)
    scores = rng.normal(size=300) + y
    report = binary_report(y, scores)
    predicted = scores > 0
    assert report.accuracy == pytest.approx(np.mean(predicted == y))
    # AUROC = probability that a random positive outranks a random negative
    pos, neg = scores[y == 1], scores[y == 0]
    assert report.auroc == pytest.approx(np.mean(pos[:, None] > neg[None, :]), abs=1e-12)
    assert report.confusion.tolist() == [
        [np.sum(~predicted & (y == 0)), np.sum(predicted & (y == 0))],
        [np.sum(~predicted & (y == 1)), np.sum(predicted & (y == 1))],
    ]


def test_multiclass_report_macro_f1():
    rng = np.random.default_rng(12)
    y = rng.integers(0, 4, 200)
    predicted = np.where(rng.random(200) < 0.7, y, rng.integers(0, 4, 200))
    report = multiclass_report(y, predicted, 4)
    f1 = []
    for c in range(4):
        tp = np.sum((predicted == c) & (y == c))
        f1.append(2 * tp / (np.sum(predicted == c) + np.sum(y == c)))
    assert report.macro_f1 == pytest.approx(np.mean(f1), abs=1e-12)
    expected = np.zeros((4, 4), dtype=np.int64)
    np.add.at(expected, (y, predicted), 1)  # rows = truth, columns = prediction
    np.testing.assert_array_equal(report.confusion, expected)


def test_logistic_loss_is_stable_and_exact():
    y = np.array([1, 0, 1, 0])
    margins = np.array([2.0, -1.0, -800.0, 800.0])
    expected = np.mean([np.log1p(np.exp(-2.0)), np.log1p(np.exp(-1.0)), 800.0, 800.0])
    assert logistic_loss(y, margins) == pytest.approx(expected, rel=1e-12)
