"""The exact plaintext twin of the iDASH 2020 encrypted-XGBoost workload (integer arithmetic).

Node test (1 = go left), from the client's bits x0 (feature in its low state), x2 (high
state) and the server's threshold bit y:  z = (1 - x0) * (x2 * (y - 1) - y) + 1.
Each depth-2 tree gives s1*s2*L1 + ... (see `trees`), a class score is the sum of its 128 tree
values and the prediction is the argmax. Everything stays in int64, as BFV computes it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from data.idash import N_CLASSES, IdashWorkload

from .trees import class_scores, tree_values


@dataclass(frozen=True)
class IdashResult:
    """Class scores `[99, 11]` int64, predicted ids `[99]` and how many match the labels."""

    scores: np.ndarray
    predicted: np.ndarray
    correct: int
    total: int


def node_tests(x0: np.ndarray, x2: np.ndarray, y: np.ndarray) -> np.ndarray:
    """z = (1 - x0)(x2 (y - 1) - y) + 1 elementwise (all 0/1 int64)."""
    return (1 - x0) * (x2 * (y - 1) - y) + 1


def evaluate_idash(workload: IdashWorkload, leaves: np.ndarray | None = None) -> IdashResult:
    """Evaluate the encoded model on the 99 encoded samples.

    `leaves` replaces the integer leaves (e.g. `workload.leaves_float` for the float model).
    """
    z = node_tests(workload.x0, workload.x2, workload.thresholds[None, :, :])
    leaf_values = workload.leaves if leaves is None else leaves
    tree_class = np.arange(workload.thresholds.shape[0]) // (len(workload.thresholds) // N_CLASSES)
    scores = class_scores(tree_values(z, leaf_values), tree_class, N_CLASSES)
    predicted = scores.argmax(axis=1)
    return IdashResult(scores, predicted, int((predicted == workload.labels).sum()),
                       len(workload.labels))
