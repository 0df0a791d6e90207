"""Fixtures of the service tests: a real uvicorn server on a free loopback port (in a thread of
the test process, or a subprocess for the restart test), tenants with tokens, and tiny BFV
sessions whose evaluation keys the tests upload."""
from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from server.client import ServiceClient
from server.db import Database
from server.embedded import background_server, free_port, serve_subprocess
from server.settings import Settings
from server.tenants import create_token

__all__ = ["LiveServer", "free_port", "make_tokens", "start_subprocess_server", "tiny_settings"]


def tiny_settings(data_dir: Path, **overrides) -> Settings:
    """Small limits (so the limit tests send kilobytes, not gigabytes), insecure params allowed."""
    values = dict(data_dir=data_dir, allow_insecure=True, inline_worker=True, max_part_bytes=1 << 20,
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
    db = Database(settings.db_path)
    try:
        return {"alice": create_token(db, "alice"), "bob": create_token(db, "bob"),
                "admin": create_token(db, "admin", admin=True)}
    finally:
        db.close()


@pytest.fixture(scope="module")
def live_server(tmp_path_factory) -> Iterator[LiveServer]:
    """One uvicorn server (thread) per test module, on 127.0.0.1 and a free port."""
    settings = tiny_settings(tmp_path_factory.mktemp("server-data"))
    tokens = make_tokens(settings)
    with background_server(settings) as server:
        yield LiveServer(server.url, settings, server.app, tokens)


def start_subprocess_server(data_dir: Path, port: int, log: Path) -> subprocess.Popen:
    """``python -m server serve`` in its own process (what the restart test kills with -9)."""
    with open(log, "ab") as out:
        try:
            return serve_subprocess(data_dir, port, env={"FHE_SERVER_ALLOW_INSECURE": "1", "PYTHONUNBUFFERED": "1"},
                                    log=out)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}: {log.read_text()[-2000:]}") from exc
