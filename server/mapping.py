"""Read-only memory maps of files, shared by the server (verifying uploads) and the client
(uploading a key file): the page cache backs them, so a multi-GB file is never copied into
the Python heap."""
from __future__ import annotations

import gc
import mmap
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def mapped(path: str | os.PathLike | Path) -> Iterator[memoryview]:
    """The file's bytes as a read-only memoryview for the duration of the block."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            yield memoryview(b"")
            return
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(m)
    try:
        yield view
    finally:
        gc.collect()  # numpy views of the map made while parsing must be gone before it closes
        try:
            view.release()
            m.close()
        except BufferError:
            pass  # an exception's traceback still holds views; the map closes when they are collected
