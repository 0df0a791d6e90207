"""Evaluation key sets loaded on the device, least recently used first out.

Keyed by the blob's SHA-256 (the content), so two tenants who uploaded the same bytes share one
loaded copy, and a key set is read from disk and moved to the device once, not per request.
Loading happens outside the cache lock (a multi-GB set takes seconds) but once per key: a
second thread asking for the same blob waits for the first one's load.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")


class LRUCache(Generic[V]):
    """A thread-safe LRU map of at most ``capacity`` entries with load-once semantics."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self._items: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}
        self.hits = self.misses = 0

    def get(self, key: str, load: Callable[[], V]) -> V:
        """The cached value of ``key``, or ``load()`` stored under it (evicting the oldest)."""
        with self._lock:
            if key in self._items:
                return self._hit(key)
            key_lock = self._loading.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:  # another thread may have loaded it while we waited
                if key in self._items:
                    return self._hit(key)
            try:
                value = load()
            except BaseException:
                with self._lock:
                    self._loading.pop(key, None)
                raise
            with self._lock:  # stored in the same turn as the loading lock is dropped: no second load
                self._loading.pop(key, None)
                self.misses += 1
                self._store(key, value)
            return value

    def put(self, key: str, value: V) -> None:
        with self._lock:
            self._store(key, value)

    def _hit(self, key: str) -> V:
        """Under the lock: ``key``'s value, now the most recently used."""
        self._items.move_to_end(key)
        self.hits += 1
        return self._items[key]

    def _store(self, key: str, value: V) -> None:
        """Under the lock: insert as the most recently used, evict past the capacity."""
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def discard(self, key: str) -> None:
        with self._lock:
            self._items.pop(key, None)

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
