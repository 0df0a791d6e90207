"""Reader for the IDX format of the MNIST files.

Layout: a big-endian int32 magic whose byte 2 names the element type (0x08 = uint8) and whose
byte 3 is the number of dimensions, then one big-endian int32 per dimension, then the payload
in row-major order.
"""
from __future__ import annotations

import struct
from typing import BinaryIO

import numpy as np

from .errors import DataFormatError

_UINT8 = 0x08


def read_idx(stream: BinaryIO, name: str = "IDX file") -> np.ndarray:
    """Read one uint8 IDX array from `stream`; `name` is used in error messages.

    Raises DataFormatError on a bad magic, a non-uint8 type, or a payload of the wrong size.
    """
    header = stream.read(4)
    if len(header) != 4 or header[0] != 0 or header[1] != 0:
        raise DataFormatError(f"{name}: not an IDX file (magic bytes {header!r})")
    if header[2] != _UINT8:
        raise DataFormatError(f"{name}: element type 0x{header[2]:02x} is not uint8 (0x08)")
    ndim = header[3]
    dims_raw = stream.read(4 * ndim)
    if len(dims_raw) != 4 * ndim:
        raise DataFormatError(f"{name}: truncated header")
    dims = struct.unpack(f">{ndim}i", dims_raw)
    payload = stream.read()
    expected = int(np.prod(dims, dtype=np.int64))
    if len(payload) != expected:
        raise DataFormatError(
            f"{name}: payload has {len(payload)} bytes, dimensions {dims} need {expected}"
        )
    return np.frombuffer(payload, dtype=np.uint8).reshape(dims)
