"""Slot layouts of a samples x features matrix in CKKS ciphertexts (plaintext side).

Two layouts of ``rows`` samples x ``columns`` (zero-padded, a power of two) features per
ciphertext of n = rows x columns slots:

* :class:`ColumnMajorLayout` (feature-major): feature f of sample i at slot f * rows + i. A
  rotate-and-sum over the features (steps rows * 2^k) is cyclic over all n slots, so it leaves
  each sample's inner product in *every* one of its slots, with no mask and no replicate; the
  sum over the samples (steps 2^k) leaves it in sample 0 of each feature: one mask and one
  replicate per batch (not per ciphertext) put it back in every sample. Encrypted HELR uses it.
* :class:`RowMajorLayout` (sample-major, the HELR paper's): the converse; described below.

:class:`RowMajorLayout` is HELR's layout (Han et al., AAAI 2019): a ciphertext of n slots holds
``rows = n / columns`` consecutive samples, sample i of the ciphertext in slots
[i * columns, (i + 1) * columns), feature f at slot i * columns + f; features are zero-padded to
``columns`` (a power of two, e.g. 197 -> 256) and samples to a whole number of ciphertexts.
Two facts make the layout cheap (see :mod:`ml.rotsum`):

* a rotate-and-sum over the ``columns`` slots of a row puts the row's sum in its column 0 (the
  other columns hold partial sums: mask them), and a replicate spreads column 0 over the row;
* a rotate-and-sum over the ``rows`` rows (steps that are multiples of ``columns``) is cyclic over
  all n slots, so it leaves the sum of all rows in *every* row: a vector of ``columns`` values
  comes out replicated once per row, ready to be multiplied with the next batch.

Everything here is numpy: it builds the slot vectors a client encrypts or a server encodes as
plaintext masks, and reads decrypted slot vectors back.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fhe_core.errors import ParameterError


def _power_of_two(owner: str, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1 or value & (value - 1):
        raise ParameterError(f"{owner}: {name} must be a positive power of two, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class _SlotGrid:
    """What both layouts share: ``rows = slots / columns`` samples of ``columns`` (padded)
    features per ciphertext, checked once at construction."""

    slots: int
    columns: int

    def __post_init__(self) -> None:
        owner = type(self).__name__
        _power_of_two(owner, "slots", self.slots)
        _power_of_two(owner, "columns", self.columns)
        if self.columns > self.slots:
            raise ParameterError(f"{owner}: {self.columns} columns do not fit in {self.slots} slots")

    @property
    def rows(self) -> int:
        """Samples per ciphertext: slots / columns."""
        return self.slots // self.columns

    def ciphertexts_for(self, samples: int) -> int:
        """Ciphertexts that hold ``samples`` rows: ceil(samples / rows)."""
        return -(-samples // self.rows)

    def _padded(self, matrix: np.ndarray, ciphertexts: int | None) -> np.ndarray:
        """``[m, d]`` (d <= columns) -> ``[ciphertexts, rows, columns]`` float64, zero-padded."""
        matrix = np.asarray(matrix, dtype=np.float64)
        if matrix.ndim != 2 or matrix.shape[1] > self.columns:
            raise ParameterError(f"pack: expected a [samples, <= {self.columns}] matrix, got shape {matrix.shape}")
        count = self.ciphertexts_for(len(matrix)) if ciphertexts is None else ciphertexts
        if count * self.rows < len(matrix):
            raise ParameterError(f"pack: {len(matrix)} rows do not fit in {count} ciphertexts of {self.rows} rows")
        out = np.zeros((count * self.rows, self.columns))
        out[: len(matrix), : matrix.shape[1]] = matrix
        return out.reshape(count, self.rows, self.columns)


@dataclass(frozen=True)
class RowMajorLayout(_SlotGrid):
    """``rows`` samples of ``columns`` (padded) features per ciphertext of ``slots`` slots."""

    def pack(self, matrix: np.ndarray, ciphertexts: int | None = None) -> np.ndarray:
        """``[m, d]`` (d <= columns) -> ``[ciphertexts, slots]`` float64 slot vectors, zero-padded
        (default ``ciphertexts_for(m)``; more pads with zero ciphertexts)."""
        return self._padded(matrix, ciphertexts).reshape(-1, self.slots)

    def unpack(self, vectors: np.ndarray, samples: int, features: int) -> np.ndarray:
        """Inverse of :meth:`pack`: ``[c, slots]`` -> the first ``[samples, features]`` entries."""
        grid = np.asarray(vectors).reshape(-1, self.columns)
        return grid[:samples, :features]

    def replicated(self, vector: np.ndarray) -> np.ndarray:
        """A ``[<= columns]`` vector repeated in every row: ``[slots]`` (how w and v are kept)."""
        return self.pack(np.tile(np.asarray(vector, dtype=np.float64), (self.rows, 1)), 1)[0]

    def row_mean(self, slots: np.ndarray, features: int) -> np.ndarray:
        """The ``[features]`` vector read back from a replicated slot vector (mean over its rows,
        which averages the independent errors of the copies)."""
        return np.asarray(slots).reshape(self.rows, self.columns)[:, :features].mean(axis=0)

    def column_mask(self, column: int = 0, value: float = 1.0) -> np.ndarray:
        """``[slots]``: ``value`` at ``column`` of every row, 0 elsewhere (masked extraction)."""
        if not 0 <= column < self.columns:
            raise ParameterError(f"column_mask: column must be in [0, {self.columns}), got {column}")
        mask = np.zeros((self.rows, self.columns))
        mask[:, column] = value
        return mask.reshape(self.slots)

    def row_stride(self) -> int:
        """The rotation step from one row to the next: ``columns``."""
        return self.columns


@dataclass(frozen=True)
class ColumnMajorLayout(_SlotGrid):
    """``rows`` samples of ``columns`` (padded) features per ciphertext of ``slots`` slots,
    feature f of sample i at slot ``f * rows + i`` (module docstring)."""

    @property
    def feature_stride(self) -> int:
        """The rotation step from one feature to the next: ``rows``."""
        return self.rows

    def pack(self, matrix: np.ndarray, ciphertexts: int | None = None) -> np.ndarray:
        """``[m, d]`` (d <= columns) -> ``[ciphertexts, slots]`` float64, zero-padded."""
        return self._padded(matrix, ciphertexts).transpose(0, 2, 1).reshape(-1, self.slots)

    def unpack(self, vectors: np.ndarray, samples: int, features: int) -> np.ndarray:
        """Inverse of :meth:`pack`: ``[c, slots]`` -> the first ``[samples, features]`` entries."""
        grid = np.asarray(vectors).reshape(-1, self.columns, self.rows).transpose(0, 2, 1)
        return grid.reshape(-1, self.columns)[:samples, :features]

    def replicated(self, vector: np.ndarray) -> np.ndarray:
        """A ``[<= columns]`` vector repeated for every sample: ``[slots]``."""
        padded = np.zeros(self.columns)
        padded[: len(vector)] = vector
        return np.repeat(padded, self.rows)

    def row_mean(self, slots: np.ndarray, features: int) -> np.ndarray:
        """The ``[features]`` vector read back from a replicated slot vector (mean over the
        samples' copies)."""
        return np.asarray(slots).reshape(self.columns, self.rows)[:features].mean(axis=1)

    def row_mask(self, row: int = 0, value: float = 1.0) -> np.ndarray:
        """``[slots]``: ``value`` at sample ``row`` of every feature, 0 elsewhere."""
        if not 0 <= row < self.rows:
            raise ParameterError(f"row_mask: row must be in [0, {self.rows}), got {row}")
        mask = np.zeros((self.columns, self.rows))
        mask[:, row] = value
        return mask.reshape(self.slots)
