"""Several hosts on loopback: server processes with their own node names share one PostgreSQL
store and one data directory. A job submitted to a host without workers runs on a worker of
another host; when that host is killed with -9 mid-job, a third host's worker resumes the job
once its lease has run out, from the last checkpoint, to the same encrypted model bit for bit,
and every host answers for it."""
from __future__ import annotations

import time

from conftest import free_port, fresh_postgres_database, make_tokens, start_subprocess_server, tiny_settings
from fhe_core.serialize import dumps
from helr_helpers import config, local_model, session
from server.client import ServiceClient
from server.db import Database

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
        db.close()
        next(databases, None)  # drop the database
    assert final["state"] == "succeeded" and final["iteration"] == ITERATIONS
    assert row["worker"] == "gpu-b/0" and row["attempts"] == 2  # resumed once, on the other host
    assert dumps(model) == dumps(local_model(ITERATIONS))
