"""MNIST 3-vs-8 features as in the HELR study (Han et al., AAAI 2019).

Each 28x28 image is quantised to 3 bits (pixel >> 5, values 0..7) and pooled over 2x2 blocks
to 14x14 = 196 features: the floor of the block mean by default, so the features stay
integers in 0..7 (an encrypted pipeline can work with them exactly), or the plain mean as an
option. Label 1 is digit 8, label 0 digit 3. Full MNIST gives 11,982 train / 1,984 test rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from .mnist import Mnist

Pooling = Literal["floor", "mean"]
NEGATIVE_DIGIT, POSITIVE_DIGIT = 3, 8


@dataclass(frozen=True)
class HelrData:
    """HELR features `[n, 196]` (int64 for floor pooling, float64 for mean) and 0/1 labels.

    `levels` is the number of quantisation levels (2**bits): features lie in [0, levels).
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    levels: int


def quantize(images: np.ndarray, bits: int = 3) -> np.ndarray:
    """Keep the top `bits` bits of each uint8 pixel: pixel >> (8 - bits), as int64."""
    if not 1 <= bits <= 8:
        raise ValueError(f"bits must be in 1..8, got {bits}")
    return np.asarray(images, dtype=np.int64) >> (8 - bits)


def pool_2x2(images: np.ndarray, pooling: Pooling = "floor") -> np.ndarray:
    """Mean over 2x2 blocks: `[n, 28, 28]` -> `[n, 196]`; "floor" rounds it down (integers)."""
    n, h, w = images.shape
    sums = images.reshape(n, h // 2, 2, w // 2, 2).sum(axis=(2, 4)).reshape(n, -1)
    if pooling == "floor":
        return sums // 4
    if pooling == "mean":
        return sums / 4.0
    raise ValueError(f"pooling must be 'floor' or 'mean', got {pooling!r}")


def select_digits(
    images: np.ndarray, labels: np.ndarray, negative: int = NEGATIVE_DIGIT,
    positive: int = POSITIVE_DIGIT,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose label is `negative` or `positive` (order kept) and 0/1 labels (1 = positive)."""
    keep = (labels == negative) | (labels == positive)
    return images[keep], (labels[keep] == positive).astype(np.int64)


def helr_features(images: np.ndarray, bits: int = 3, pooling: Pooling = "floor") -> np.ndarray:
    """Quantise then pool: `[n, 28, 28] uint8` -> `[n, 196]` values in [0, 2**bits)."""
    return pool_2x2(quantize(images, bits), pooling)


def helr_dataset(mnist: Mnist, bits: int = 3, pooling: Pooling = "floor") -> HelrData:
    """The 3-vs-8 train and test sets of `mnist` as HELR features."""
    x_tr, y_tr = select_digits(mnist.train_images, mnist.train_labels)
    x_te, y_te = select_digits(mnist.test_images, mnist.test_labels)
    return HelrData(
        x_train=helr_features(x_tr, bits, pooling), y_train=y_tr,
        x_test=helr_features(x_te, bits, pooling), y_test=y_te, levels=2**bits,
    )
