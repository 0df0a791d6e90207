"""The iDASH 2020 encrypted-XGBoost reference workload (Magara et al., Sabanci University).

A model of 11 classes x 128 depth-2 trees (1,408 trees) whose node thresholds are one bit
`y` each, plus 99 test samples encoded per tree node as two bits `x0` (the node's feature is
in its low state) and `x2` (in its high state). Files, plain or `.gz`, in one directory:
`encodedTree_BFV.txt` (1,408 x 7 integers: y_root y_left y_right L1..L4, leaves scaled by
10^4 and truncated), `encodedTree.txt` (the same model with float leaves, JSON),
`demoTestData_x0.txt`, `demoTestData_x2.txt` (99 lines x 1,408*3 bits), `labels.txt`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._files import DirectorySource
from .errors import DataFormatError, DataNotFoundError

N_CLASSES, TREES_PER_CLASS, N_SAMPLES = 11, 128, 99
N_TREES = N_CLASSES * TREES_PER_CLASS
CLASS_NAMES = (
    "Bronchus&lung", "Bladder", "Colon", "Skin", "Stomach", "Corpus uteri", "Liver", "Ovary",
    "Kidney", "Cervix uteri", "Breast",
)


@dataclass(frozen=True)
class IdashWorkload:
    """The encoded model and samples; trees of class c are rows c*128 .. c*128+127.

    thresholds `[1408, 3]` int64 (y of root, left, right); leaves `[1408, 4]` int64 (x10^4);
    leaves_float `[1408, 4]` float64; x0, x2 `[99, 1408, 3]` int64; labels `[99]` int64.
    """

    thresholds: np.ndarray
    leaves: np.ndarray
    leaves_float: np.ndarray
    x0: np.ndarray
    x2: np.ndarray
    labels: np.ndarray


def load_idash(path: str | Path) -> IdashWorkload:
    """Read the workload from a directory (e.g. shared/data/idash2020_sabanci_xgb)."""
    root = Path(path)
    if not root.is_dir():
        raise DataNotFoundError(
            f"iDASH workload directory {root} does not exist; give the directory that holds "
            "encodedTree_BFV.txt[.gz], demoTestData_x0/x2.txt[.gz] and labels.txt"
        )
    source = DirectorySource(root)
    model = _ints(source, "encodedTree_BFV.txt").reshape(-1, 7)
    with source.open("encodedTree.txt") as stream:
        floats = np.asarray(json.loads(stream.read()), dtype=np.float64)
    workload = IdashWorkload(
        thresholds=model[:, :3],
        leaves=model[:, 3:],
        leaves_float=floats[:, 3:] if floats.ndim == 2 else floats,
        x0=_ints(source, "demoTestData_x0.txt").reshape(-1, N_TREES, 3),
        x2=_ints(source, "demoTestData_x2.txt").reshape(-1, N_TREES, 3),
        labels=_ints(source, "labels.txt"),
    )
    _check(workload, root)
    return workload


def _ints(source: DirectorySource, name: str) -> np.ndarray:
    with source.open(name) as stream:
        return np.array(stream.read().split(), dtype=np.int64)


def _check(w: IdashWorkload, root: Path) -> None:
    shapes = {
        "thresholds": (w.thresholds.shape, (N_TREES, 3)),
        "leaves": (w.leaves.shape, (N_TREES, 4)),
        "leaves_float": (w.leaves_float.shape, (N_TREES, 4)),
        "x0": (w.x0.shape, (N_SAMPLES, N_TREES, 3)),
        "x2": (w.x2.shape, (N_SAMPLES, N_TREES, 3)),
        "labels": (w.labels.shape, (N_SAMPLES,)),
    }
    for name, (got, want) in shapes.items():
        if got != want:
            raise DataFormatError(f"{root}: {name} has shape {got}, expected {want}")
    for name, bits in (("thresholds", w.thresholds), ("x0", w.x0), ("x2", w.x2)):
        if not np.isin(bits, (0, 1)).all():
            raise DataFormatError(f"{root}: {name} holds values other than 0 and 1")
