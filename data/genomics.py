"""Tumour-type gene expression: Khan 2001 SRBCT and NCI60, as shipped by the `islp` package.

The files are read from, in this order of preference:

* a path the user gives: a directory holding the files (plain or `.gz`), or an islp wheel
  (`pip download --no-deps islp==0.6.0` saves one; it is read as a zip, never installed);
* the installed `islp` distribution (`pip install islp`), found without importing it.

SRBCT: 4 classes (codes 1..4 = BL, EWS, NB, RMS), 63 train / 20 test samples x 2,308 genes.
NCI60: 64 cell lines x 6,830 genes with 14 labels (no train/test split).
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np

from ._files import DirectorySource, ZipSource, installed_file
from .errors import DataFormatError, DataNotFoundError

KHAN_CLASSES = ("BL", "EWS", "NB", "RMS")
KHAN_GENES = 2308
NCI60_SHAPE = (64, 6830)
ISLP_DATA = "ISLP/data/"
_HINT = (
    "install the islp package (`pip install islp`), or pass a directory with the files, or "
    "the wheel saved by `pip download --no-deps islp==0.6.0`"
)


class _Source(Protocol):
    def open(self, name: str) -> BinaryIO: ...


@dataclass(frozen=True)
class Expression:
    """Expression matrices `[n, genes] float64` with integer class ids 0..k-1."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: tuple[str, ...]
    source: str


def islp_source(path: str | Path | None = None) -> DirectorySource | ZipSource:
    """Where the islp data files are: `path` (directory or wheel) or the installed package."""
    if path is None:
        marker = installed_file("islp", f"{ISLP_DATA}Khan_ytrain.csv", _HINT)
        return DirectorySource(marker.parent)
    path = Path(path)
    if path.is_dir():
        return DirectorySource(path)
    if path.is_file() and path.suffix in (".whl", ".zip"):
        return ZipSource(path, ISLP_DATA)
    raise DataNotFoundError(f"{path} is neither a directory nor a wheel; {_HINT}")


def load_khan(path: str | Path | None = None) -> Expression:
    """SRBCT (Khan et al. 2001) with its fixed split; class ids 0..3 = BL, EWS, NB, RMS."""
    source = islp_source(path)
    parts = {}
    for split in ("train", "test"):
        parts[f"x_{split}"] = _read_csv(source, f"Khan_x{split}.csv")
        parts[f"y_{split}"] = _read_csv(source, f"Khan_y{split}.csv").astype(np.int64) - 1
    for split in ("train", "test"):
        x, y = parts[f"x_{split}"], parts[f"y_{split}"]
        if x.shape != (len(y), KHAN_GENES) or y.min() < 0 or y.max() >= len(KHAN_CLASSES):
            raise DataFormatError(f"{source}: Khan {split} data has shape {x.shape}, labels {y}")
    return Expression(**parts, classes=KHAN_CLASSES, source=str(source))


def load_nci60(path: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """NCI60: expression `[64, 6830] float64` and the label of each cell line (str)."""
    source = islp_source(path)
    with source.open("NCI60data.npy") as stream:
        x = np.load(io.BytesIO(stream.read()), allow_pickle=False)
    with source.open("NCI60labs.csv") as stream:
        lines = stream.read().decode("utf-8").splitlines()
    labels = np.array([line.strip().strip('"') for line in lines[1:] if line.strip()])
    if x.shape != NCI60_SHAPE or labels.shape != (NCI60_SHAPE[0],):
        raise DataFormatError(f"{source}: NCI60 shapes {x.shape} / {labels.shape}")
    return x.astype(np.float64), labels


def _read_csv(source: _Source, name: str) -> np.ndarray:
    """A numeric CSV with one header row, as float64 (a single column comes back 1-D)."""
    with source.open(name) as stream:
        table = np.loadtxt(stream, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
    return table[:, 0] if table.shape[1] == 1 else table
