"""Durability: kill -9 the server in the middle of a training job, start it again on the same
data directory: the job resumes from its last checkpoint and ends with the same encrypted model
as an uninterrupted run; key sets, datasets and jobs are intact."""
from __future__ import annotations

import time

from conftest import free_port, make_tokens, start_subprocess_server, tiny_settings
from fhe_core.serialize import dumps
from helr_helpers import config, local_run, session
from server.client import ServiceClient

ITERATIONS = 6


def test_kill_9_mid_job_then_restart_resumes_to_the_same_result(tmp_path):
    settings = tiny_settings(tmp_path / "data")
    tokens = make_tokens(settings)
    client, keys, dataset = session()
    port = free_port()
    log = tmp_path / "server.log"
    proc = start_subprocess_server(settings.data_dir, port, log)
    try:
        with ServiceClient(f"http://127.0.0.1:{port}", tokens["alice"], progress=False) as api:
            keyset = api.register_keys(keys, client.params)
            data = api.upload_dataset(dataset, client.params)
            uploads_before = {u["id"]: u for u in api._json("GET", "/keysets") + api._json("GET", "/datasets")}
            job = api.train(config(ITERATIONS), keyset, data)
            deadline = time.monotonic() + 120
            while (done := api.job(job)["iteration"]) < 2:
                assert time.monotonic() < deadline, "the job made no progress"
                time.sleep(0.02)
        proc.kill()  # SIGKILL: no shutdown handler runs
        proc.wait(10)
        assert done < ITERATIONS, "the job finished before the kill; raise ITERATIONS"
        # the kept checkpoint of every finished iteration (a write replaces the file: a new inode)
        history = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns)
                   for p in (settings.jobs_dir / job).glob("iteration-*.bin")}
        assert len(history) >= 2

        proc = start_subprocess_server(settings.data_dir, port, log)
        with ServiceClient(f"http://127.0.0.1:{port}", tokens["alice"], progress=False) as api:
            first = api.job(job)
            assert first["state"] in ("running", "succeeded") and first["iteration"] >= done  # resumed, not restarted
            final = api.wait(job, timeout=120, poll=0.05)
            model = api.download_model(job, client.params)
            uploads_after = {u["id"]: u for u in api._json("GET", "/keysets") + api._json("GET", "/datasets")}
    finally:
        proc.kill()
        proc.wait(10)
    assert final["state"] == "succeeded" and final["iteration"] == ITERATIONS
    # resumed from the checkpoint: the iterations done before the kill were not computed again
    # (their files are untouched), and the next ones were (a restart from 0 that caught up would
    # have rewritten iteration 1)
    kept = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (settings.jobs_dir / job).glob("iteration-*.bin")}
    assert {name: kept[name] for name in history} == history
    assert sorted(kept) == [f"iteration-{i:06d}.bin" for i in range(1, ITERATIONS + 1)]
    assert dumps(model) == dumps(local_run(ITERATIONS).weights)
    assert uploads_after == uploads_before  # nothing lost or changed
