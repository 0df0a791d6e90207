"""The service's metadata in one SQLite file (embedded, no server): tenants, tokens, uploads
(key sets and datasets), models and jobs. Bulk data (keys, ciphertexts, checkpoints) lives in
files beside it (:mod:`server.blobs`); rows only name them.

One connection shared by the request threads and the worker, serialised by a lock (SQLite
allows one writer at a time anyway); WAL journal with ``synchronous=FULL``, so a committed row
survives a kill -9 or a power cut.

A blob file is removed only when no row names it (:meth:`Database.blob_is_named`), inside the
write transaction that removed the last such row and after its commit, before the lock is
released (:meth:`Database.on_commit`): no other request can start using the blob in between.
A server database (PostgreSQL) needs the same exclusion from a row lock or SERIALIZABLE
transactions; the statements themselves are plain SQL.
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS tenants (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    is_admin INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
    token_hash TEXT PRIMARY KEY,            -- sha256 of the token; the token itself is never stored
    tenant_id INTEGER NOT NULL REFERENCES tenants(id),
    created REAL NOT NULL,
    expires REAL                            -- refused from then on; NULL: never
);
CREATE TABLE IF NOT EXISTS uploads (        -- key sets (kind 'keyset') and datasets (kind 'dataset')
    id TEXT PRIMARY KEY,
    tenant_id INTEGER NOT NULL REFERENCES tenants(id),
    kind TEXT NOT NULL,
    params_json TEXT NOT NULL,              -- the ParamsLiteral, canonical JSON
    params_id TEXT NOT NULL,
    parts_json TEXT NOT NULL,               -- [{"sha256": ..., "size": ...}, ...]
    sha256 TEXT NOT NULL,                   -- of the whole, declared at creation; names its blob
    size INTEGER NOT NULL,
    state TEXT NOT NULL,                    -- 'uploading' -> 'completing' -> 'ready' (server.uploads)
    info_json TEXT,                         -- what verification found (Galois elements, counts)
    created REAL NOT NULL,
    completed REAL
);
CREATE TABLE IF NOT EXISTS models (
    name TEXT PRIMARY KEY,
    kind TEXT NOT NULL,                     -- 'xgboost'
    params_json TEXT NOT NULL,
    params_id TEXT NOT NULL,
    blob TEXT NOT NULL,                     -- sha256 of the model file in the blob store
    public_json TEXT NOT NULL,              -- what a client needs to encrypt for it
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    tenant_id INTEGER NOT NULL REFERENCES tenants(id),
    kind TEXT NOT NULL,                     -- 'helr'
    state TEXT NOT NULL,                    -- queued | running | succeeded | failed | cancelled
    config_json TEXT NOT NULL,
    keyset_id TEXT NOT NULL,
    dataset_id TEXT NOT NULL,
    iterations INTEGER NOT NULL,
    iteration INTEGER NOT NULL DEFAULT 0,   -- iterations done (and checkpointed)
    seconds_per_iteration REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    result_blob TEXT,
    created REAL NOT NULL,
    started REAL,
    finished REAL
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, created);
"""


class Database:
    """A thread-safe wrapper around one SQLite connection.

    ``query`` returns rows as dicts; ``execute`` runs one statement in its own transaction;
    ``transaction()`` groups several (``BEGIN IMMEDIATE``: the write lock is taken up front),
    and ``on_commit`` queues work for after its commit, still under the lock.
    """

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30.0)
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        self._after_commit: list[Callable[[], None]] | None = None  # inside a transaction: what on_commit queued
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.executescript(SCHEMA)
            token_columns = {row["name"] for row in self._conn.execute("PRAGMA table_info(tokens)")}
            if "expires" not in token_columns:  # a database from before token expiry
                self._conn.execute("ALTER TABLE tokens ADD COLUMN expires REAL")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(row) for row in self._conn.execute(sql, args).fetchall()]

    def one(self, sql: str, args: tuple[Any, ...] = ()) -> dict[str, Any] | None:
        rows = self.query(sql, args)
        return rows[0] if rows else None

    def execute(self, sql: str, args: tuple[Any, ...] = ()) -> int:
        """Run one statement; returns the number of rows it changed."""
        with self._lock:
            return self._conn.execute(sql, args).rowcount

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            self._after_commit = []
            try:
                yield self._conn
            except BaseException:
                self._after_commit = None
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            actions, self._after_commit = self._after_commit, None
            for action in actions:
                action()

    def on_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` once the current transaction has committed, before the lock is released
        (nothing else reads or writes in between); dropped if it rolls back."""
        with self._lock:  # another thread's transaction holds it: wait, then find none open
            if self._after_commit is None:
                raise RuntimeError("on_commit outside a transaction")
            self._after_commit.append(action)

    def blob_is_named(self, sha256: str) -> bool:
        """Whether any row names the blob: an upload in any state (it uses the blob, or will
        once complete), a model, a job's result."""
        return self.one("SELECT 1 AS x FROM uploads WHERE sha256 = ? UNION ALL SELECT 1 FROM models WHERE blob = ? "
                        "UNION ALL SELECT 1 FROM jobs WHERE result_blob = ? LIMIT 1", (sha256,) * 3) is not None


def now() -> float:
    return time.time()


def dumps_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
