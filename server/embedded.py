"""A real uvicorn server in a background thread of this process, on a free loopback port:
for notebooks, examples and tests (production runs ``python -m server serve``).

Its worker runs in this process too (``inline_worker``), unless the settings say
``inline_worker=False``: then it starts worker processes like ``serve`` does, and a script that
does so needs the usual ``if __name__ == "__main__":`` guard of multiprocessing's spawn."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
import uvicorn
from fastapi import FastAPI

from server.app import create_app
from server.db import Database
from server.settings import Settings
from server.tenants import create_token

REPO = Path(__file__).resolve().parents[1]


@dataclass
class EmbeddedServer:
    url: str
    settings: Settings
    app: FastAPI

    @property
    def service(self):
        return self.app.state.service

    def create_token(self, tenant: str, *, admin: bool = False) -> str:
        """What ``python -m server create-token`` does, for this server's database."""
        return create_token(self.service.db, tenant, admin=admin)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@contextmanager
def background_server(settings: Settings, *, port: int | None = None, log_level: str = "warning",
                      start_timeout: float = 60.0) -> Iterator[EmbeddedServer]:
    """Start the service on 127.0.0.1 (``port`` or a free one), yield it, stop it on exit."""
    if "inline_worker" not in settings.model_fields_set:
        settings = settings.model_copy(update={"inline_worker": True})
    Database(settings.store).close()  # create the schema before the first token
    app = create_app(settings)
    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level=log_level))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield EmbeddedServer(f"http://127.0.0.1:{port}", settings, app)
    finally:
        server.should_exit = True
        thread.join(30)


def serve_subprocess(data_dir: Path, port: int, *, env: dict[str, str] | None = None, log: IO[bytes] | None = None,
                     start_timeout: float = 60.0) -> subprocess.Popen:
    """``python -m server serve`` on 127.0.0.1:``port`` in its own process (``env`` added to this
    process's environment; output to ``log`` or inherited); returns it once ``/health`` answers."""
    proc = subprocess.Popen([sys.executable, "-m", "server", "serve", "--data-dir", str(data_dir),
                             "--port", str(port), "--log-level", "warning"], cwd=REPO,
                            env=dict(os.environ, **(env or {})), stdout=log,
                            stderr=subprocess.STDOUT if log is not None else None)
    deadline = time.monotonic() + start_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    proc.wait(10)
    raise RuntimeError(f"server did not answer /health within {start_timeout:.0f} s")
