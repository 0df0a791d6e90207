"""The job worker: one long-lived thread in the server process that owns the device.

Why a thread and a SQLite job table rather than huey (or another queue library):
- a job must survive a kill -9 *while it runs* and resume from its last checkpoint. huey's
  consumer takes a task off its queue before running it (there is no acknowledgement), so a
  task killed mid-run is gone; we would need our own durable record of it anyway, plus our own
  progress, ETA, cancel flag and tenant ownership. That record is the ``jobs`` table, and the
  queue is then one indexed query on it (``state = 'queued' ORDER BY created``).
- CUDA must not be forked: huey's default consumer forks workers. A thread of the server
  process shares the device context and the key-set cache with the prediction handlers.
Every state change is one committed SQLite write (WAL, synchronous=FULL), and each checkpoint
is written to a temporary file, fsynced and renamed before the row says it exists, so the row
never points at a checkpoint that is not fully on disk.

Scaling out (not built here): the table is the queue, so several worker processes, one per
GPU, could share it by claiming a job with one conditional UPDATE (``SET state='running'
WHERE id=? AND state='queued'``, which SQLite serialises) instead of this thread's SELECT;
beyond one host the same job records map onto an existing engine (Celery or RQ on Redis, or a
Kubernetes Job per training run) with the data directory on shared storage. Nothing but the
in-memory key cache ties a job to a process.
"""
from __future__ import annotations

import logging
import os
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Protocol

from server.db import now

log = logging.getLogger("server.worker")
HOUSEKEEPING_S = 600.0


class TrainingSession(Protocol):
    """One job's computation, advanced one iteration at a time by the worker."""

    iteration: int

    def step(self) -> None: ...

    def checkpoint(self) -> bytes: ...         # what the job resumes from

    def client_checkpoint(self) -> bytes: ...  # what its owner downloads (may be smaller)

    def result(self) -> bytes: ...


class JobRunner(Protocol):
    """Builds a session for a job row, fresh or from its last checkpoint."""

    def open(self, job: dict[str, Any], checkpoint: bytes | None) -> TrainingSession: ...


class JobWorker:
    """Runs queued jobs one at a time; resumes a job left 'running' by a previous process."""

    def __init__(self, service: Any, runners: dict[str, JobRunner], *, poll_s: float = 0.5):
        self.service, self.runners, self.poll_s = service, runners, poll_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fhe-job-worker", daemon=True)
        self.current: str | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the worker to stop after its current iteration (the job stays 'running' and
        resumes from its checkpoint at the next start)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def wake(self) -> None:
        """A job was queued: look now rather than at the next poll."""
        self._wake.set()

    # ---- files -----------------------------------------------------------------------------

    def checkpoint_path(self, job_id: str) -> Path:
        return self.service.settings.jobs_dir / job_id / "checkpoint.bin"

    def history_path(self, job_id: str, iteration: int) -> Path:
        """The client checkpoint after ``iteration`` steps, kept for the job's owner (who can
        decrypt the model of every iteration) when ``settings.keep_checkpoints``."""
        return self.service.settings.jobs_dir / job_id / f"iteration-{iteration:06d}.bin"

    def _write_checkpoint(self, job_id: str, session: TrainingSession) -> None:
        path = self.checkpoint_path(job_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        if self.service.settings.keep_checkpoints:  # first: the resume checkpoint never runs ahead of it
            _write_atomically(self.history_path(job_id, session.iteration), session.client_checkpoint())
        _write_atomically(path, session.checkpoint())

    def _read_checkpoint(self, job_id: str) -> bytes | None:
        path = self.checkpoint_path(job_id)
        return path.read_bytes() if path.is_file() else None

    # ---- the loop --------------------------------------------------------------------------

    def _next_job(self) -> dict[str, Any] | None:
        """A job interrupted while running (resume it first), else the oldest queued one."""
        db = self.service.db
        return (db.one("SELECT * FROM jobs WHERE state = 'running' ORDER BY started LIMIT 1")
                or db.one("SELECT * FROM jobs WHERE state = 'queued' ORDER BY created LIMIT 1"))

    def _loop(self) -> None:
        housekeeping = time.monotonic()
        while not self._stop.is_set():
            if time.monotonic() - housekeeping > HOUSEKEEPING_S:  # abandoned uploads go
                self.service.uploads.expire(self.service.settings.upload_ttl_s)
                housekeeping = time.monotonic()
            job = self._next_job()
            if job is None:
                self._wake.wait(self.poll_s)
                self._wake.clear()
                continue
            self.current = job["id"]
            try:
                self._run(job)
            finally:
                self.current = None

    def _run(self, job: dict[str, Any]) -> None:
        db, job_id = self.service.db, job["id"]
        if job["cancel_requested"]:
            self._finish(job_id, "cancelled")
            return
        db.execute("UPDATE jobs SET state = 'running', started = COALESCE(started, ?) WHERE id = ?", (now(), job_id))
        try:
            session = self.runners[job["kind"]].open(job, self._read_checkpoint(job_id))
            db.execute("UPDATE jobs SET iteration = ? WHERE id = ?", (session.iteration, job_id))
            while session.iteration < job["iterations"]:
                if self._stop.is_set():
                    return  # stays 'running': the next start resumes it from the checkpoint
                if self._cancel_requested(job_id):
                    self._finish(job_id, "cancelled")
                    return
                self._advance(job_id, session, job["iterations"])
            result = session.result()
            with db.transaction():  # stored and named at once: a delete of a job with the same result waits
                self._finish(job_id, "succeeded", result_blob=self.service.blobs.put_bytes(result))
        except Exception as exc:  # any failure ends the job with its reason; the worker goes on
            log.warning("job %s failed: %s", job_id, traceback.format_exc())
            self._finish(job_id, "failed", error=f"{type(exc).__name__}: {exc}")

    def _advance(self, job_id: str, session: TrainingSession, iterations: int) -> None:
        start = time.perf_counter()
        session.step()
        self._write_checkpoint(job_id, session)
        elapsed = time.perf_counter() - start
        row = self.service.db.one("SELECT seconds_per_iteration FROM jobs WHERE id = ?", (job_id,))
        previous = row["seconds_per_iteration"] if row else None
        rate = elapsed if previous is None else 0.7 * previous + 0.3 * elapsed  # smoothed for the ETA
        self.service.db.execute("UPDATE jobs SET iteration = ?, seconds_per_iteration = ? WHERE id = ?",
                                (session.iteration, rate, job_id))

    def _cancel_requested(self, job_id: str) -> bool:
        row = self.service.db.one("SELECT cancel_requested FROM jobs WHERE id = ?", (job_id,))
        return bool(row and row["cancel_requested"])

    def _finish(self, job_id: str, state: str, *, error: str | None = None, result_blob: str | None = None) -> None:
        self.service.db.execute("UPDATE jobs SET state = ?, error = ?, result_blob = ?, finished = ? WHERE id = ?",
                                (state, error, result_blob, now(), job_id))
        self.checkpoint_path(job_id).unlink(missing_ok=True)


def _write_atomically(path: Path, data: bytes) -> None:
    """``data`` to ``path`` through a synced temporary file and a rename: the name never points at
    a partial file."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
