"""The HTTP service as a child process on a loopback port, and the peak memory of both sides."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import psutil

from server.embedded import free_port, serve_subprocess


class ServiceStartError(RuntimeError):
    """The service did not answer on its port in time (its log says why)."""


@dataclass(frozen=True)
class Tokens:
    lab: str      # administrator: registers models
    user: str     # a tenant: keys, predictions, datasets, jobs


class ServiceProcess:
    """``python -m server serve`` on 127.0.0.1 with its own data directory; a context manager
    that starts it (tokens created first, by the admin command) and stops it on exit."""

    def __init__(self, data_dir: Path, device: str, *, allow_insecure: bool = False, log_path: Path | None = None,
                 start_timeout: float = 120.0):
        self.data_dir, self.device, self.allow_insecure = Path(data_dir), device, allow_insecure
        self.log_path = log_path or self.data_dir / "server.log"
        self.start_timeout = start_timeout
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.tokens: Tokens | None = None

    def _env(self) -> dict[str, str]:
        """The service's settings (server.settings.Settings reads FHE_SERVER_*)."""
        return {"FHE_SERVER_DATA_DIR": str(self.data_dir), "FHE_SERVER_DEVICE": self.device,
                "FHE_SERVER_ALLOW_INSECURE": "true" if self.allow_insecure else "false"}

    def _token(self, tenant: str, admin: bool) -> str:
        out = subprocess.run([sys.executable, "-m", "server", "create-token", tenant, *(["--admin"] if admin else [])],
                             env=dict(os.environ, **self._env()), check=True, capture_output=True, text=True)
        return out.stdout.strip().splitlines()[-1]

    def __enter__(self) -> ServiceProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.tokens = Tokens(lab=self._token("lab", True), user=self._token("user", False))
        self._log = open(self.log_path, "ab")
        try:
            self.process = serve_subprocess(self.data_dir, self.port, env=self._env(), log=self._log,
                                            start_timeout=self.start_timeout)
        except RuntimeError as exc:
            self.stop()
            raise ServiceStartError(f"{exc}; see {self.log_path}") from None
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()           # uvicorn shuts down on SIGTERM
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if getattr(self, "_log", None) is not None:
            self._log.close()
            self._log = None

    def __exit__(self, *exc: object) -> None:
        self.stop()


class MemoryWatch:
    """Samples the resident memory of this process and of the service twice a second; the peaks
    of each and of their sum (what the machine must hold) in bytes."""

    def __init__(self, interval: float = 0.5):
        self.interval = interval
        self.server_pid: int | None = None
        self.peak_client = self.peak_server = self.peak_total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-watch", daemon=True)

    def __enter__(self) -> MemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        # the kernel's own high-water mark of this process catches peaks between samples
        self.peak_client = max(self.peak_client, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)

    def _rss(self, pid: int) -> int:
        try:
            return psutil.Process(pid).memory_info().rss
        except psutil.Error:
            return 0

    def _sample(self) -> None:
        client = self._rss(os.getpid())
        server = self._rss(self.server_pid) if self.server_pid else 0
        self.peak_client = max(self.peak_client, client)
        self.peak_server = max(self.peak_server, server)
        self.peak_total = max(self.peak_total, client + server)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()
