"""The service's metadata behind one interface, on SQLAlchemy Core: tenants, tokens, uploads
(key sets and datasets), models and jobs. Bulk data (keys, ciphertexts, checkpoints) lives in
files beside it (:mod:`server.blobs`); rows only name them.

Two backends, one schema (:data:`metadata`) and one set of statements (plain SQL both speak:
``?`` placeholders, ``ON CONFLICT``, ``LIMIT``):

- **SQLite** (the embedded default, one host): one file, WAL journal with ``synchronous=FULL``,
  so a committed row survives a kill -9 or a power cut.
- **PostgreSQL** (``database_url``, several hosts): psycopg 3 as the driver.

Write transactions are serialised across every process that shares the store: SQLite's
``BEGIN IMMEDIATE`` takes its one write lock up front, and on PostgreSQL every write
transaction first takes one transaction-scoped advisory lock (:data:`WRITE_LOCK`). The
service's check-then-write steps (a job's bounds and its insert, an upload's state moves, "no
row names this blob any more") therefore read exactly what the other writers committed, on
either backend, without a retry loop. Metadata transactions last milliseconds; the heavy work
(files, GPU) happens outside them. The one hot path that must not queue behind that lock, a
worker claiming a job, runs in a non-exclusive transaction (:meth:`Database.claim_transaction`)
with ``SELECT ... FOR UPDATE SKIP LOCKED`` (see :mod:`server.jobstore`).

Each :class:`Database` holds one connection, shared by the threads of its process and
serialised by a lock (as SQLite allows one writer anyway). A blob file is removed only when no
row names it (:meth:`Database.blob_is_named`), inside the write transaction that removed the
last such row and after its commit, before the lock is released (:meth:`Database.on_commit`).
"""
from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, CursorResult

metadata = sa.MetaData()

sa.Table(
    "tenants", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.Text, nullable=False, unique=True),
    sa.Column("is_admin", sa.Integer, nullable=False, server_default="0"),
    sa.Column("created", sa.Double, nullable=False),
)
sa.Table(
    "tokens", metadata,
    sa.Column("token_hash", sa.Text, primary_key=True),  # sha256 of the token; the token itself is never stored
    sa.Column("tenant_id", sa.Integer, sa.ForeignKey("tenants.id"), nullable=False),
    sa.Column("created", sa.Double, nullable=False),
    sa.Column("expires", sa.Double),                      # refused from then on; NULL: never
)
sa.Table(  # key sets (kind 'keyset') and datasets (kind 'dataset')
    "uploads", metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("tenant_id", sa.Integer, sa.ForeignKey("tenants.id"), nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("params_json", sa.Text, nullable=False),   # the ParamsLiteral, canonical JSON
    sa.Column("params_id", sa.Text, nullable=False),
    sa.Column("parts_json", sa.Text, nullable=False),    # [{"sha256": ..., "size": ...}, ...]
    sa.Column("sha256", sa.Text, nullable=False),        # of the whole, declared at creation; names its blob
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("state", sa.Text, nullable=False),         # 'uploading' -> 'completing' -> 'ready' (server.uploads)
    sa.Column("info_json", sa.Text),                     # what verification found (Galois elements, counts)
    sa.Column("completer", sa.Text),                     # the node that moved it to 'completing' (its recovery)
    sa.Column("created", sa.Double, nullable=False),
    sa.Column("completed", sa.Double),
)
sa.Table(
    "models", metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("kind", sa.Text, nullable=False),          # 'xgboost' | 'idash'
    sa.Column("params_json", sa.Text, nullable=False),
    sa.Column("params_id", sa.Text, nullable=False),
    sa.Column("blob", sa.Text, nullable=False),          # sha256 of the model file in the blob store
    sa.Column("public_json", sa.Text, nullable=False),   # what a client needs to encrypt for it
    sa.Column("created", sa.Double, nullable=False),
)
sa.Table(
    "jobs", metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("tenant_id", sa.Integer, sa.ForeignKey("tenants.id"), nullable=False),
    sa.Column("kind", sa.Text, nullable=False),          # 'helr'
    sa.Column("state", sa.Text, nullable=False),         # queued | running | succeeded | failed | cancelled
    sa.Column("config_json", sa.Text, nullable=False),
    sa.Column("keyset_id", sa.Text, nullable=False),
    sa.Column("dataset_id", sa.Text, nullable=False),
    sa.Column("iterations", sa.Integer, nullable=False),
    sa.Column("iteration", sa.Integer, nullable=False, server_default="0"),  # iterations done (and checkpointed)
    sa.Column("seconds_per_iteration", sa.Double),
    sa.Column("cancel_requested", sa.Integer, nullable=False, server_default="0"),
    sa.Column("error", sa.Text),
    sa.Column("result_blob", sa.Text),
    sa.Column("created", sa.Double, nullable=False),
    sa.Column("started", sa.Double),
    sa.Column("finished", sa.Double),
    sa.Column("worker", sa.Text),                        # who holds (or last held) it: '<node>/<index>'
    sa.Column("lease_until", sa.Double),                 # a running job whose lease ran out is claimable
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),  # claims not handed back (deaths + 1)
    sa.Index("jobs_by_state", "state", "created"),
)

T = TypeVar("T")
WRITE_LOCK = 0x66_68_65_6D_6C  # PostgreSQL: the advisory lock every write transaction takes ("fheml")


def database_url(target: str | Path) -> str:
    """A SQLAlchemy URL: a path is a SQLite file; ``postgresql://`` and ``postgres://`` URLs get
    psycopg 3 as their driver."""
    if isinstance(target, Path):
        return f"sqlite:///{target}"
    for prefix in ("postgresql://", "postgres://"):
        if target.startswith(prefix):
            return "postgresql+psycopg://" + target[len(prefix):]
    return target


class Statements:
    """Plain SQL with ``?`` placeholders; rows come back as dicts. Each statement's result is read
    whole inside :meth:`_run` (a result read after another thread ran a statement on the same
    connection is not that statement's result)."""

    def _run(self, sql: str, args: tuple[Any, ...], read: Callable[[CursorResult], T]) -> T:
        raise NotImplementedError

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        return self._run(sql, args, lambda result: [dict(row) for row in result.mappings()])

    def one(self, sql: str, args: tuple[Any, ...] = ()) -> dict[str, Any] | None:
        rows = self.query(sql, args)
        return rows[0] if rows else None

    def scalar(self, sql: str, args: tuple[Any, ...] = ()) -> Any:
        """The first column of the first row (None without a row)."""
        return self._run(sql, args, lambda result: result.scalar())

    def execute(self, sql: str, args: tuple[Any, ...] = ()) -> int:
        """Run one statement; returns the number of rows it changed."""
        return self._run(sql, args, lambda result: result.rowcount)


class Transaction(Statements):
    """The statements of one open transaction (what :meth:`Database.transaction` yields)."""

    def __init__(self, db: Database, conn: Connection):
        self.db, self._conn = db, conn

    @property
    def dialect(self) -> str:
        return self.db.dialect

    def _run(self, sql: str, args: tuple[Any, ...], read: Callable[[CursorResult], T]) -> T:
        return read(self._conn.exec_driver_sql(self.db.native(sql), args))


class Database(Statements):
    """A thread-safe store on one connection to SQLite (``target`` a path) or PostgreSQL (a URL).

    ``query``/``one``/``scalar``/``execute`` run one statement each (autocommit);
    ``transaction()`` groups several under the store-wide write lock, and ``on_commit`` queues
    work for after its commit, still under that lock.
    """

    def __init__(self, target: str | Path):
        if isinstance(target, Path):
            target.parent.mkdir(parents=True, exist_ok=True)
        url = database_url(target)
        self.engine = sa.create_engine(url, isolation_level="AUTOCOMMIT", **_engine_options(url))
        self.dialect = self.engine.dialect.name  # 'sqlite' | 'postgresql'
        if self.dialect not in ("sqlite", "postgresql"):
            raise ValueError(f"database {self.engine.url.render_as_string(hide_password=True)}: "
                             "use a SQLite path or a postgresql:// URL")
        self._lock = threading.RLock()
        self._conn = self.engine.connect()
        self._tx: Transaction | None = None
        self._after_commit: list[Callable[[], None]] | None = None  # inside a transaction: what on_commit queued
        if self.dialect == "sqlite":
            for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON"):
                self._conn.exec_driver_sql(f"PRAGMA {pragma}")
        with self.transaction() as tx:  # two hosts starting at once: one creates, the other finds
            metadata.create_all(tx._conn)
            _add_missing_columns(tx._conn)

    def close(self) -> None:
        with self._lock:
            self._conn.close()
            self.engine.dispose()

    def native(self, sql: str) -> str:
        """``sql`` in the driver's placeholder style (psycopg: ``%s``)."""
        return sql if self.dialect == "sqlite" else _pyformat(sql)

    def _connection(self) -> Connection:
        if self._conn.invalidated or self._conn.closed:  # the server dropped us (a restart): reconnect
            self._conn = self.engine.connect()
        return self._conn

    def _run(self, sql: str, args: tuple[Any, ...], read: Callable[[CursorResult], T]) -> T:
        with self._lock:  # the statement and the reading of its result, as one
            if self._tx is not None:  # this thread's open transaction (others wait on the lock)
                return self._tx._run(sql, args, read)
            return read(self._connection().exec_driver_sql(self.native(sql), args))

    @contextmanager
    def transaction(self, *, exclusive: bool = True) -> Iterator[Transaction]:
        """A transaction; ``exclusive`` (the default) takes the store-wide write lock first.
        Nested use joins the open transaction."""
        with self._lock:
            if self._tx is not None:
                yield self._tx
                return
            conn = self._connection()
            if self.dialect == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")  # SQLite has one write lock: always exclusive
            else:
                conn.exec_driver_sql("BEGIN")
                if exclusive:
                    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")
            self._tx, self._after_commit = Transaction(self, conn), []
            try:
                yield self._tx
            except BaseException:
                self._tx = self._after_commit = None
                conn.exec_driver_sql("ROLLBACK")
                raise
            self._tx = None
            conn.exec_driver_sql("COMMIT")
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


def _engine_options(url: str) -> dict[str, Any]:
    if url.startswith("sqlite"):
        return {"connect_args": {"check_same_thread": False, "timeout": 30.0}}
    return {"pool_size": 1, "max_overflow": 0}


def _add_missing_columns(conn: Connection) -> None:
    """A store made by an older version gains the columns added since (all nullable or with a
    default): ``ALTER TABLE ... ADD COLUMN``, the one migration this schema has needed."""
    inspector = sa.inspect(conn)
    for table in metadata.sorted_tables:
        present = {column["name"] for column in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name not in present:
                kind = column.type.compile(conn.dialect)
                default = f" DEFAULT {column.server_default.arg}" if column.server_default is not None else ""
                null = " NOT NULL" if not column.nullable and default else ""
                conn.exec_driver_sql(f"ALTER TABLE {table.name} ADD COLUMN {column.name} {kind}{default}{null}")


@functools.lru_cache(maxsize=1024)  # the service's statements are a fixed set
def _pyformat(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


def now() -> float:
    return time.time()


def dumps_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
