"""Fixtures of the service tests: a real uvicorn server on a free loopback port (in a thread of
the test process, or a subprocess for the restart test), tenants with tokens, and tiny BFV
sessions whose evaluation keys the tests upload.

The job store: SQLite by default; tests of the store's contract also run on PostgreSQL
(``store`` parameter ``"postgresql"``): a scratch server this session starts
(scripts/scratch_postgres.sh), or the one ``FHE_TEST_DATABASE_URL`` names (CI starts one), with
a fresh database per use. Without either the PostgreSQL cases skip, saying why, unless
``FHE_TEST_REQUIRE_POSTGRES=1`` (CI) makes that a failure."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from server.client import ServiceClient
from server.db import Database
from server.embedded import background_server, free_port, serve_subprocess
from server.settings import Settings
from server.tenants import create_token
from server.workers import handoff_path

__all__ = ["LiveServer", "STORES", "drop_handoff", "free_port", "make_tokens", "start_subprocess_server",
           "tiny_settings"]

REPO = Path(__file__).resolve().parents[2]
STORES = ["sqlite", "postgresql"]  # parametrize a store-contract test (or a module's live_server) over both


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server for this session (its 'postgres' database)."""
    url = os.environ.get("FHE_TEST_DATABASE_URL")
    if url:
        yield url
        return
    folder = tempfile.mkdtemp(prefix="fhe-test-pg-")  # not under pytest's tmp (mode 0700): the server's user reads it
    started = subprocess.run(["bash", str(REPO / "scripts" / "scratch_postgres.sh"), "start", folder],
                             capture_output=True, text=True)
    if started.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        why = (started.stderr.strip().splitlines() or ["scratch_postgres.sh failed"])[-1]
        if os.environ.get("FHE_TEST_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required here (FHE_TEST_REQUIRE_POSTGRES=1) and did not start: {why}")
        pytest.skip(f"no PostgreSQL server could be started ({why}); install PostgreSQL or set FHE_TEST_DATABASE_URL")
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run(["bash", str(REPO / "scripts" / "scratch_postgres.sh"), "stop", folder], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def fresh_postgres_database(server_url: str) -> Iterator[str]:
    """A new empty database on the server, dropped after use: its URL."""
    import psycopg

    name = f"fhe_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield server_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def database_url_for(request, store: str) -> Iterator[str | None]:
    """None for SQLite (the data directory's file), else a fresh PostgreSQL database's URL."""
    if store == "sqlite":
        yield None
    else:
        yield from fresh_postgres_database(request.getfixturevalue("postgres_server"))


@pytest.fixture(params=STORES)
def database_url(request) -> Iterator[str | None]:
    """Each test that asks runs twice: on SQLite (None) and on PostgreSQL (a fresh database)."""
    yield from database_url_for(request, request.param)


def tiny_settings(data_dir: Path, **overrides) -> Settings:
    """Small limits (so the limit tests send kilobytes, not gigabytes), insecure params allowed."""
    values = dict(data_dir=data_dir, allow_insecure=True, max_part_bytes=1 << 20,
                  max_body_bytes=16 << 20, max_upload_bytes=256 << 20, max_batch=64, max_queued_jobs=3,
                  max_jobs_per_tenant=2, upload_idle_timeout_s=5.0)
    values.update(overrides)
    return Settings(**values)


@dataclass
class LiveServer:
    url: str
    settings: Settings
    app: object
    tokens: dict[str, str]

    @property
    def service(self):
        return self.app.state.service

    def client(self, tenant: str = "alice", **kwargs) -> ServiceClient:
        kwargs.setdefault("progress", False)
        return ServiceClient(self.url, self.tokens[tenant], **kwargs)


def make_tokens(settings: Settings) -> dict[str, str]:
    db = Database(settings.store)
    try:
        return {"alice": create_token(db, "alice"), "bob": create_token(db, "bob"),
                "admin": create_token(db, "admin", admin=True)}
    finally:
        db.close()


@pytest.fixture(scope="module")
def live_server(request, tmp_path_factory) -> Iterator[LiveServer]:
    """One uvicorn server (thread) per test module, on 127.0.0.1 and a free port; on SQLite, or
    on each store of a module marked ``pytest.mark.parametrize("live_server", STORES,
    indirect=True, scope="module")``."""
    for url in database_url_for(request, getattr(request, "param", "sqlite")):
        settings = tiny_settings(tmp_path_factory.mktemp("server-data"), database_url=url)
        tokens = make_tokens(settings)
        with background_server(settings) as server:
            yield LiveServer(server.url, server.settings, server.app, tokens)


def drop_handoff(settings: Settings) -> None:
    """Remove the /dev/shm folder of a server the test killed with -9 (a server empties it when it
    starts again, or removes it when it stops)."""
    shutil.rmtree(handoff_path(settings), ignore_errors=True)


def start_subprocess_server(data_dir: Path, port: int, log: Path, **env: str) -> subprocess.Popen:
    """``python -m server serve`` in its own process (what the restart test kills with -9);
    ``env``: more settings (``FHE_SERVER_...``)."""
    with open(log, "ab") as out:
        try:
            return serve_subprocess(data_dir, port, env={"FHE_SERVER_ALLOW_INSECURE": "1", "PYTHONUNBUFFERED": "1",
                                                         **env}, log=out)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}: {log.read_text()[-2000:]}") from exc
