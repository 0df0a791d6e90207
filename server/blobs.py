"""Content-addressed files: a blob is stored once under its SHA-256, whoever uploads it.

Every file is written to a temporary name in the same file system, then renamed into place, so
a blob path either holds the full verified content or does not exist (a kill -9 leaves at most a
stray temporary file, removed when the server next starts). A blob's bytes and an upload's parts
are fsynced before anything says they exist (see :mod:`server.uploads`, durability).
A blob goes when the last row naming it goes (:meth:`BlobStore.release`).
"""
from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio

from fhe_core.serialize.record import copy_bytes
from server.db import Database
from server.errors import BadRequestError, HashMismatchError, PayloadTooLargeError, RequestTimeoutError

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
WRITE_BATCH = 4 << 20  # bytes gathered before one hash-and-write in a worker thread
HASH_CHUNK = 16 << 20  # bytes hashed per read when a file is hashed from the disk (page cache)


def is_sha256(text: object) -> bool:
    return isinstance(text, str) and _SHA256.match(text) is not None


class BlobStore:
    """Files named by their SHA-256 under ``root/ab/abcdef...``; temporary files under ``tmp``."""

    def __init__(self, root: Path, tmp: Path):
        self.root, self.tmp = root, tmp
        root.mkdir(parents=True, exist_ok=True)
        tmp.mkdir(parents=True, exist_ok=True)

    def path(self, sha256: str) -> Path:
        if not is_sha256(sha256):
            raise BadRequestError(f"not a SHA-256 hex digest: {sha256!r}")
        return self.root / sha256[:2] / sha256

    def exists(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def temp_path(self, prefix: str) -> Path:
        fd, name = tempfile.mkstemp(dir=self.tmp, prefix=prefix, suffix=".tmp")
        os.close(fd)
        return Path(name)

    def adopt(self, tmp_file: Path, sha256: str) -> Path:
        """Move a verified temporary file into the store under ``sha256``; if that blob is
        already there (deduplication) the temporary file is dropped."""
        target = self.path(sha256)
        if target.is_file():
            tmp_file.unlink(missing_ok=True)
            return target
        move_into_place(tmp_file, target)
        return target

    def put_bytes(self, data: bytes) -> str:
        """Store ``data``; returns its SHA-256."""
        sha = hashlib.sha256(data).hexdigest()
        if self.exists(sha):
            return sha
        tmp = self.temp_path("put-")
        write_synced(tmp, data)
        self.adopt(tmp, sha)
        return sha

    def read_bytes(self, sha256: str) -> bytes:
        return self.path(sha256).read_bytes()

    def release(self, db: Database, sha256: str) -> None:
        """Call inside a write transaction of ``db`` that removed a row naming the blob: once it
        commits, the file goes if no row names it any more (see :mod:`server.db`)."""
        if not db.blob_is_named(sha256):
            db.on_commit(lambda: self.path(sha256).unlink(missing_ok=True))

    def clear_tmp(self) -> None:
        """Drop the unverified temporary files a previous run left behind (only the process that
        serves the data directory does, at start-up: another one's uploads may be in flight)."""
        for entry in self.tmp.iterdir():
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


async def receive_to_file(chunks: AsyncIterator[bytes], target: Path, *, limit: int,
                          expected_size: int | None = None, expected_sha256: str | None = None,
                          idle_timeout: float | None = None, what: str = "body") -> str:
    """Stream ``chunks`` into ``target`` (a new file) while hashing; holds at most
    ``WRITE_BATCH`` bytes of the body in memory. Returns the SHA-256. Raises
    PayloadTooLargeError past ``limit`` (or ``expected_size``), BadRequestError if shorter than
    ``expected_size``, HashMismatchError if the digest is not ``expected_sha256``,
    RequestTimeoutError when no chunk arrives for ``idle_timeout`` seconds; ``target`` is
    removed on any failure. Hashing, writing and the fsync run in a worker thread (hashlib and file
    writes release the GIL), so a multi-GB upload does not stall the event loop. On the disk when
    this returns: an acknowledged part survives a crash of the machine too (the fsync costs ~1 s of
    a 3.9 GB key set's ~18 s of part handling)."""
    digest, size, pending = hashlib.sha256(), 0, bytearray()
    cap = min(limit, expected_size) if expected_size is not None else limit
    try:
        with open(target, "wb") as f:

            def write(data: bytes | bytearray) -> None:
                digest.update(data)
                f.write(data)

            async for chunk in _idle_limited(chunks, idle_timeout, what):
                size += len(chunk)
                if size > cap:
                    raise PayloadTooLargeError(f"{what}: more than {cap} bytes"
                                               + (" (its declared size)" if cap == expected_size else ""))
                pending += chunk
                if len(pending) >= WRITE_BATCH:  # hand the batch over whole, start a new one (no copy)
                    batch, pending = pending, bytearray()
                    await anyio.to_thread.run_sync(write, batch)
            await anyio.to_thread.run_sync(write, pending)
            await anyio.to_thread.run_sync(_flush, f)
        if expected_size is not None and size != expected_size:
            raise BadRequestError(f"{what}: truncated, {size} of {expected_size} bytes received")
        sha = digest.hexdigest()
        if expected_sha256 is not None and sha != expected_sha256:
            raise HashMismatchError(f"{what}: SHA-256 {sha} does not match the declared {expected_sha256}")
        return sha
    except BaseException:
        target.unlink(missing_ok=True)
        raise


def join_files(parts: list[Path], target: Path) -> str:
    """Concatenate ``parts`` into the new file ``target`` and return the SHA-256 of the whole.
    The kernel copies the bytes (``serialize``'s :func:`copy_bytes`) while this thread hashes
    the parts, which the copy reads from the page cache too; ``target`` is not fsynced (see
    :func:`fsync_path`)."""
    digest = hashlib.sha256()

    def copy() -> None:
        with open(target, "wb") as out:
            at = 0
            for part in parts:
                with open(part, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    copy_bytes(f.fileno(), 0, out.fileno(), at, size)
                    at += size

    with ThreadPoolExecutor(max_workers=1) as pool:
        copied = pool.submit(copy)
        for part in parts:
            with open(part, "rb", buffering=0) as f:
                while chunk := f.read(HASH_CHUNK):
                    digest.update(chunk)
        copied.result()
    return digest.hexdigest()


def move_into_place(source: Path, target: Path) -> None:
    """Rename a written file to ``target`` (same file system; its folder is made if missing)
    and make the rename durable."""
    if not target.parent.is_dir():
        target.parent.mkdir(exist_ok=True)
        fsync_path(target.parent.parent)
    os.replace(source, target)
    fsync_path(target.parent)


def write_synced(path: Path, data: bytes | bytearray) -> None:
    """``data`` into a new file at ``path``, on the disk when this returns (written and fsynced)."""
    with open(path, "wb") as f:
        f.write(data)
        _flush(f)


def _flush(f) -> None:
    f.flush()
    os.fsync(f.fileno())


async def _idle_limited(chunks: AsyncIterator[bytes], seconds: float | None, what: str) -> AsyncIterator[bytes]:
    iterator = chunks.__aiter__()
    while True:
        try:
            chunk = await asyncio.wait_for(iterator.__anext__(), seconds)
        except StopAsyncIteration:
            return
        except asyncio.TimeoutError:
            raise RequestTimeoutError(f"{what}: no data for {seconds} s") from None
        yield chunk


def fsync_path(path: Path) -> None:
    """fsync a file (written without syncs: once, before a row names it) or a folder (its entries)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
