"""Several hosts on loopback: server processes with their own node names share one PostgreSQL
store and one data directory. A job submitted to a host without workers runs on a worker of
another host; when that host is killed with -9 mid-job, a third host's worker resumes the job
once its lease has run out, from the last checkpoint, to the same encrypted model bit for bit,
and every host answers for it. A host that starts again takes back its own unfinished upload
completions, never another host's."""
from __future__ import annotations

import time

from conftest import (
    drop_handoff, free_port, fresh_postgres_database, make_tokens, start_subprocess_server, tiny_settings,
)
from fhe_core.serialize import dumps
from helr_helpers import config, local_model, session
from server.blobs import BlobStore
from server.client import ServiceClient
from server.db import Database, now
from server.uploads import UploadStore

ITERATIONS = 6
LEASE_S = 3.0


def test_a_job_submitted_to_one_host_runs_on_another_and_survives_that_host(tmp_path, postgres_server):
    databases = fresh_postgres_database(postgres_server)
    url = next(databases)
    settings = tiny_settings(tmp_path / "shared", database_url=url)
    tokens = make_tokens(settings)
    client, keys, dataset = session()
    log = tmp_path / "hosts.log"

    def host(node: str, workers: int):
        port = free_port()
        proc = start_subprocess_server(settings.data_dir, port, log, FHE_SERVER_DATABASE_URL=url,
                                       FHE_SERVER_NODE=node, FHE_SERVER_WORKERS=str(workers),
                                       FHE_SERVER_LEASE_S=str(LEASE_S))
        return proc, ServiceClient(f"http://127.0.0.1:{port}", tokens["alice"], progress=False)

    db = Database(url)
    hosts = []
    try:
        front, front_api = host("front", 0)  # answers requests, runs no worker
        hosts.append(front)
        keyset = front_api.register_keys(keys, client.params)
        data = front_api.upload_dataset(dataset, client.params)
        job = front_api.train(config(ITERATIONS), keyset, data)

        first, _ = host("gpu-a", 1)
        hosts.append(first)
        deadline = time.monotonic() + 120
        while (row := db.one("SELECT worker, iteration FROM jobs WHERE id = ?", (job,)))["iteration"] < 2:
            assert time.monotonic() < deadline, "the job made no progress"
            time.sleep(0.05)
        assert row["worker"] == "gpu-a/0"  # submitted to front, run by gpu-a's worker
        first.kill()  # the whole host: server and worker (it dies with its server)
        first.wait(10)

        second, _ = host("gpu-b", 1)
        hosts.append(second)
        final = front_api.wait(job, timeout=180, poll=0.1)
        model = front_api.download_model(job, client.params)
        row = db.one("SELECT worker, attempts, started FROM jobs WHERE id = ?", (job,))
        front_api.close()
    finally:
        for proc in hosts:
            proc.kill()
            proc.wait(10)
        for node in ("front", "gpu-a", "gpu-b"):
            drop_handoff(tiny_settings(settings.data_dir, database_url=url, node=node))
        db.close()
        next(databases, None)  # drop the database
    assert final["state"] == "succeeded" and final["iteration"] == ITERATIONS
    assert row["worker"] == "gpu-b/0" and row["attempts"] == 2  # resumed once, on the other host
    assert dumps(model) == dumps(local_model(ITERATIONS))


def test_a_starting_host_takes_back_its_own_completions_only(tmp_path, postgres_server):
    databases = fresh_postgres_database(postgres_server)
    url = next(databases)
    db = Database(url)
    try:
        db.execute("INSERT INTO tenants (name, is_admin, created) VALUES ('alice', 0, 0)")
        for upload_id, node in (("ks_a", "host-a"), ("ks_b", "host-b")):
            db.execute("INSERT INTO uploads (id, tenant_id, kind, params_json, params_id, parts_json, sha256, size, "
                       "state, completer, created) "
                       "VALUES (?, 1, 'keyset', '{}', 'p', '[]', 's', 1, 'completing', ?, ?)", (upload_id, node, now()))
            (tmp_path / "shared" / "parts" / upload_id).mkdir(parents=True)
        settings = tiny_settings(tmp_path / "shared", database_url=url, node="host-a")
        UploadStore(settings, db, BlobStore(settings.blob_dir, settings.tmp_dir)).recover()  # host-a starts again
        states = {r["id"]: r["state"] for r in db.query("SELECT id, state FROM uploads")}
        assert states == {"ks_a": "uploading", "ks_b": "completing"}  # host-b may be completing it right now
        assert {p.name for p in settings.parts_dir.iterdir()} == {"ks_a", "ks_b"}  # both keep their parts
    finally:
        db.close()
        next(databases, None)
