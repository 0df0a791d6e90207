"""Storage pieces on their own: streamed receipt of a body (limits, idle timeout, hash), the
content-addressed blob store (a blob goes with the last row naming it, after the commit) and
the LRU cache with load-once semantics."""
from __future__ import annotations

import asyncio
import hashlib
import threading
import time

import pytest

from server.blobs import BlobStore, receive_to_file
from server.db import Database
from server.errors import BadRequestError, HashMismatchError, PayloadTooLargeError, RequestTimeoutError
from server.keycache import LRUCache


async def chunks(*parts: bytes, pause: float = 0.0):
    for part in parts:
        if pause:
            await asyncio.sleep(pause)
        yield part


def receive(tmp_path, body, **kwargs):
    target = tmp_path / "out"
    return asyncio.run(receive_to_file(body, target, **kwargs)), target


def test_receive_hashes_and_writes_the_body(tmp_path):
    sha, target = receive(tmp_path, chunks(b"abc", b"def"), limit=10, expected_size=6,
                          expected_sha256=hashlib.sha256(b"abcdef").hexdigest())
    assert sha == hashlib.sha256(b"abcdef").hexdigest() and target.read_bytes() == b"abcdef"


def test_receive_a_body_larger_than_one_write_batch(tmp_path):
    from server.blobs import WRITE_BATCH

    parts = [bytes([i]) * (1 << 20) for i in range(WRITE_BATCH // (1 << 20) + 2)]
    whole = b"".join(parts)
    sha, target = receive(tmp_path, chunks(*parts), limit=len(whole), expected_size=len(whole))
    assert sha == hashlib.sha256(whole).hexdigest() and target.read_bytes() == whole


@pytest.mark.parametrize("body, kwargs, error", [
    (lambda: chunks(b"x" * 6, b"x" * 6), {"limit": 10}, PayloadTooLargeError),
    (lambda: chunks(b"x" * 6, b"x"), {"limit": 100, "expected_size": 6}, PayloadTooLargeError),
    (lambda: chunks(b"x" * 5), {"limit": 100, "expected_size": 6}, BadRequestError),
    (lambda: chunks(b"x" * 6), {"limit": 100, "expected_sha256": "0" * 64}, HashMismatchError),
    (lambda: chunks(b"x", b"y", pause=0.3), {"limit": 100, "idle_timeout": 0.05}, RequestTimeoutError),
])
def test_receive_refuses_and_leaves_no_file(tmp_path, body, kwargs, error):
    with pytest.raises(error):
        receive(tmp_path, body(), **kwargs)
    assert not (tmp_path / "out").exists()


def test_blob_store_deduplicates(tmp_path):
    store = BlobStore(tmp_path / "blobs", tmp_path / "tmp")
    first = store.put_bytes(b"payload")
    tmp = store.temp_path("x-")
    tmp.write_bytes(b"payload")
    assert store.adopt(tmp, first) == store.path(first) and not tmp.exists()
    assert store.read_bytes(first) == b"payload"
    assert [p.name for p in (tmp_path / "blobs").rglob("*") if p.is_file()] == [first]
    with pytest.raises(BadRequestError):
        store.path("../../etc/passwd")


def test_a_blob_goes_after_the_commit_that_removed_the_last_row_naming_it(tmp_path):
    db = Database(tmp_path / "server.sqlite3")
    store = BlobStore(tmp_path / "blobs", tmp_path / "tmp")
    sha = store.put_bytes(b"model bytes")
    db.execute("INSERT INTO models (name, kind, params_json, params_id, blob, public_json, created) "
               "VALUES ('m', 'xgboost', '{}', 'p', ?, '{}', 0)", (sha,))
    with db.transaction():
        store.release(db, sha)  # the model still names it
    assert store.exists(sha)
    with pytest.raises(RuntimeError, match="changed my mind"), db.transaction():
        db.execute("DELETE FROM models")
        store.release(db, sha)
        raise RuntimeError("changed my mind")
    assert store.exists(sha) and db.one("SELECT name FROM models")  # rolled back: the row and the file stay
    with db.transaction():
        db.execute("DELETE FROM models")
        store.release(db, sha)
        assert store.exists(sha)  # not before the commit
    assert not store.exists(sha)
    with pytest.raises(RuntimeError):
        db.on_commit(lambda: None)  # only inside a transaction
    db.close()


def test_lru_cache_loads_once_and_evicts_the_oldest():
    cache: LRUCache[int] = LRUCache(2)
    loads = []

    def slow_load(key: str, value: int):
        def load() -> int:
            loads.append(key)
            time.sleep(0.05)
            return value
        return load

    threads = [threading.Thread(target=cache.get, args=("a", slow_load("a", 1))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert loads == ["a"]  # four concurrent requests, one load
    cache.get("b", slow_load("b", 2))
    assert cache.get("a", slow_load("a", 9)) == 1  # a is now the most recent
    cache.get("c", slow_load("c", 3))  # evicts b
    assert "b" not in cache and "a" in cache and "c" in cache and len(cache) == 2
    with pytest.raises(ZeroDivisionError):  # a failed load stores nothing; the next get loads again
        cache.get("d", lambda: 1 // 0)
    assert "d" not in cache and cache.get("d", slow_load("d", 4)) == 4 and loads[-1] == "d"
    with pytest.raises(ValueError):
        LRUCache(0)


def test_a_full_database_or_disk_is_recognised_as_out_of_space(tmp_path):
    """What the service answers 507 for (server.errors.out_of_space): SQLite's own "database or disk is
    full" as SQLAlchemy raises it (a database capped at a few pages), ENOSPC; not other errors."""
    import errno

    import sqlalchemy

    from server.errors import out_of_space

    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'capped.db'}")
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA max_page_count = 8")
        conn.exec_driver_sql("CREATE TABLE t (x BLOB)")
        with pytest.raises(sqlalchemy.exc.OperationalError) as full:
            for _ in range(64):
                conn.exec_driver_sql("INSERT INTO t VALUES (?)", (b"\0" * 4096,))
    assert out_of_space(full.value)
    assert out_of_space(OSError(errno.ENOSPC, "No space left on device"))
    assert not out_of_space(OSError(errno.EIO, "Input/output error"))
    assert not out_of_space(RuntimeError("database or disk is full"))  # by kind, not by message
