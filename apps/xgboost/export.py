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
from typing import TYPE_CHECKING

import numpy as np

from .archive import ModelFormatError, read_archive, write_archive
from .encoding import ExportError, PublicBinning

if TYPE_CHECKING:  # xgboost is needed to train and export, not to evaluate
    import xgboost

_MARGIN_OBJECTIVES = ("multi:softprob", "multi:softmax", "reg:squarederror")
FOREST_FORMAT = "fhe-ml/he-forest/1"
MAX_FOREST_BYTES = 1 << 30
MAX_DEPTH = 16
_NODE_ARRAYS = ("feature", "threshold", "bit", "default_left", "is_padding")
_ARRAYS = _NODE_ARRAYS + ("leaves", "leaves_float", "tree_class", "base", "base_float")



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

    def to_bytes(self) -> bytes:
        """An npz archive (no pickle): the arrays plus a JSON header of the scalars."""
        header = {"format": FOREST_FORMAT, "depth": self.depth, "n_classes": self.n_classes,
                  "frac_bits": self.frac_bits}
        arrays = {name: getattr(self, name) for name in _ARRAYS}
        return write_archive(header, {**arrays, "cuts": self.binning.cuts, "offsets": self.binning.offsets})

    @classmethod
    def from_bytes(cls, data: bytes, *, max_bytes: int = MAX_FOREST_BYTES) -> HEForest:
        """Read :meth:`to_bytes`; ModelFormatError unless every field is consistent."""
        header, arrays = read_archive(data, "HEForest.from_bytes", max_bytes, FOREST_FORMAT,
                                      _ARRAYS + ("cuts", "offsets"))
        return _forest_from_arrays(header, arrays)

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


def _forest_from_arrays(header: dict, arrays: dict[str, np.ndarray]) -> HEForest:
    """Validate the header and arrays of a serialized forest and build it."""
    depth, n_classes, frac_bits = (header.get(k) for k in ("depth", "n_classes", "frac_bits"))
    for name, value, low, high in (("depth", depth, 0, MAX_DEPTH), ("n_classes", n_classes, 1, 1 << 16),
                                   ("frac_bits", frac_bits, 0, 62)):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ModelFormatError(f"HEForest.from_bytes: {name} must be an int in [{low}, {high}], got {value!r}")
    n_trees = len(arrays["tree_class"]) if arrays["tree_class"].ndim else -1  # -1: a 0-d array, refused below
    nodes, leaves = 2**depth - 1, 2**depth
    expect = {"feature": ((n_trees, nodes), "i"), "threshold": ((n_trees, nodes), "f"),
              "bit": ((n_trees, nodes), "i"), "default_left": ((n_trees, nodes), "i"),
              "is_padding": ((n_trees, nodes), "b"), "leaves": ((n_trees, leaves), "i"),
              "leaves_float": ((n_trees, leaves), "f"), "tree_class": ((n_trees,), "i"),
              "base": ((n_classes,), "i"), "base_float": ((n_classes,), "f"), "cuts": (None, "f"),
              "offsets": (None, "i")}
    for name, (shape, kind) in expect.items():
        a = arrays[name]
        if a.dtype.kind != kind or (shape is not None and a.shape != shape) or (shape is None and a.ndim != 1):
            raise ModelFormatError(f"HEForest.from_bytes: {name} has shape {a.shape} and dtype {a.dtype}, "
                                   f"expected {shape or '1-D'} of kind {kind!r}")
    with np.errstate(over="ignore"):  # a cut beyond float32 becomes inf: refused below
        binning = PublicBinning(arrays["cuts"].astype(np.float32), arrays["offsets"].astype(np.int64))
    if not binning.offsets_index_cuts:
        raise ModelFormatError("HEForest.from_bytes: the binning offsets do not index the cuts")
    if not np.isfinite(binning.cuts).all():
        raise ModelFormatError("HEForest.from_bytes: the binning cuts must be finite float32 numbers")
    feature, bit, live = arrays["feature"], arrays["bit"], ~arrays["is_padding"]
    if ((feature < 0) | (feature >= binning.n_features)).any() or ((bit < 0) | (bit >= len(binning.cuts))).any():
        raise ModelFormatError("HEForest.from_bytes: a node's feature or bit is out of range")
    if (binning.bit_feature[bit[live]] != feature[live]).any():
        raise ModelFormatError("HEForest.from_bytes: a node's bit does not belong to its feature")
    if not np.isin(arrays["default_left"], (0, 1)).all():
        raise ModelFormatError("HEForest.from_bytes: default_left must be 0 or 1")
    if ((arrays["tree_class"] < 0) | (arrays["tree_class"] >= n_classes)).any():
        raise ModelFormatError("HEForest.from_bytes: a tree's class is out of range")
    # not np.abs: the absolute value of the most negative int64 is itself, negative
    if any(((a >= 1 << 62) | (a <= -(1 << 62))).any() for a in (arrays["leaves"], arrays["base"])):
        raise ModelFormatError("HEForest.from_bytes: leaf values beyond 2^62")
    return HEForest(depth=depth, n_classes=n_classes, frac_bits=frac_bits,
                    feature=feature.astype(np.int64), threshold=arrays["threshold"].astype(np.float32),
                    bit=bit.astype(np.int64), default_left=arrays["default_left"].astype(np.int64),
                    is_padding=arrays["is_padding"].astype(bool), leaves=arrays["leaves"].astype(np.int64),
                    leaves_float=arrays["leaves_float"].astype(np.float64),
                    tree_class=arrays["tree_class"].astype(np.int64), base=arrays["base"].astype(np.int64),
                    base_float=arrays["base_float"].astype(np.float64), binning=binning)
