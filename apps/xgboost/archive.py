"""Model files as npz archives read without pickle, sizes checked before anything is inflated."""
from __future__ import annotations

import io
import zipfile

import numpy as np

from fhe_core.errors import FHEError

from .encoding import ExportError


class ModelFormatError(ExportError, FHEError):
    """Serialized model bytes that are not a valid model (format, shapes, dtypes, ranges)."""


def read_archive(data: bytes | bytearray | memoryview, what: str, max_bytes: int) -> dict[str, np.ndarray]:
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
