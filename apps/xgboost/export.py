"""Export a trained XGBoost model to an HE-friendly forest of complete binary trees.

Every tree becomes a complete tree of the model's maximum depth D in heap order (see `trees`):
per internal node the feature, the threshold, the index of the thermometer bit that decides
it (see `encoding`) and the default direction for missing values; per tree 2^D leaf values as
fixed-point integers round(leaf * 2^frac_bits). A branch that XGBoost ended early is padded:
its leaf value is copied to every leaf below it and the padding nodes test bit 0 (their result
cannot matter). The base margin of each class is kept the same way.

XGBoost semantics kept here: `x < threshold` goes left, a missing value follows
`default_left`, and the margin is base_score (per class; logit(base_score) for
binary:logistic) plus the sum of the class's leaves.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import xgboost

from .encoding import ExportError, PublicBinning

_MARGIN_OBJECTIVES = ("multi:softprob", "multi:softmax", "reg:squarederror")


@dataclass(frozen=True)
class HEForest:
    """Trees `[T, ...]` in heap order: feature, threshold (float32, NaN on padding), bit,
    default_left, is_padding `[T, 2^D - 1]`; leaves `[T, 2^D]` int64 and leaves_float float64;
    tree_class `[T]`; base `[C]` int64 and base_float; n_classes = C (1 for binary)."""

    depth: int
    n_classes: int
    frac_bits: int
    feature: np.ndarray
    threshold: np.ndarray
    bit: np.ndarray
    default_left: np.ndarray
    is_padding: np.ndarray
    leaves: np.ndarray
    leaves_float: np.ndarray
    tree_class: np.ndarray
    base: np.ndarray
    base_float: np.ndarray
    binning: PublicBinning

    @property
    def score_bound(self) -> int:
        """Largest |class score| the integer evaluation can reach (for the plaintext modulus)."""
        worst = np.abs(self.leaves).max(axis=1)
        per_class = np.bincount(self.tree_class, weights=worst, minlength=self.n_classes)
        return int((per_class + np.abs(self.base)).max())


def export_booster(
    booster: xgboost.Booster, binning: PublicBinning, frac_bits: int = 16
) -> HEForest:
    """Convert `booster` (numeric splits only) using the public `binning` for its thresholds."""
    model = json.loads(booster.save_raw(raw_format="json"))["learner"]
    trees = model["gradient_booster"]["model"]["trees"]
    kind = model["gradient_booster"]["name"]
    if kind != "gbtree":
        raise ExportError(f"only gbtree boosters are supported, not {kind}")
    depth = max(_depth(tree, 0) for tree in trees)
    forest = _empty(len(trees), depth)
    for index, tree in enumerate(trees):
        if any(tree["split_type"]):
            raise ExportError("categorical splits are not supported")
        _fill(tree, 0, 0, 0, depth, index, forest, binning)
    n_classes = max(int(model["learner_model_param"]["num_class"]), 1)
    base_float = _base_margin(model, n_classes)
    scale = 2.0**frac_bits
    return HEForest(
        depth=depth, n_classes=n_classes, frac_bits=frac_bits, **forest,
        leaves=np.rint(forest["leaves_float"] * scale).astype(np.int64),
        tree_class=np.asarray(model["gradient_booster"]["model"]["tree_info"], dtype=np.int64),
        base=np.rint(base_float * scale).astype(np.int64), base_float=base_float,
        binning=binning,
    )


def _depth(tree: dict, node: int) -> int:
    left = tree["left_children"][node]
    if left == -1:
        return 0
    right = tree["right_children"][node]
    return 1 + max(_depth(tree, left), _depth(tree, right))


def _empty(n_trees: int, depth: int) -> dict[str, np.ndarray]:
    nodes, leaves = 2**depth - 1, 2**depth
    return {
        "feature": np.zeros((n_trees, nodes), dtype=np.int64),
        "threshold": np.full((n_trees, nodes), np.nan, dtype=np.float32),
        "bit": np.zeros((n_trees, nodes), dtype=np.int64),
        "default_left": np.ones((n_trees, nodes), dtype=np.int64),
        "is_padding": np.ones((n_trees, nodes), dtype=bool),
        "leaves_float": np.zeros((n_trees, leaves), dtype=np.float64),
    }


def _fill(
    tree: dict, node: int, heap: int, level: int, depth: int, index: int,
    forest: dict[str, np.ndarray], binning: PublicBinning,
) -> None:
    """Copy XGBoost node `node` to heap position `heap` (at `level`) of tree `index`."""
    left = tree["left_children"][node]
    if left == -1:
        width = 2 ** (depth - level)
        first = (heap - (2**level - 1)) * width
        forest["leaves_float"][index, first : first + width] = tree["split_conditions"][node]
        return
    feature = tree["split_indices"][node]
    threshold = tree["split_conditions"][node]
    forest["feature"][index, heap] = feature
    forest["threshold"][index, heap] = threshold
    forest["bit"][index, heap] = binning.bit_index(feature, threshold)
    forest["default_left"][index, heap] = int(tree["default_left"][node])
    forest["is_padding"][index, heap] = False
    _fill(tree, left, 2 * heap + 1, level + 1, depth, index, forest, binning)
    _fill(tree, tree["right_children"][node], 2 * heap + 2, level + 1, depth, index, forest,
          binning)


def _base_margin(model: dict, n_classes: int) -> np.ndarray:
    """Base margin per class from base_score ("0.5" or "[a,b,...]") and the objective."""
    text = model["learner_model_param"]["base_score"].strip("[]")
    values = np.array([float(v) for v in text.split(",")], dtype=np.float64)
    base = np.broadcast_to(values, (n_classes,)).copy()
    objective = model["objective"]["name"]
    if objective == "binary:logistic":
        return np.log(base / (1.0 - base))
    if objective in _MARGIN_OBJECTIVES:
        return base
    raise ExportError(f"objective {objective!r} is not supported (use one of "
                      f"{('binary:logistic',) + _MARGIN_OBJECTIVES})")


def required_plaintext_bits(forest: HEForest) -> int:
    """Bits of a signed plaintext modulus that holds every class score without wrapping."""
    return math.ceil(math.log2(forest.score_bound + 1)) + 1
