"""The job loop of one worker (:mod:`server.workers` runs one per device): claim a job from the
shared jobs table, advance it one checkpointed iteration at a time, hold its lease meanwhile.

Why a table and not huey, Celery or RQ: a job must survive a kill -9 *while it runs* and resume
from its last checkpoint. Those queues take a task off the queue before running it (or redeliver
it from scratch), so we would need our own durable record anyway, plus progress, ETA, cancel
flag and tenant ownership. That record is the ``jobs`` row, and the queue is one indexed query
on it. Every state change is one committed write; each checkpoint is written to a temporary
file, fsynced and renamed before the row says it exists.

Claims and leases (why leases rather than PostgreSQL advisory locks): a claim sets the row to
``running``, names the worker (``<node>/<index>``), counts an attempt and sets ``lease_until``;
a heartbeat thread renews the lease every third of ``lease_s``. A job whose lease ran out (its
process or host died, or hangs) is claimable by any worker and resumes from its checkpoint; a
worker reclaims its own job at once (the same name is the same host and slot, and the server
that named it is gone: one process per node holds its lock). Every write of the holder is
fenced on (worker, attempt), so a holder that lost its lease stops at its next step and
changes nothing. Advisory locks would tie the claim to a database session instead: they work
on PostgreSQL only (the embedded SQLite store has none), a hung process with a live
connection would hold its job forever, and each running job would pin a connection. Leases
need only a clock per host (NTP-synchronised; the lease is seconds, skew milliseconds).

PostgreSQL claims with ``SELECT ... FOR UPDATE SKIP LOCKED`` (concurrent claimers skip each
other's candidate rows instead of queueing); SQLite with the conditional UPDATE inside its
single-writer transaction. A job whose attempts exceed ``MAX_ATTEMPTS`` fails with that reason
instead of crashing workers forever.

A job that takes several workers (data-parallel HELR, :mod:`fhe_core` collectives): the
claiming worker is rank 0; :meth:`JobRunner.open` would receive the pool's ``peers`` hook
(:meth:`server.workers.WorkerPool.peers`), start k-1 idle workers of its host as the other ranks
of a torch.distributed group, and the job row would record ``world_size`` for the resume. Not
built yet: every job runs on one worker today.
"""
from __future__ import annotations

import logging
import os
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Protocol

from server.blobs import write_synced
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


class JobLost(Exception):
    """The worker no longer holds the job (its lease ran out and another worker claimed it)."""


class JobWorker:
    """Claims jobs and runs them one at a time, in a thread of a worker process (or of the
    server process with ``inline_worker``). ``worker_id``: ``<node>/<index>``, stable across
    restarts of the same slot."""

    def __init__(self, service: Any, runners: dict[str, JobRunner], worker_id: str, *, poll_s: float = 0.5,
                 housekeeping: bool = False):
        self.service, self.runners, self.worker_id, self.poll_s = service, runners, worker_id, poll_s
        self.housekeeping = housekeeping  # expire abandoned uploads (one worker per host does)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"fhe-job-worker-{worker_id}", daemon=True)
        self.current: str | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the worker to stop after its current iteration (the job stays 'running' and
        resumes from its checkpoint at the next start, or on another worker once its lease
        runs out)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def wake(self) -> None:
        """A job was queued: look now rather than at the next poll."""
        self._wake.set()

    # ---- the loop --------------------------------------------------------------------------

    def _loop(self) -> None:
        housekeeping = time.monotonic()
        while not self._stop.is_set():
            if self.housekeeping and time.monotonic() - housekeeping > HOUSEKEEPING_S:  # abandoned uploads go
                self.service.uploads.expire(self.service.settings.upload_ttl_s)
                housekeeping = time.monotonic()
            try:
                job = claim_job(self.service.db, self.worker_id, self.service.settings.lease_s)
            except Exception:  # the store is unreachable for a moment (a restart): the loop goes on
                log.warning("worker %s: claim failed: %s", self.worker_id, traceback.format_exc())
                job = None
            if job is None:
                self._wake.wait(self.poll_s)
                self._wake.clear()
                continue
            self.current = job["id"]
            settings = self.service.settings
            try:
                self._run(Claim(self.service.db, job, self.worker_id, settings.lease_s,
                                checkpoint_path(settings, job["id"])))
            finally:
                self.current = None

    def _run(self, claim: Claim) -> None:
        job, job_id = claim.job, claim.job["id"]
        if job["cancel_requested"]:
            claim.finish("cancelled")
            return
        if job["attempts"] > MAX_ATTEMPTS:
            claim.finish("failed", error=f"the job was started {MAX_ATTEMPTS} times and its worker died each time "
                                         "(out of memory, a crash or a killed host); it is not tried again")
            return
        heartbeat = threading.Thread(target=claim.keep_alive, name=f"lease-{job_id}", daemon=True)
        heartbeat.start()
        try:
            session = self.runners[job["kind"]].open(job, stored_checkpoint(self.service.settings, job_id))
            claim.update("iteration = ?", session.iteration)
            while session.iteration < job["iterations"]:
                if self._stop.is_set():  # stays 'running', handed back: the next start or another worker
                    claim.update("lease_until = NULL, attempts = attempts - 1")  # resumes it at once; no death
                    return
                if claim.cancel_requested():
                    claim.finish("cancelled")
                    return
                self._advance(claim, session)
            result = session.result()
            with self.service.db.transaction():  # stored and named at once: a delete of one with the same result waits
                claim.finish("succeeded", result_blob=self.service.blobs.put_bytes(result))
        except JobLost:
            log.warning("job %s: lease lost, another worker resumes it", job_id)
        except Exception as exc:  # any failure ends the job with its reason; the worker goes on
            log.warning("job %s failed: %s", job_id, traceback.format_exc())
            try:
                claim.finish("failed", error=f"{type(exc).__name__}: {exc}")
            except JobLost:
                pass
        finally:
            claim.release()
            heartbeat.join()

    def _advance(self, claim: Claim, session: TrainingSession) -> None:
        start = time.perf_counter()
        session.step()
        claim.renew()  # still ours: only then may the checkpoint file move on
        write_checkpoint(self.service.settings, claim.job["id"], session)
        elapsed = time.perf_counter() - start
        previous = claim.db.scalar("SELECT seconds_per_iteration FROM jobs WHERE id = ?", (claim.job["id"],))
        rate = elapsed if previous is None else 0.7 * previous + 0.3 * elapsed  # smoothed for the ETA
        claim.update("iteration = ?, seconds_per_iteration = ?", session.iteration, rate)


MAX_ATTEMPTS = 5  # claims of one job before it fails for good (each resumes from its checkpoint)


def claim_job(db: Any, worker_id: str, lease_s: float) -> dict[str, Any] | None:
    """Claim the next job for ``worker_id``: its own interrupted job, else one whose lease ran out
    (both resume first), else the oldest queued one. Returns the claimed row, or None."""
    t = now()
    claimable = ("(state = 'queued' OR (state = 'running' AND (worker = ? OR lease_until IS NULL "
                 "OR lease_until < ?)))")
    order = "ORDER BY CASE WHEN state = 'running' THEN 0 ELSE 1 END, created LIMIT 1"
    with db.transaction(exclusive=False) as tx:
        if tx.dialect == "postgresql":  # concurrent claimers skip each other's row instead of queueing
            job_id = tx.scalar(f"SELECT id FROM jobs WHERE {claimable} {order} FOR UPDATE SKIP LOCKED", (worker_id, t))
        else:  # SQLite: this transaction holds the one write lock
            job_id = tx.scalar(f"SELECT id FROM jobs WHERE {claimable} {order}", (worker_id, t))
        if job_id is None:
            return None
        claimed = tx.execute("UPDATE jobs SET state = 'running', started = COALESCE(started, ?), worker = ?, "
                             f"lease_until = ?, attempts = attempts + 1 WHERE id = ? AND {claimable}",
                             (t, worker_id, t + lease_s, job_id, worker_id, t))
        return tx.one("SELECT * FROM jobs WHERE id = ?", (job_id,)) if claimed else None


class Claim:
    """A job held by one worker: every write is fenced on (worker, attempt), so a worker that lost
    the job (its lease ran out, another claimed it) changes nothing and raises :class:`JobLost`."""

    def __init__(self, db: Any, job: dict[str, Any], worker_id: str, lease_s: float, checkpoint: Path):
        self.db, self.job, self.worker_id, self.lease_s, self.checkpoint = db, job, worker_id, lease_s, checkpoint
        self._fence = (job["id"], worker_id, job["attempts"])
        self._released = threading.Event()

    def update(self, assignments: str, *values: Any) -> None:
        if not self.db.execute(f"UPDATE jobs SET {assignments} WHERE id = ? AND worker = ? AND attempts = ? "
                               "AND state = 'running'", (*values, *self._fence)):
            raise JobLost(self.job["id"])

    def renew(self) -> None:
        self.update("lease_until = ?", now() + self.lease_s)

    def keep_alive(self) -> None:
        """The heartbeat (a thread): renew the lease every third of it until released or lost."""
        while not self._released.wait(self.lease_s / 3):
            try:
                self.renew()
            except JobLost:
                return
            except Exception:  # the store is unreachable for a moment: the next beat tries again
                log.warning("job %s: lease renewal failed: %s", self.job["id"], traceback.format_exc())

    def cancel_requested(self) -> bool:
        return bool(self.db.scalar("SELECT cancel_requested FROM jobs WHERE id = ?", (self.job["id"],)))

    def finish(self, state: str, *, error: str | None = None, result_blob: str | None = None) -> None:
        self.update("state = ?, error = ?, result_blob = ?, finished = ?, lease_until = NULL",
                    state, error, result_blob, now())
        self._released.set()
        self.checkpoint.unlink(missing_ok=True)

    def release(self) -> None:
        self._released.set()


# ---- files ---------------------------------------------------------------------------------

def checkpoint_path(settings: Any, job_id: str) -> Path:
    return settings.jobs_dir / job_id / "checkpoint.bin"


def history_path(settings: Any, job_id: str, iteration: int) -> Path:
    """The client checkpoint after ``iteration`` steps, kept for the job's owner (who can decrypt
    the model of every iteration) when ``settings.keep_checkpoints``."""
    return settings.jobs_dir / job_id / f"iteration-{iteration:06d}.bin"


def write_checkpoint(settings: Any, job_id: str, session: TrainingSession) -> None:
    path = checkpoint_path(settings, job_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    if settings.keep_checkpoints:  # first: the resume checkpoint never runs ahead of it
        _write_atomically(history_path(settings, job_id, session.iteration), session.client_checkpoint())
    _write_atomically(path, session.checkpoint())


def stored_checkpoint(settings: Any, job_id: str) -> bytes | None:
    path = checkpoint_path(settings, job_id)
    return path.read_bytes() if path.is_file() else None


def _write_atomically(path: Path, data: bytes) -> None:
    """``data`` to ``path`` through a synced temporary file and a rename: the name never points at
    a partial file."""
    tmp = path.with_suffix(".tmp")
    write_synced(tmp, data)
    os.replace(tmp, path)
