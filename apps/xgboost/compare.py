"""SRBCT with XGBoost next to the plaintext twin of encrypted inference on the exported model."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xgboost
from tqdm import tqdm

from data.genomics import Expression
from ml.baselines import XGBoostBaseline, XGBoostParams, xgboost_baseline
from ml.metrics import MulticlassReport, multiclass_report
from ml.plots import Curve, plot_curves

from .encoding import PublicBinning
from .export import HEForest, export_booster
from .twin import ForestPrediction, predict_forest


@dataclass(frozen=True)
class ForestComparison:
    """One XGBoost model, its export and the twin's predictions on the test set."""

    name: str
    baseline: XGBoostBaseline
    forest: HEForest
    twin: ForestPrediction
    twin_report: MulticlassReport
    library_margins: np.ndarray

    @property
    def same_argmax(self) -> int:
        return int((self.twin.predicted == self.library_margins.argmax(axis=1)).sum())

    @property
    def max_score_error(self) -> float:
        return float(np.abs(self.twin.margins - self.library_margins).max())


class _RoundProgress(xgboost.callback.TrainingCallback):
    """tqdm bar advanced once per boosting round."""

    def __init__(self, rounds: int, name: str, enabled: bool) -> None:
        super().__init__()
        self.bar = tqdm(total=rounds, desc=name, unit="round",
                        disable=None if enabled else True)  # None: shown on a terminal only

    def after_iteration(self, model, epoch, evals_log) -> bool:  # noqa: ANN001 (xgboost API)
        self.bar.update(1)
        return False

    def after_training(self, model):  # noqa: ANN001
        self.bar.close()
        return model


def compare_forest(
    data: Expression, name: str, params: XGBoostParams, frac_bits: int = 16,
    progress: bool = True,
) -> ForestComparison:
    """Train, export with the training matrix's public cuts, and evaluate the twin."""
    n_classes = len(data.classes)
    callbacks = [_RoundProgress(params.rounds, name, progress)]
    baseline = xgboost_baseline(data.x_train, data.y_train, data.x_test, data.y_test,
                                n_classes, params, callbacks)
    binning = PublicBinning.from_dmatrix(baseline.train_matrix)
    forest = export_booster(baseline.booster, binning, frac_bits)
    twin = predict_forest(forest, binning.encode(data.x_test))
    margins = baseline.booster.predict(xgboost.DMatrix(data.x_test), output_margin=True)
    return ForestComparison(name, baseline, forest, twin,
                            multiclass_report(data.y_test, twin.predicted, n_classes), margins)


def plot_forests(comparisons: list[ForestComparison], path: str | Path) -> Path:
    """Test accuracy and mlogloss per boosting round of each model."""
    curves = [Curve(c.name, c.baseline.curves["accuracy"], c.baseline.curves["loss"])
              for c in comparisons]
    return plot_curves(curves, path, "SRBCT XGBoost", "test mlogloss")
