"""Worker processes (two, on the CPU: what one per GPU is on a GPU host) behind a real server:
predictions run in the workers and equal the plaintext twin; the dispatch keeps a tenant on the
worker that holds its keys until that one is busier than the rest; a worker killed with -9 is
started again in its slot, and the training job it was running resumes there from its
checkpoint to the same encrypted model, bit for bit; the batch files handed to workers are gone
afterwards."""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import OrderedDict
from types import SimpleNamespace

import httpx
import numpy as np
import pytest

from apps.xgboost.client import ForestClient
from apps.xgboost.plan import PublicModel
from apps.xgboost.twin import predict_forest
from conftest import LiveServer, make_tokens, tiny_settings
from fhe_core.params import preset
from fhe_core.serialize import dumps
from helr_helpers import config, local_model, session
from server.embedded import background_server
from server.workers import AFFINITY_SLACK, WorkerPool
from xgb_helpers import PRESET, forest, samples

ITERATIONS = 6


@pytest.fixture(scope="module")
def pooled(tmp_path_factory):
    settings = tiny_settings(tmp_path_factory.mktemp("pooled"), inline_worker=False, workers=2)
    tokens = make_tokens(settings)
    with background_server(settings) as server:
        yield LiveServer(server.url, server.settings, server.app, tokens)


def wait_for(predicate, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return value


def test_predictions_run_in_the_worker_processes(pooled):
    pool = pooled.service.workers
    assert isinstance(pool, WorkerPool) and pool.devices == ["cpu", "cpu"]
    pids = {w.process.pid for w in pool.workers}
    assert len(pids) == 2 and os.getpid() not in pids
    health = httpx.get(f"{pooled.url}/health").json()
    assert health["workers"] == ["cpu", "cpu"] and health["node"] == pooled.settings.node
    with pooled.client("admin") as admin:
        admin.add_model("toy", forest().to_bytes(), preset(PRESET, allow_insecure=True))
    for tenant in ("alice", "bob"):
        with pooled.client(tenant) as api:
            public = PublicModel.from_json(json.dumps(api.model("toy")["public"]))
            client = ForestClient(public, allow_insecure=True)
            keyset = api.register_keys(client.eval_keys(), client.params, public_key=client.public_key)
            x = samples(10, seed=len(tenant))
            for _ in range(2):
                scores = client.decrypt_scores(api.predict("toy", keyset, client.encrypt(x), client.params), len(x))
                np.testing.assert_array_equal(scores, predict_forest(forest(), forest().binning.encode(x)).scores)
    assert pooled.service.keysets.misses == 0 and len(pooled.service.keysets) == 0  # keys loaded in workers only
    assert list(pool.handoff.iterdir()) == []  # every batch and answer file removed


def test_dispatch_keeps_a_tenant_on_its_worker_until_that_one_is_busier():
    pool = WorkerPool.__new__(WorkerPool)  # the rule alone, without processes
    pool.settings, pool._affinity, pool._lock = SimpleNamespace(node="n"), OrderedDict(), threading.Lock()
    pool.workers = [SimpleNamespace(load=0, name="w0"), SimpleNamespace(load=0, name="w1")]
    first = pool._choose("alice-keys")
    assert all(pool._choose("alice-keys") is first for _ in range(AFFINITY_SLACK))  # queued behind its keys
    moved = pool._choose("alice-keys")  # now AFFINITY_SLACK + 1 waiting there, none on the other
    assert moved is not first
    assert pool._choose("alice-keys") is moved  # and stays on the new one


def test_a_worker_killed_mid_job_restarts_and_the_job_resumes_to_the_same_model(pooled):
    client, keys, dataset = session()
    pool = pooled.service.workers
    with pooled.client() as api:
        keyset, data = api.register_keys(keys, client.params), api.upload_dataset(dataset, client.params)
        job = api.train(config(ITERATIONS), keyset, data)
        wait_for(lambda: api.job(job)["iteration"] >= 2)
        row = pooled.service.db.one("SELECT worker, attempts FROM jobs WHERE id = ?", (job,))
        node, index = row["worker"].split("/")
        assert node == pooled.settings.node and row["attempts"] == 1
        victim = pool.workers[int(index)]
        restarts = victim.restarts
        os.kill(victim.process.pid, signal.SIGKILL)
        wait_for(lambda: victim.restarts > restarts)  # started again in its slot
        final = api.wait(job, timeout=180, poll=0.1)
        model = api.download_model(job, client.params)
    assert final["state"] == "succeeded" and final["iteration"] == ITERATIONS
    row = pooled.service.db.one("SELECT worker, attempts FROM jobs WHERE id = ?", (job,))
    assert row["attempts"] == 2  # resumed once (not restarted from 0: the checkpoint names where)
    assert dumps(model) == dumps(local_model(ITERATIONS))
