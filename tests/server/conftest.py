"""Fixtures of the service tests: a real uvicorn server on a free loopback port (in a thread of
the test process, or a subprocess for the restart test), tenants with tokens, and tiny BFV
sessions whose evaluation keys the tests upload."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from server.client import ServiceClient
from server.db import Database
from server.embedded import background_server, free_port
from server.settings import Settings
from server.tenants import create_token

REPO = Path(__file__).resolve().parents[2]
__all__ = ["LiveServer", "free_port", "make_tokens", "start_subprocess_server", "tiny_settings"]


def tiny_settings(data_dir: Path, **overrides) -> Settings:
    """Small limits (so the limit tests send kilobytes, not gigabytes), insecure params allowed."""
    values = dict(data_dir=data_dir, allow_insecure=True, max_part_bytes=1 << 20, max_body_bytes=16 << 20,
                  max_upload_bytes=256 << 20, max_batch=64, max_queued_jobs=3, max_jobs_per_tenant=2,
                  upload_idle_timeout_s=5.0)
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
    env = dict(os.environ, FHE_SERVER_ALLOW_INSECURE="1", PYTHONUNBUFFERED="1")
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "server", "serve", "--data-dir", str(data_dir),
                                 "--port", str(port), "--log-level", "warning"],
                                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not answer /health within 60 s")
