"""RowMajorLayout (ml.packing) against direct numpy indexing."""
import numpy as np
import pytest

from fhe_core.errors import ParameterError
from ml.packing import ColumnMajorLayout, RowMajorLayout


def test_pack_puts_row_i_feature_f_at_slot_i_columns_plus_f():
    rng = np.random.default_rng(1)
    layout = RowMajorLayout(slots=64, columns=16)
    matrix = rng.normal(size=(9, 11))
    vectors = layout.pack(matrix)
    assert layout.rows == 4 and vectors.shape == (3, 64)          # ceil(9 / 4) ciphertexts
    for i in range(9):
        for f in range(16):
            expected = matrix[i, f] if f < 11 else 0.0
            assert vectors[i // 4, (i % 4) * 16 + f] == expected
    assert not vectors[2, 16:].any()                              # padding rows are zero
    np.testing.assert_array_equal(layout.unpack(vectors, 9, 11), matrix)


def test_pack_pads_to_a_requested_ciphertext_count_and_refuses_overflow():
    layout = RowMajorLayout(slots=32, columns=8)
    assert layout.pack(np.ones((3, 8)), 5).shape == (5, 32)
    with pytest.raises(ParameterError, match="do not fit"):
        layout.pack(np.ones((9, 8)), 2)
    with pytest.raises(ParameterError, match="matrix"):
        layout.pack(np.ones((2, 9)))


def test_replicated_vector_and_row_mean():
    layout = RowMajorLayout(slots=32, columns=8)
    w = np.arange(1.0, 6.0)
    slots = layout.replicated(w)
    np.testing.assert_array_equal(slots.reshape(4, 8)[:, :5], np.tile(w, (4, 1)))
    assert not slots.reshape(4, 8)[:, 5:].any()
    noisy = slots + np.tile([0.1, -0.1, 0.3, -0.3], 8).reshape(8, 4).T.reshape(32)  # rows' noise cancels
    np.testing.assert_allclose(layout.row_mean(noisy, 5), w, atol=1e-12)


def test_column_mask():
    layout = RowMajorLayout(slots=32, columns=8)
    mask = layout.column_mask(2, 0.5).reshape(4, 8)
    assert (mask[:, 2] == 0.5).all() and mask.sum() == 2.0
    with pytest.raises(ParameterError):
        layout.column_mask(8)


@pytest.mark.parametrize("slots, columns", [(48, 8), (32, 12), (8, 16), (0, 1), (True, 1)])
def test_bad_layouts_are_refused(slots, columns):
    with pytest.raises(ParameterError):
        RowMajorLayout(slots, columns)


def test_column_major_puts_feature_f_of_sample_i_at_slot_f_rows_plus_i():
    rng = np.random.default_rng(2)
    layout = ColumnMajorLayout(slots=64, columns=16)
    matrix = rng.normal(size=(9, 11))
    vectors = layout.pack(matrix)
    assert layout.rows == layout.feature_stride == 4 and vectors.shape == (3, 64)
    for i in range(9):
        for f in range(16):
            assert vectors[i // 4, f * 4 + i % 4] == (matrix[i, f] if f < 11 else 0.0)
    np.testing.assert_array_equal(layout.unpack(vectors, 9, 11), matrix)
    w = np.arange(1.0, 6.0)
    slots = layout.replicated(w)
    np.testing.assert_array_equal(layout.unpack(slots[None], 4, 5), np.tile(w, (4, 1)))
    np.testing.assert_array_equal(layout.row_mean(slots, 5), w)
    mask = layout.row_mask(1, 0.5)
    assert mask.sum() == 8.0 and (mask[1::4] == 0.5).all()
    with pytest.raises(ParameterError):
        layout.row_mask(4)
    with pytest.raises(ParameterError, match="ColumnMajorLayout: slots"):
        ColumnMajorLayout(48, 16)
    with pytest.raises(ParameterError, match="ColumnMajorLayout: 32 columns do not fit"):
        ColumnMajorLayout(16, 32)
