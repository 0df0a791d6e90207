"""Plaintext baselines: scikit-learn logistic regression and XGBoost (the real library).

Both return fitted models with metric reports and per-iteration curves, so the encrypted
runs and their plaintext twins have numbers to be compared with.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import xgboost
from sklearn.linear_model import LogisticRegression

from .metrics import BinaryReport, MulticlassReport, binary_report, multiclass_report


@dataclass(frozen=True)
class LogregBaseline:
    """sklearn's model and its test report (scores are margins x . w + b)."""

    model: LogisticRegression
    report: BinaryReport


def logreg_baseline(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray,
    c: float = 1.0,
) -> LogregBaseline:
    """L2-regularised logistic regression (lbfgs, intercept) on 0/1 labels."""
    model = LogisticRegression(C=c, max_iter=5000)
    model.fit(x_train, y_train)
    return LogregBaseline(model, binary_report(y_test, model.decision_function(x_test)))


@dataclass(frozen=True)
class XGBoostParams:
    """Training knobs; max_depth=None keeps XGBoost's default depth (6)."""

    rounds: int = 50
    max_depth: int | None = 2
    learning_rate: float = 0.3
    seed: int = 0
    threads: int = 2

    def booster_params(self, n_classes: int) -> dict:
        params = {
            "objective": "multi:softprob", "num_class": n_classes, "tree_method": "hist",
            "eta": self.learning_rate, "seed": self.seed, "nthread": self.threads,
            "eval_metric": ["merror", "mlogloss"],
        }
        if self.max_depth is not None:
            params["max_depth"] = self.max_depth
        return params


@dataclass(frozen=True)
class XGBoostBaseline:
    """The booster, the training matrix (its quantile cuts give the public binning), the
    test report and per-round test curves (accuracy, mlogloss)."""

    booster: xgboost.Booster
    train_matrix: xgboost.QuantileDMatrix
    report: MulticlassReport
    curves: dict[str, np.ndarray] = field(default_factory=dict)


def xgboost_baseline(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray,
    n_classes: int, params: XGBoostParams = XGBoostParams(),
    callbacks: list[xgboost.callback.TrainingCallback] | None = None,
) -> XGBoostBaseline:
    """Multi-class softprob boosting with the hist method; predicted class = argmax."""
    train = xgboost.QuantileDMatrix(x_train, label=y_train)  # its cuts exist before training
    test = xgboost.DMatrix(x_test, label=y_test)
    history: dict = {}
    booster = xgboost.train(
        params.booster_params(n_classes), train, num_boost_round=params.rounds,
        evals=[(test, "test")], evals_result=history, verbose_eval=False, callbacks=callbacks,
    )
    predicted = booster.predict(test).argmax(axis=1)
    curves = {
        "accuracy": 1.0 - np.asarray(history["test"]["merror"]),
        "loss": np.asarray(history["test"]["mlogloss"]),
    }
    return XGBoostBaseline(booster, train, multiclass_report(y_test, predicted, n_classes), curves)
