"""HELR features: exact against a pixel-by-pixel reference, and the study's set sizes."""
import numpy as np
import pytest

from data.helr import helr_dataset, helr_features, select_digits


def reference_features(image: np.ndarray, bits: int, floor: bool) -> list:
    """Straightforward loops: quantise each pixel, average each 2x2 block."""
    out = []
    for r in range(0, 28, 2):
        for c in range(0, 28, 2):
            block = [int(image[r + i][c + j]) >> (8 - bits) for i in (0, 1) for j in (0, 1)]
            out.append(sum(block) // 4 if floor else sum(block) / 4)
    return out


@pytest.mark.parametrize("bits,pooling", [(3, "floor"), (3, "mean"), (8, "mean")])
def test_bit_exact_on_known_digits(full_mnist, bits, pooling):
    images = full_mnist.train_images[:25]
    features = helr_features(images, bits, pooling)
    expected = [reference_features(img, bits, pooling == "floor") for img in images]
    np.testing.assert_array_equal(features, np.array(expected))


def test_random_images_floor_values_in_range():
    images = np.random.default_rng(7).integers(0, 256, (50, 28, 28), dtype=np.uint8)
    features = helr_features(images)
    assert features.dtype == np.int64 and features.shape == (50, 196)
    np.testing.assert_array_equal(
        features, np.array([reference_features(img, 3, True) for img in images])
    )


def test_three_vs_eight_sizes(full_mnist):
    data = helr_dataset(full_mnist)
    assert data.x_train.shape == (11982, 196) and data.x_test.shape == (1984, 196)
    assert np.bincount(data.y_train).tolist() == [6131, 5851]
    assert np.bincount(data.y_test).tolist() == [1010, 974]
    assert data.x_train.min() == 0 and data.x_train.max() == 7 and data.levels == 8


def test_select_digits_keeps_order():
    labels = np.array([8, 1, 3, 3, 9, 8])
    images = np.arange(6)
    kept, y = select_digits(images, labels)
    assert kept.tolist() == [0, 2, 3, 5] and y.tolist() == [1, 0, 0, 1]
