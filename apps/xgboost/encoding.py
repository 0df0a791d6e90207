"""Client-side feature encoding for encrypted tree inference: public bins, thermometer bits.

The server publishes, for every feature f, sorted cut points c_f1 < ... < c_fK (XGBoost's
quantile cuts of the training data: every split threshold of a `hist` model is one of them,
but the cuts do not say which ones the trees use). The client sends, per feature, the bits

    b_fk = 1  if  x_f < c_fk  else 0          (a thermometer code: 1...1 0...0 as k decreases)

plus one bit m_f = 1 when x_f is missing (NaN). A node with threshold c_fk then takes bit
b_fk, which the server selects with a plaintext index, so the client learns neither the
feature nor the threshold. Comparisons use float32, as XGBoost does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # xgboost is needed to train and export, not to evaluate
    import xgboost


class ExportError(ValueError):
    """A model (or threshold) that the HE-friendly representation cannot express."""


@dataclass(frozen=True)
class EncodedFeatures:
    """Thermometer bits `[n, total_bits]` and missing flags `[n, n_features]`, int64 0/1."""

    bits: np.ndarray
    missing: np.ndarray


@dataclass(frozen=True)
class PublicBinning:
    """Cut points of all features concatenated (`cuts` float32 `[total_bits]`); the cuts of
    feature f are `cuts[offsets[f]:offsets[f+1]]`, increasing."""

    cuts: np.ndarray
    offsets: np.ndarray

    @classmethod
    def from_dmatrix(cls, matrix: xgboost.DMatrix) -> PublicBinning:
        """XGBoost's quantile cuts of a training matrix (the bins the `hist` method splits on).

        Give a QuantileDMatrix (its cuts are computed from the data alone, before any model
        exists) or a DMatrix that a `hist` model was trained on.
        """
        indptr, values = matrix.get_quantile_cut()
        return cls.from_quantile_cut(indptr, values)

    @classmethod
    def from_quantile_cut(cls, indptr: np.ndarray, values: np.ndarray) -> PublicBinning:
        """The binning of ``DMatrix.get_quantile_cut()``'s output (indptr, values).

        XGBoost lists per feature the lower bound of its lowest bin, then the upper bound of every
        bin. Only the upper bounds are split thresholds; the lower bound lies below every training
        value (a finite number up to xgboost 3.2, -inf since 3.3), so no split tests it and it is
        dropped: its client bit would answer nothing a tree asks.
        """
        indptr, values = np.asarray(indptr, dtype=np.int64), np.asarray(values, dtype=np.float32)
        lowest = indptr[:-1][np.diff(indptr) > 0]  # a feature without values has no bins
        cuts = np.delete(values, lowest)
        offsets = indptr - np.searchsorted(lowest, indptr, side="left")
        if not np.isfinite(cuts).all():
            raise ExportError("XGBoost's quantile cuts hold a non-finite bin bound beyond each feature's lowest; "
                              "this layout of get_quantile_cut() is not supported")
        return cls(cuts, offsets)

    @property
    def n_features(self) -> int:
        return len(self.offsets) - 1

    @property
    def offsets_index_cuts(self) -> bool:
        """Whether offsets (1-D, at least one feature) run from 0 to len(cuts) without decreasing
        (the check of a binning read from bytes or JSON)."""
        cuts, offsets = self.cuts, self.offsets
        return (cuts.ndim == 1 and offsets.ndim == 1 and len(offsets) >= 2 and offsets[0] == 0
                and offsets[-1] == len(cuts) and not (np.diff(offsets) < 0).any())

    @property
    def bit_feature(self) -> np.ndarray:
        """Feature of each bit, `[total_bits]` int64."""
        return np.repeat(np.arange(self.n_features), np.diff(self.offsets))

    def bit_index(self, feature: int, threshold: float) -> int:
        """Index of the bit that encodes x_feature < threshold; ExportError if not a cut."""
        start, stop = self.offsets[feature], self.offsets[feature + 1]
        hits = np.flatnonzero(self.cuts[start:stop] == np.float32(threshold))
        if len(hits) != 1:
            raise ExportError(
                f"threshold {threshold!r} of feature {feature} is not one of its public cuts; "
                "train with tree_method='hist' on the matrix the binning came from"
            )
        return int(start + hits[0])

    def encode(self, x: np.ndarray) -> EncodedFeatures:
        """Encode `[n, n_features]` samples (NaN = missing) on the client."""
        x32 = np.asarray(x, dtype=np.float32)
        if x32.ndim != 2 or x32.shape[1] != self.n_features:
            raise ValueError(f"expected [n, {self.n_features}] features, got {x32.shape}")
        missing = np.isnan(x32)
        bits = x32[:, self.bit_feature] < self.cuts[None, :]  # NaN compares False: bit 0
        return EncodedFeatures(bits.astype(np.int64), missing.astype(np.int64))
