"""The mini-batch schedule of HELR training, as data an encrypted run can replay.

The training rows are shuffled once with a seeded permutation and cut into blocks of
`batch_size` rows (the last block may be shorter: an encrypted run pads it with zero rows,
which add nothing to the gradient). Iteration t uses block `block_order[t]`: the blocks in
turn ("cycle"), or a fresh seeded order of all blocks in every epoch ("shuffle").
Save the schedule with `to_npz` and load it with `from_npz` rather than regenerating it, so a
replay does not depend on numpy's random streams staying the same across versions.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

BlockOrder = Literal["cycle", "shuffle"]


@dataclass(frozen=True)
class MiniBatchSchedule:
    """permutation `[n]` int64 (row order after the shuffle), block_order `[iterations]` int64."""

    permutation: np.ndarray
    batch_size: int
    block_order: np.ndarray

    @classmethod
    def build(
        cls, n_samples: int, batch_size: int, iterations: int, seed: int = 0,
        order: BlockOrder = "cycle",
    ) -> MiniBatchSchedule:
        """A seeded shuffle of `n_samples` rows and the block used at each iteration."""
        if batch_size < 1 or n_samples < 1 or iterations < 0:
            raise ValueError("need n_samples >= 1, batch_size >= 1 and iterations >= 0")
        rng = np.random.default_rng(seed)
        permutation = rng.permutation(n_samples)
        n_blocks = -(-n_samples // batch_size)
        epochs = -(-iterations // n_blocks) if iterations else 0
        if order == "cycle":
            sequence = np.tile(np.arange(n_blocks), epochs)
        elif order == "shuffle":
            sequence = np.concatenate([rng.permutation(n_blocks) for _ in range(epochs)] or [[]])
        else:
            raise ValueError(f"order must be 'cycle' or 'shuffle', got {order!r}")
        return cls(permutation, batch_size, sequence[:iterations].astype(np.int64))

    @property
    def n_blocks(self) -> int:
        return -(-len(self.permutation) // self.batch_size)

    @property
    def iterations(self) -> int:
        return len(self.block_order)

    def block_rows(self, block: int) -> np.ndarray:
        """Row indices (into the unshuffled training set) of block `block`."""
        start = block * self.batch_size
        return self.permutation[start : start + self.batch_size]

    def rows_at(self, iteration: int) -> np.ndarray:
        """Row indices of the mini-batch used at `iteration` (0-based)."""
        return self.block_rows(int(self.block_order[iteration]))

    def to_npz(self, path: str | Path) -> None:
        np.savez(path, permutation=self.permutation, batch_size=self.batch_size,
                 block_order=self.block_order)

    @classmethod
    def from_npz(cls, path: str | Path) -> MiniBatchSchedule:
        with np.load(path, allow_pickle=False) as f:
            return cls(f["permutation"], int(f["batch_size"]), f["block_order"])
