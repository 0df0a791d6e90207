"""Model files as npz archives: a JSON header (with the format name) beside the arrays, written
and read without pickle, sizes checked before anything is inflated."""
from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterable
from typing import Any

import numpy as np

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
    try:
        header = json.loads(arrays.pop("header").astype(np.uint8).tobytes())
    except (ValueError, UnicodeDecodeError):
        raise ModelFormatError(f"{what}: the header is not JSON") from None
    if not isinstance(header, dict) or header.get("format") != fmt:
        raise ModelFormatError(f"{what}: not a {fmt} archive")
    return header, arrays


def _read_arrays(data: bytes | bytearray | memoryview, what: str, max_bytes: int) -> dict[str, np.ndarray]:
    """The arrays of an npz archive; ModelFormatError for anything else, or for an archive whose
    compressed or inflated size exceeds ``max_bytes``."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ModelFormatError(f"{what}: expected bytes, got {type(data).__name__}")
    if len(data) > max_bytes:
        raise ModelFormatError(f"{what}: {len(data)} bytes exceed max_bytes={max_bytes}")
    try:
        with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
            inflated = sum(info.file_size for info in archive.infolist())
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise ModelFormatError(f"{what}: not an npz archive ({exc})") from None
    if inflated > max_bytes:
        raise ModelFormatError(f"{what}: the arrays take {inflated} bytes, over max_bytes={max_bytes}")
    try:
        with np.load(io.BytesIO(bytes(data)), allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (ValueError, OSError, EOFError, MemoryError, zipfile.BadZipFile) as exc:  # MemoryError: a lying .npy header
        raise ModelFormatError(f"{what}: not an npz archive ({exc})") from None
