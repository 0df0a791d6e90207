"""Model files as npz archives: a JSON header (with the format name) beside the arrays, written
and read without pickle, sizes checked before anything is inflated."""
from __future__ import annotations

import io
import json
import math
import zipfile
from collections.abc import Iterable
from typing import Any

import numpy as np

from fhe_core import jsontext
from fhe_core.errors import FHEError

from .encoding import ExportError


class ModelFormatError(ExportError, FHEError):
    """Serialized model bytes that are not a valid model (format, shapes, dtypes, ranges)."""


def write_archive(header: dict[str, Any], arrays: dict[str, np.ndarray]) -> bytes:
    """An npz archive of ``arrays`` and the JSON ``header`` (which names the format)."""
    buffer = io.BytesIO()
    np.savez(buffer, header=np.frombuffer(json.dumps(header, sort_keys=True).encode(), dtype=np.uint8), **arrays)
    return buffer.getvalue()


def read_archive(data: bytes | bytearray | memoryview, what: str, max_bytes: int, fmt: str,
                 names: Iterable[str]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(header, arrays) of an archive of format ``fmt`` holding exactly the arrays ``names``;
    ModelFormatError for anything else."""
    arrays = _read_arrays(data, what, max_bytes)
    expected = set(names) | {"header"}
    if set(arrays) != expected:
        raise ModelFormatError(f"{what}: expected the arrays {sorted(expected)}, got {sorted(arrays)}")
    raw = arrays.pop("header")
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise ModelFormatError(f"{what}: the header must be 1-D uint8 (JSON text), got {raw.dtype} {raw.shape}")
    try:
        header = jsontext.loads(raw.tobytes())
    except ValueError:  # UnicodeDecodeError is one
        raise ModelFormatError(f"{what}: the header is not JSON") from None
    if not isinstance(header, dict) or header.get("format") != fmt:
        raise ModelFormatError(f"{what}: not a {fmt} archive")
    return header, arrays


def _read_arrays(data: bytes | bytearray | memoryview, what: str, max_bytes: int) -> dict[str, np.ndarray]:
    """The arrays of an npz archive; ModelFormatError for anything else, or for an archive whose
    compressed or inflated size exceeds ``max_bytes``. Each member is read whole (its bytes are
    present in the input, or inflated from it) before its ``.npy`` header is believed: a header
    that declares more elements than the member holds is refused, never allocated."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ModelFormatError(f"{what}: expected bytes, got {type(data).__name__}")
    if len(data) > max_bytes:
        raise ModelFormatError(f"{what}: {len(data)} bytes exceed max_bytes={max_bytes}")
    try:
        with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
            members = archive.infolist()
            inflated = sum(info.file_size for info in members)
            if inflated > max_bytes:
                raise ModelFormatError(f"{what}: the arrays take {inflated} bytes, over max_bytes={max_bytes}")
            arrays = dict(_read_member(archive, info, what) for info in members)
    except ModelFormatError:
        raise
    # NotImplementedError: a compression method or zip feature zipfile lacks; RuntimeError: encrypted
    except (ValueError, OSError, EOFError, NotImplementedError, RuntimeError, zipfile.BadZipFile) as exc:
        raise ModelFormatError(f"{what}: not an npz archive ({exc})") from None
    if len(arrays) != len(members):
        raise ModelFormatError(f"{what}: an array name appears twice")
    return arrays


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, what: str) -> tuple[str, np.ndarray]:
    """(name, array) of one ``<name>.npy`` member (format 1.0 or 2.0, no object dtype)."""
    if not info.filename.endswith(".npy"):
        raise ModelFormatError(f"{what}: member {info.filename!r} is not an .npy array")
    stream = io.BytesIO(archive.read(info))
    version = np.lib.format.read_magic(stream)
    if version not in ((1, 0), (2, 0)):
        raise ModelFormatError(f"{what}: member {info.filename!r} has .npy format {version}, not 1.0 or 2.0")
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran_order, dtype = read_header(stream)
    if dtype.hasobject or dtype.itemsize == 0:
        raise ModelFormatError(f"{what}: member {info.filename!r} has the dtype {dtype}, which cannot be read")
    count = math.prod(shape)
    body = stream.getbuffer()[stream.tell():]
    if len(body) != count * dtype.itemsize:
        raise ModelFormatError(f"{what}: member {info.filename!r} declares {list(shape)} {dtype} "
                               f"({count * dtype.itemsize} bytes) but holds {len(body)} bytes")
    array = np.frombuffer(body, dtype=dtype, count=count).reshape(shape, order="F" if fortran_order else "C")
    return info.filename[:-len(".npy")], array.copy(order="K")
