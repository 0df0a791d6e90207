"""The job store's contract on both backends (SQLite file, PostgreSQL database), without HTTP:
write transactions exclude each other across connections, claims never hand one job to two
workers, a job whose lease ran out is resumed by another worker while the one that lost it can
change nothing, a worker's own job comes back to it at once, and a job whose workers keep dying
fails with that reason instead of being lost or retried forever."""
from __future__ import annotations

import sqlite3
import threading
import time
from types import SimpleNamespace

import pytest

from conftest import tiny_settings
from server.db import Database, now
from server.worker import MAX_ATTEMPTS, Claim, JobLost, JobWorker, claim_job


@pytest.fixture
def store(tmp_path, database_url):
    """What a Database opens on this backend (a fresh one per test)."""
    return database_url or tmp_path / "server.sqlite3"


def queue_jobs(db: Database, count: int) -> list[str]:
    db.execute("INSERT INTO tenants (name, is_admin, created) VALUES ('alice', 0, ?) ON CONFLICT (name) DO NOTHING",
               (now(),))
    tenant = db.scalar("SELECT id FROM tenants WHERE name = 'alice'")
    ids = [f"job_{n}" for n in range(count)]
    for n, job_id in enumerate(ids):
        db.execute("INSERT INTO jobs (id, tenant_id, kind, state, config_json, keyset_id, dataset_id, iterations, "
                   "created) VALUES (?, ?, 'helr', 'queued', '{}', 'ks', 'ds', 3, ?)", (job_id, tenant, now() + n))
    return ids


def test_write_transactions_exclude_each_other_across_connections(store):
    """Check-then-insert in two connections at once: the second sees the first's row (no lost update)."""
    dbs = [Database(store) for _ in range(2)]
    queue_jobs(dbs[0], 0)
    inserted = []

    def insert_if_none(db: Database, label: str) -> None:
        with db.transaction() as tx:
            if tx.scalar("SELECT COUNT(*) FROM jobs") == 0:
                time.sleep(0.3)  # the other connection tries meanwhile
                tx.execute("INSERT INTO jobs (id, tenant_id, kind, state, config_json, keyset_id, dataset_id, "
                           "iterations, created) VALUES (?, 1, 'helr', 'queued', '{}', 'k', 'd', 1, ?)", (label, now()))
                inserted.append(label)

    threads = [threading.Thread(target=insert_if_none, args=(db, f"job_{i}")) for i, db in enumerate(dbs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(inserted) == 1 and dbs[0].scalar("SELECT COUNT(*) FROM jobs") == 1
    for db in dbs:
        db.close()


def test_concurrent_claims_hand_each_job_to_exactly_one_worker(store):
    dbs = [Database(store) for _ in range(3)]
    ids = queue_jobs(dbs[0], 8)
    claimed: dict[str, list[str]] = {f"host/{i}": [] for i in range(3)}

    def claim_all(db: Database, worker: str) -> None:
        while (job := claim_job(db, worker, lease_s=60.0)) is not None:
            claimed[worker].append(job["id"])
            db.execute("UPDATE jobs SET state = 'succeeded' WHERE id = ?", (job["id"],))  # done: not its own to resume

    threads = [threading.Thread(target=claim_all, args=(db, w)) for db, w in zip(dbs, claimed)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [job for jobs in claimed.values() for job in jobs]
    assert sorted(every) == sorted(ids)  # each job once, none lost
    rows = {r["id"]: r for r in dbs[0].query("SELECT id, worker, attempts FROM jobs")}
    assert all(rows[job]["worker"] == worker and rows[job]["attempts"] == 1
               for worker, jobs in claimed.items() for job in jobs)
    for db in dbs:
        db.close()


def test_an_expired_lease_moves_the_job_and_fences_the_old_holder(store, tmp_path):
    db_a, db_b = Database(store), Database(store)
    (job_id,) = queue_jobs(db_a, 1)
    first = claim_job(db_a, "a/0", lease_s=0.5)
    assert first["state"] == "running" and first["worker"] == "a/0" and first["attempts"] == 1
    assert claim_job(db_b, "b/0", lease_s=60.0) is None  # held: not claimable while the lease runs
    holder = Claim(db_a, first, "a/0", 0.5, checkpoint=tmp_path / "checkpoint.bin")
    holder.update("iteration = ?", 1)  # the holder may write
    time.sleep(0.7)
    second = claim_job(db_b, "b/0", lease_s=60.0)  # a's lease ran out: b resumes it
    assert second["id"] == job_id and second["worker"] == "b/0" and second["attempts"] == 2
    assert second["iteration"] == 1  # from where a left it
    with pytest.raises(JobLost):
        holder.update("iteration = ?", 2)  # a lost it: its writes change nothing
    with pytest.raises(JobLost):
        holder.finish("succeeded")
    row = db_b.one("SELECT state, iteration, worker FROM jobs WHERE id = ?", (job_id,))
    assert row == {"state": "running", "iteration": 1, "worker": "b/0"}
    db_a.close()
    db_b.close()


def test_a_restarted_worker_reclaims_its_own_job_at_once(store):
    db = Database(store)
    (job_id,) = queue_jobs(db, 1)
    claim_job(db, "a/0", lease_s=3600.0)
    db.close()  # the process dies with its lease far from over
    again = Database(store)
    assert claim_job(again, "b/0", lease_s=60.0) is None  # someone else waits for the lease
    resumed = claim_job(again, "a/0", lease_s=60.0)  # the same node and slot: its previous life is gone
    assert resumed["id"] == job_id and resumed["attempts"] == 2
    again.close()


def test_a_job_whose_workers_keep_dying_fails_with_the_reason(store, tmp_path):
    db = Database(store)
    (job_id,) = queue_jobs(db, 1)
    db.execute("UPDATE jobs SET attempts = ? WHERE id = ?", (MAX_ATTEMPTS, job_id))  # died MAX_ATTEMPTS times
    service = SimpleNamespace(db=db, settings=tiny_settings(tmp_path / "data"))
    worker = JobWorker(service, runners={}, worker_id="a/0")
    job = claim_job(db, "a/0", lease_s=60.0)
    worker._run(Claim(db, job, "a/0", 60.0, checkpoint=tmp_path / "checkpoint.bin"))
    row = db.one("SELECT state, error, lease_until FROM jobs WHERE id = ?", (job_id,))
    assert row["state"] == "failed" and f"started {MAX_ATTEMPTS} times" in row["error"] and row["lease_until"] is None
    assert claim_job(db, "b/0", lease_s=60.0) is None
    db.close()


def test_a_store_from_before_leases_gains_the_new_columns(tmp_path):
    path = tmp_path / "server.sqlite3"
    with sqlite3.connect(path) as old:  # the jobs table as the previous version made it
        old.execute("CREATE TABLE jobs (id TEXT PRIMARY KEY, tenant_id INTEGER NOT NULL, kind TEXT NOT NULL, "
                    "state TEXT NOT NULL, config_json TEXT NOT NULL, keyset_id TEXT NOT NULL, "
                    "dataset_id TEXT NOT NULL, "
                    "iterations INTEGER NOT NULL, iteration INTEGER NOT NULL DEFAULT 0, seconds_per_iteration REAL, "
                    "cancel_requested INTEGER NOT NULL DEFAULT 0, error TEXT, result_blob TEXT, created REAL NOT NULL, "
                    "started REAL, finished REAL)")
        old.execute("INSERT INTO jobs (id, tenant_id, kind, state, config_json, keyset_id, dataset_id, iterations, "
                    "created) VALUES ('job_old', 1, 'helr', 'queued', '{}', 'k', 'd', 2, 0)")
    db = Database(path)
    row = db.one("SELECT worker, lease_until, attempts FROM jobs WHERE id = 'job_old'")
    assert row == {"worker": None, "lease_until": None, "attempts": 0}
    assert claim_job(db, "a/0", lease_s=60.0)["id"] == "job_old"
    db.close()



class StoppingSession:
    """A job's session whose first step asks its worker to stop (a graceful shutdown mid-job)."""

    def __init__(self, worker: JobWorker):
        self.worker, self.iteration = worker, 0

    def step(self) -> None:
        self.iteration += 1
        self.worker._stop.set()

    def checkpoint(self) -> bytes:
        return b"state %d" % self.iteration

    client_checkpoint = checkpoint


def test_a_stopping_worker_hands_its_job_back_at_once_without_counting_a_death(store, tmp_path):
    db = Database(store)
    (job_id,) = queue_jobs(db, 1)
    service = SimpleNamespace(db=db, settings=tiny_settings(tmp_path / "data"))
    worker = JobWorker(service, runners={}, worker_id="a/0")
    worker.runners["helr"] = SimpleNamespace(open=lambda job, checkpoint: StoppingSession(worker))
    job = claim_job(db, "a/0", lease_s=3600.0)
    worker._run(Claim(db, job, "a/0", 3600.0, checkpoint=tmp_path / "checkpoint.bin"))
    row = db.one("SELECT state, iteration, lease_until, attempts FROM jobs WHERE id = ?", (job_id,))
    assert row == {"state": "running", "iteration": 1, "lease_until": None, "attempts": 0}
    resumed = claim_job(db, "b/0", lease_s=60.0)  # another host need not wait for a lease
    assert resumed["id"] == job_id and resumed["attempts"] == 1
    db.close()


class _Watched:
    """A statement's result that records, on every read, whether the reading thread holds the
    store's lock."""

    def __init__(self, result, lock, reads: list[bool]):
        self._result, self._lock, self._reads = result, lock, reads

    def _note(self) -> None:
        self._reads.append(self._lock._is_owned())

    def mappings(self):
        self._note()
        return self._result.mappings()

    def __iter__(self):
        self._note()
        return iter(self._result)

    def scalar(self):
        self._note()
        return self._result.scalar()

    @property
    def rowcount(self):
        self._note()
        return self._result.rowcount


def test_a_statements_rows_are_read_under_the_stores_lock(store):
    """One connection serves every request thread: a statement's rows must be read before the lock
    lets another thread's statement run on it (on the H200 host, parallel part uploads read an
    empty result for their token and answered 401)."""
    db = Database(store)
    reads: list[bool] = []
    connection = db._connection()
    execute = connection.exec_driver_sql
    connection.exec_driver_sql = lambda sql, args: _Watched(execute(sql, args), db._lock, reads)
    try:
        db.execute("INSERT INTO tenants (name, is_admin, created) VALUES ('a', 0, ?)", (now(),))
        assert db.one("SELECT name FROM tenants WHERE name = 'a'") == {"name": "a"}
        assert db.scalar("SELECT COUNT(*) FROM tenants") == 1
        assert db.query("SELECT name FROM tenants WHERE name = 'b'") == []
    finally:
        connection.exec_driver_sql = execute
        db.close()
    assert reads == [True] * 4
