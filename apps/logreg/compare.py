"""HELR on MNIST 3 vs 8: the sklearn baseline next to the plaintext twin of encrypted training."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from data.helr import HelrData, Pooling, helr_dataset
from data.mnist import load_mnist
from ml.baselines import LogregBaseline, logreg_baseline
from ml.metrics import BinaryReport, binary_report
from ml.plots import Curve, plot_curves

from .twin import HelrConfig, HelrResult, design_matrix, train_helr


@dataclass(frozen=True)
class HelrComparison:
    """Data description, the baseline, the twin's result and the report of its final w."""

    source: str
    data: HelrData
    baseline: LogregBaseline
    twin: HelrResult
    twin_report: BinaryReport


def compare_helr(
    mnist_path: str | Path | None = None, source: str = "auto", bits: int = 3,
    pooling: Pooling = "floor", config: HelrConfig = HelrConfig(), progress: bool = True,
) -> HelrComparison:
    """Load MNIST, build the HELR features, fit sklearn and run the twin."""
    mnist = load_mnist(mnist_path, source)
    data = helr_dataset(mnist, bits, pooling)
    x_train = design_matrix(data.x_train, data.levels)
    x_test = design_matrix(data.x_test, data.levels)
    baseline = logreg_baseline(x_train[:, 1:], data.y_train, x_test[:, 1:], data.y_test)
    steps = tqdm(range(config.iterations), desc="HELR twin", unit="it",
                 disable=None if progress else True)  # None: shown on a terminal only
    twin = train_helr(x_train, data.y_train, config, x_test, data.y_test, progress=steps)
    report = binary_report(data.y_test, x_test @ twin.w)
    return HelrComparison(mnist.source, data, baseline, twin, report)


def records_as_arrays(result: HelrResult) -> dict[str, np.ndarray]:
    """Per-iteration records stacked: w, v `[T, d]`, and `[T]` arrays of the scalars."""
    records = result.records
    arrays = {"w": np.stack([r.w for r in records]), "v": np.stack([r.v for r in records])}
    for name in ("block", "gamma", "max_abs_input", "train_loss", "test_loss", "test_accuracy",
                 "test_auroc"):
        arrays[name] = np.array([getattr(r, name) for r in records], dtype=np.float64)
    return arrays


def plot_helr(comparison: HelrComparison, path: str | Path) -> Path:
    """Accuracy and test loss of the twin per iteration, with sklearn's accuracy as reference."""
    arrays = records_as_arrays(comparison.twin)
    curve = Curve("HELR twin (cubic sigmoid, NAG)", arrays["test_accuracy"], arrays["test_loss"])
    references = {"sklearn logistic regression": comparison.baseline.report.accuracy}
    return plot_curves([curve], path, "MNIST 3 vs 8", "test log-loss", references)
