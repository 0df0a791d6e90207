"""Classification metrics shared by the baselines and the twins (thin wrappers over sklearn).

sklearn is imported where it is used, so that code needing only ``logistic_loss`` (the HELR twin
without a test set, e.g. on a GPU image without scikit-learn) imports this module without it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BinaryReport:
    """Accuracy and AUROC of thresholded scores; confusion `[2, 2]` (rows = truth)."""

    accuracy: float
    auroc: float
    confusion: np.ndarray


@dataclass(frozen=True)
class MulticlassReport:
    """Accuracy and macro-F1 of predicted class ids; confusion `[k, k]` (rows = truth)."""

    accuracy: float
    macro_f1: float
    confusion: np.ndarray


def binary_report(
    y_true: np.ndarray, scores: np.ndarray, threshold: float = 0.0
) -> BinaryReport:
    """Report for 0/1 labels and real scores (margins by default: predict 1 when score > 0)."""
    from sklearn.metrics import accuracy_score, confusion_matrix, roc_auc_score

    predicted = (np.asarray(scores) > threshold).astype(np.int64)
    return BinaryReport(
        accuracy=float(accuracy_score(y_true, predicted)),
        auroc=float(roc_auc_score(y_true, scores)),
        confusion=confusion_matrix(y_true, predicted, labels=[0, 1]),
    )


def multiclass_report(
    y_true: np.ndarray, predicted: np.ndarray, n_classes: int
) -> MulticlassReport:
    """Report for class ids 0..n_classes-1."""
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

    labels = list(range(n_classes))
    return MulticlassReport(
        accuracy=float(accuracy_score(y_true, predicted)),
        macro_f1=float(
            f1_score(y_true, predicted, labels=labels, average="macro", zero_division=0)
        ),
        confusion=confusion_matrix(y_true, predicted, labels=labels),
    )


def logistic_loss(y_true: np.ndarray, margins: np.ndarray) -> float:
    """Mean binary cross-entropy of 0/1 labels under sigmoid(margins), computed stably."""
    signed = np.where(np.asarray(y_true) == 1, 1.0, -1.0) * np.asarray(margins, dtype=np.float64)
    return float(np.mean(np.logaddexp(0.0, -signed)))


def multiclass_loss(y_true: np.ndarray, probabilities: np.ndarray) -> float:
    """Mean multi-class cross-entropy (sklearn's log_loss)."""
    from sklearn.metrics import log_loss

    return float(log_loss(y_true, probabilities, labels=list(range(probabilities.shape[1]))))
