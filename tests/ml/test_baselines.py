"""Baselines on small data: accuracy thresholds, reports checked against the models' output."""
import numpy as np
import pytest
import xgboost

from ml.baselines import XGBoostParams, logreg_baseline, xgboost_baseline


def test_logreg_baseline_separates_two_gaussians():
    rng = np.random.default_rng(5)
    x = np.vstack([rng.normal(0, 1, (300, 5)), rng.normal(1.2, 1, (300, 5))])
    y = np.repeat([0, 1], 300)
    order = rng.permutation(600)
    x, y = x[order], y[order]
    result = logreg_baseline(x[:400], y[:400], x[400:], y[400:])
    direct = result.model.predict(x[400:])
    assert result.report.accuracy == pytest.approx(np.mean(direct == y[400:]))
    assert result.report.accuracy > 0.85 and result.report.auroc > 0.93  # Bayes rate ~0.91


@pytest.mark.parametrize("depth", [2, None])
def test_xgboost_on_srbct(srbct, depth):
    params = XGBoostParams(rounds=20, max_depth=depth)
    result = xgboost_baseline(srbct.x_train, srbct.y_train, srbct.x_test, srbct.y_test, 4, params)
    probabilities = result.booster.predict(xgboost.DMatrix(srbct.x_test))
    accuracy = np.mean(probabilities.argmax(axis=1) == srbct.y_test)
    assert result.report.accuracy == pytest.approx(accuracy)
    assert accuracy >= 0.85  # 20 test samples; measured 0.90 at 20 and 50 rounds
    assert len(result.curves["accuracy"]) == 20
    assert result.curves["accuracy"][-1] == pytest.approx(accuracy)
    assert result.booster.num_boosted_rounds() == 20
