"""IDX reader: arrays written here byte by byte (struct) read back exactly; bad files refused."""
import io
import struct

import numpy as np
import pytest

from data.errors import DataFormatError
from data.idx import read_idx


def idx_bytes(array: np.ndarray, type_code: int = 0x08) -> bytes:
    header = bytes([0, 0, type_code, array.ndim]) + struct.pack(f">{array.ndim}i", *array.shape)
    return header + array.astype(np.uint8).tobytes()


@pytest.mark.parametrize("shape", [(7,), (5, 3, 4), (2, 28, 28)])
def test_roundtrip(shape):
    array = np.random.default_rng(1).integers(0, 256, size=shape, dtype=np.uint8)
    out = read_idx(io.BytesIO(idx_bytes(array)))
    assert out.dtype == np.uint8 and out.shape == shape
    np.testing.assert_array_equal(out, array)


def test_rejects_bad_magic_type_and_size():
    good = idx_bytes(np.zeros((2, 3), dtype=np.uint8))
    with pytest.raises(DataFormatError, match="not an IDX"):
        read_idx(io.BytesIO(b"\x01" + good[1:]))
    with pytest.raises(DataFormatError, match="not uint8"):
        read_idx(io.BytesIO(idx_bytes(np.zeros(3), type_code=0x0D)))
    with pytest.raises(DataFormatError, match="payload"):
        read_idx(io.BytesIO(good[:-1]))
