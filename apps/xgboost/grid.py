"""The public quantization grid of the model-private encoding: b-bit signed fixed point.

A grid is two integers, ``bits`` (b) and ``frac_bits`` (f): 2^b cells of width 2^-f covering
[lo, lo + 2^(b-f)) with lo = -2^(b-f-1). A value x falls in cell

    q(x) = clip(floor((x - lo) 2^f), 0, 2^b - 1)           (x beyond the range clips to the end cells)

and stands for the cell's centre v_q = lo + (q + 1/2) 2^-f (a float32 number: every v_q is dyadic).
Nothing of the grid comes from anyone's data: the model owner states (b, f) (e.g. b = 6, f = 2 for
SRBCT's log-ratios, 64 cells of 1/4 over [-8, 8)), the client computes q from its own values.

A threshold theta becomes the integer k(theta) = #{q : v_q < theta} (float32 comparisons, as
XGBoost's), so that for every cell  v_q < theta  <=>  q < k(theta): a forest whose thresholds are
rounded onto the grid this way computes on q exactly what XGBoost computes on the quantized
features v_{q(x)}. k is in [0, 2^b]; k = 0 sends every value right, k = 2^b every value left.

**Digits.** The encrypted comparison works on base-2^c digits of q (see ``private_plan``): q is
split into k digits of c_0 >= c_1 >= ... bits (most significant first, sum b). A missing value
(NaN) is the extra code 2^(c_0) of the top digit, its other digits 0.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from .encoding import ExportError

MAX_GRID_BITS = 16


class GridError(ExportError):
    """A grid that cannot be used (bits or fractional bits out of range), or bad input to it."""


@dataclass(frozen=True)
class FixedPointGrid:
    """``bits`` b in [1, 16] and ``frac_bits`` f: 2^b cells of width 2^-f centred on zero."""

    bits: int
    frac_bits: int

    def __post_init__(self) -> None:
        for name, value, low, high in (("bits", self.bits, 1, MAX_GRID_BITS), ("frac_bits", self.frac_bits, -32, 32)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise GridError(f"FixedPointGrid: {name} must be an int in [{low}, {high}], got {value!r}")

    @property
    def size(self) -> int:
        """2^b cells."""
        return 1 << self.bits

    @property
    def step(self) -> float:
        return 2.0 ** -self.frac_bits

    @property
    def low(self) -> float:
        return -(2.0 ** (self.bits - self.frac_bits - 1))

    @property
    def values(self) -> np.ndarray:
        """`[2^b]` float32 cell centres v_q (exact: dyadic numbers of at most b + 1 significant bits)."""
        return (self.low + (np.arange(self.size) + 0.5) * self.step).astype(np.float32)

    def index(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cells q `[n, F]` int64 (0 where missing) and missing flags `[n, F]` bool of samples `[n, F]`
        (NaN = missing; +-inf clip to the end cells)."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2:
            raise GridError(f"FixedPointGrid.index: expected samples [n, features], got shape {list(x.shape)}")
        missing = np.isnan(x)
        with np.errstate(invalid="ignore"):  # NaN (missing) and inf are handled below
            cells = np.floor((np.where(missing, 0.0, x) - self.low) * 2.0**self.frac_bits)
        return np.clip(cells, 0, self.size - 1).astype(np.int64), missing

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """The features XGBoost sees on the grid: v_{q(x)} float32, NaN kept `[n, F]`."""
        q, missing = self.index(x)
        return np.where(missing, np.float32(np.nan), self.values[q]).astype(np.float32)

    def threshold_index(self, thresholds: np.ndarray) -> np.ndarray:
        """k(theta) = #{q : v_q < theta} (int64, same shape); NaN thresholds (padding) give 0."""
        theta = np.asarray(thresholds, dtype=np.float32)
        return np.searchsorted(self.values, np.where(np.isnan(theta), -np.inf, theta), side="left").astype(np.int64)

    # ---- digits --------------------------------------------------------------------------------

    def digit_bits(self, count: int) -> tuple[int, ...]:
        """The widths c_0 >= c_1 >= ... of ``count`` digits of q, most significant first."""
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= self.bits:
            raise GridError(f"FixedPointGrid.digit_bits: count must be an int in [1, {self.bits}], got {count!r}")
        return tuple(self.bits // count + (i < self.bits % count) for i in range(count))

    def digits(self, q: np.ndarray, missing: np.ndarray, count: int) -> np.ndarray:
        """`[count, ...]` int64 digits of cells q (most significant first); a missing value is
        (2^c_0, 0, ..., 0)."""
        widths = self.digit_bits(count)
        q = np.asarray(q, dtype=np.int64)
        out, shift = [], self.bits
        for width in widths:
            shift -= width
            out.append((q >> shift) & ((1 << width) - 1))
        out[0] = np.where(missing, 1 << widths[0], out[0])
        for digit in out[1:]:
            digit[np.asarray(missing, dtype=bool)] = 0
        return np.stack(out)

    # ---- JSON ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, int]:
        return {"bits": self.bits, "frac_bits": self.frac_bits}

    @classmethod
    def from_dict(cls, data) -> FixedPointGrid:
        if not isinstance(data, dict) or set(data) != {"bits", "frac_bits"}:
            raise GridError(f"FixedPointGrid: expected {{bits, frac_bits}}, got {json.dumps(data)[:80]}")
        return cls(data["bits"], data["frac_bits"])
