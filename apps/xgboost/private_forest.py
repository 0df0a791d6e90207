"""The model-private forest: an exported XGBoost model with its thresholds rounded onto a public grid.

``export_private(booster, grid)`` (or ``PrivateForest.from_forest(he_forest, grid)``) keeps every
tree of the export (complete trees of the model's depth D in heap order, see ``export``) and
replaces each threshold theta by the grid index k(theta) (see ``grid``): a node sends a sample
left when its cell q of the node's feature satisfies q < k, or, when the feature is missing, when
the node's default direction is left. On the quantized features v_{q(x)} that is exactly what
XGBoost computes (``twin.predict_private`` is checked against ``booster.predict`` in the tests).

Only the server holds this object: the client learns the grid, the number of features and classes
and the public bounds (see ``private_plan``), never a feature index, a threshold or a leaf.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .archive import ModelFormatError, read_archive, write_archive
from .encoding import PublicBinning
from .export import MAX_DEPTH, MAX_FOREST_BYTES, HEForest, export_booster
from .grid import FixedPointGrid, GridError

if TYPE_CHECKING:  # xgboost is needed to train and export, not to evaluate
    import xgboost

PRIVATE_FORMAT = "fhe-ml/private-forest/1"
_ARRAYS = ("feature", "threshold_index", "default_left", "is_padding", "leaves", "leaves_float", "tree_class",
           "base", "base_float")


@dataclass(frozen=True)
class PrivateForest:
    """Trees `[T, ...]` in heap order: feature, threshold_index (k in [0, 2^b]), default_left,
    is_padding `[T, 2^D - 1]`; leaves `[T, 2^D]` int64 (round(leaf 2^frac_bits)) and leaves_float;
    tree_class `[T]`; base `[C]` int64 and base_float; n_features F; the public grid."""

    depth: int
    n_classes: int
    n_features: int
    frac_bits: int
    grid: FixedPointGrid
    feature: np.ndarray
    threshold_index: np.ndarray
    default_left: np.ndarray
    is_padding: np.ndarray
    leaves: np.ndarray
    leaves_float: np.ndarray
    tree_class: np.ndarray
    base: np.ndarray
    base_float: np.ndarray

    @classmethod
    def from_forest(cls, forest: HEForest, grid: FixedPointGrid) -> PrivateForest:
        """The forest's thresholds rounded onto ``grid`` (padding nodes get k = 0: never read)."""
        k = np.where(forest.is_padding, 0, grid.threshold_index(forest.threshold))
        return cls(forest.depth, forest.n_classes, forest.binning.n_features, forest.frac_bits, grid,
                   forest.feature.copy(), k, forest.default_left.copy(), forest.is_padding.copy(), forest.leaves.copy(),
                   forest.leaves_float.copy(), forest.tree_class.copy(), forest.base.copy(), forest.base_float.copy())

    # ---- what the plan needs ---------------------------------------------------------------------

    @property
    def is_constant(self) -> np.ndarray:
        """`[T]` bool: trees without a split (a leaf value added whatever the sample)."""
        return self.is_padding.all(axis=1)

    @property
    def trees_per_class(self) -> int:
        """The most trees with a split in one class (what ``max_trees_per_class`` must bound)."""
        live = self.tree_class[~self.is_constant]
        return int(np.bincount(live, minlength=self.n_classes).max()) if len(live) else 0

    @property
    def score_bound(self) -> int:
        """Largest |class score| the integer evaluation can reach (for the plaintext modulus)."""
        worst = np.abs(self.leaves).max(axis=1)
        per_class = np.bincount(self.tree_class, weights=worst, minlength=self.n_classes)
        return int((per_class + np.abs(self.base)).max())

    # ---- bytes -----------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """An npz archive (no pickle): the arrays plus a JSON header of the scalars and the grid."""
        header = {"format": PRIVATE_FORMAT, "depth": self.depth, "n_classes": self.n_classes,
                  "n_features": self.n_features, "frac_bits": self.frac_bits, "grid": self.grid.to_dict()}
        return write_archive(header, {name: getattr(self, name) for name in _ARRAYS})

    @classmethod
    def from_bytes(cls, data: bytes, *, max_bytes: int = MAX_FOREST_BYTES) -> PrivateForest:
        """Read :meth:`to_bytes`; ModelFormatError unless every field is consistent."""
        header, arrays = read_archive(data, "PrivateForest.from_bytes", max_bytes, PRIVATE_FORMAT, _ARRAYS)
        return _from_arrays(header, arrays)


def export_private(booster: xgboost.Booster, grid: FixedPointGrid, frac_bits: int = 16) -> PrivateForest:
    """Export ``booster`` (numeric splits only) with its thresholds rounded onto ``grid``: no data
    and no quantile cuts are needed (the grid is public, the thresholds stay on the server)."""
    return PrivateForest.from_forest(export_booster(booster, _threshold_binning(booster), frac_bits), grid)


def _threshold_binning(booster: xgboost.Booster) -> PublicBinning:
    """A binning whose cuts are the model's own thresholds per feature (export's bit index needs
    one; the private forest keeps the thresholds, not the bits)."""
    trees = json.loads(booster.save_raw(raw_format="json"))["learner"]["gradient_booster"]["model"]["trees"]
    n_features = booster.num_features()
    per_feature: list[set] = [set() for _ in range(n_features)]
    for tree in trees:
        for left, feature, threshold in zip(tree["left_children"], tree["split_indices"], tree["split_conditions"]):
            if left != -1:
                per_feature[feature].add(np.float32(threshold))
    cuts = [np.array(sorted(s), dtype=np.float32) for s in per_feature]
    offsets = np.concatenate([[0], np.cumsum([len(c) for c in cuts])]).astype(np.int64)
    return PublicBinning(np.concatenate(cuts + [np.zeros(0, np.float32)]).astype(np.float32), offsets)


def _from_arrays(header: dict, arrays: dict[str, np.ndarray]) -> PrivateForest:
    what = "PrivateForest.from_bytes"
    scalars = {k: header.get(k) for k in ("depth", "n_classes", "n_features", "frac_bits")}
    for name, low, high in (("depth", 0, MAX_DEPTH), ("n_classes", 1, 1 << 16), ("n_features", 1, 1 << 24),
                            ("frac_bits", 0, 62)):
        value = scalars[name]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ModelFormatError(f"{what}: {name} must be an int in [{low}, {high}], got {value!r}")
    try:
        grid = FixedPointGrid.from_dict(header.get("grid"))
    except GridError as exc:
        raise ModelFormatError(f"{what}: {exc}") from None
    depth, n_classes = scalars["depth"], scalars["n_classes"]
    n_trees = len(arrays["tree_class"]) if arrays["tree_class"].ndim == 1 else -1
    nodes, leaves = 2**depth - 1, 2**depth
    expect = {"feature": ((n_trees, nodes), "i"), "threshold_index": ((n_trees, nodes), "i"),
              "default_left": ((n_trees, nodes), "i"), "is_padding": ((n_trees, nodes), "b"),
              "leaves": ((n_trees, leaves), "i"), "leaves_float": ((n_trees, leaves), "f"),
              "tree_class": ((n_trees,), "i"), "base": ((n_classes,), "i"), "base_float": ((n_classes,), "f")}
    for name, (shape, kind) in expect.items():
        a = arrays[name]
        if a.dtype.kind != kind or a.shape != shape:
            raise ModelFormatError(f"{what}: {name} has shape {a.shape} and dtype {a.dtype}, expected {shape} "
                                   f"of kind {kind!r}")
    feature, k = arrays["feature"], arrays["threshold_index"]
    if ((feature < 0) | (feature >= scalars["n_features"])).any():
        raise ModelFormatError(f"{what}: a node's feature is outside [0, {scalars['n_features']})")
    if ((k < 0) | (k > grid.size)).any():
        raise ModelFormatError(f"{what}: a threshold index is outside [0, {grid.size}] "
                               f"(the grid has 2^{grid.bits} cells)")
    if not np.isin(arrays["default_left"], (0, 1)).all():
        raise ModelFormatError(f"{what}: default_left must be 0 or 1")
    if ((arrays["tree_class"] < 0) | (arrays["tree_class"] >= n_classes)).any():
        raise ModelFormatError(f"{what}: a tree's class is out of range")
    if any(((a >= 1 << 62) | (a <= -(1 << 62))).any() for a in (arrays["leaves"], arrays["base"])):
        raise ModelFormatError(f"{what}: leaf values beyond 2^62")
    return PrivateForest(depth, n_classes, scalars["n_features"], scalars["frac_bits"], grid,
                         feature.astype(np.int64), k.astype(np.int64), arrays["default_left"].astype(np.int64),
                         arrays["is_padding"].astype(bool), arrays["leaves"].astype(np.int64),
                         arrays["leaves_float"].astype(np.float64), arrays["tree_class"].astype(np.int64),
                         arrays["base"].astype(np.int64), arrays["base_float"].astype(np.float64))
