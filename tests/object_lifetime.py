"""One check the engine, app and service tests share: an object is freed as soon as its last
reference goes, without the cycle collector (no reference cycle keeps it, nor what it holds: on a
GPU, graph pools and model plaintexts of several GB)."""
from __future__ import annotations

import gc
import weakref
from collections.abc import Callable


def assert_freed_when_dropped(build: Callable[[], object]) -> None:
    """``build()`` makes (and uses) an object that nothing else references; dropped, it must be
    freed at once with the cycle collector off. Fails if a reference cycle keeps it."""
    obj = build()
    ref = weakref.ref(obj)
    gc.disable()
    try:
        del obj
        assert ref() is None, "kept alive by a reference cycle (freed only by the cycle collector)"
    finally:
        gc.enable()
