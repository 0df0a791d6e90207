"""The exact plaintext twin of encrypted tree-ensemble inference on an exported forest.

For each node the test is  s = m * default_left + (1 - m) * b  with b the thermometer bit the
node selects and m the feature's missing flag (all 0/1 int64); then tree values by path
products, class scores = base + sum of the class's tree values (fixed-point integers), and the
prediction is the argmax (or score > 0 for a binary model). This is what the server computes
on ciphertexts; the twin computes the same integers in the clear.

The model-private encoding (``predict_private``) tests q < k on the feature's grid cell instead of
a thermometer bit (see ``private_forest``); the rest is the same.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .encoding import EncodedFeatures
from .export import HEForest
from .private_forest import PrivateForest
from .trees import class_scores, tree_values


@dataclass(frozen=True)
class ForestPrediction:
    """Fixed-point class scores `[n, C]` int64, the same without quantisation (float64
    leaves, `margins_exact`), scores / 2^frac_bits (`margins`) and predicted class ids `[n]`."""

    scores: np.ndarray
    margins: np.ndarray
    margins_exact: np.ndarray
    predicted: np.ndarray


def node_tests(forest: HEForest, encoded: EncodedFeatures) -> np.ndarray:
    """Node tests `[n, T, 2^D - 1]` int64 (1 = go left)."""
    bits = encoded.bits[:, forest.bit]
    missing = encoded.missing[:, forest.feature]
    return missing * forest.default_left + (1 - missing) * bits


def predict_forest(forest: HEForest, encoded: EncodedFeatures) -> ForestPrediction:
    """Evaluate the forest on client-encoded samples, in integers and in float64."""
    tests = node_tests(forest, encoded)
    scores = forest.base + class_scores(
        tree_values(tests, forest.leaves), forest.tree_class, forest.n_classes
    )
    exact = forest.base_float + class_scores(
        tree_values(tests.astype(np.float64), forest.leaves_float), forest.tree_class,
        forest.n_classes,
    )
    return ForestPrediction(scores, scores / 2.0**forest.frac_bits, exact, predicted_classes(scores))


def predicted_classes(scores: np.ndarray) -> np.ndarray:
    """Class ids `[n]` of scores `[n, C]`: the argmax, or score > 0 for a binary model (C = 1)."""
    return (scores[:, 0] > 0).astype(np.int64) if scores.shape[1] == 1 else scores.argmax(axis=1)


def private_node_tests(forest: PrivateForest, cells: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """Node tests `[n, T, 2^D - 1]` int64 of the model-private encoding: q < k on the node's
    feature's grid cell q, the default direction where that feature is missing."""
    q, gone = cells[:, forest.feature], missing[:, forest.feature]
    return np.where(gone, forest.default_left, q < forest.threshold_index).astype(np.int64)


def predict_private(forest: PrivateForest, cells: np.ndarray, missing: np.ndarray) -> ForestPrediction:
    """Evaluate a private forest on grid cells `[n, F]` (``grid.index``), in integers and float64."""
    tests = private_node_tests(forest, np.asarray(cells, dtype=np.int64), np.asarray(missing, dtype=bool))
    scores = forest.base + class_scores(tree_values(tests, forest.leaves), forest.tree_class, forest.n_classes)
    exact = forest.base_float + class_scores(tree_values(tests.astype(np.float64), forest.leaves_float),
                                             forest.tree_class, forest.n_classes)
    return ForestPrediction(scores, scores / 2.0**forest.frac_bits, exact, predicted_classes(scores))
