"""Durability: kill -9 the server in the middle of a training job, start it again on the same
data directory: the job resumes from its last checkpoint (the first step after the restart makes
the checkpoint's successor) and ends with the same encrypted model as an uninterrupted run; key
sets, datasets and jobs are intact."""
from __future__ import annotations

import time
from pathlib import Path

from apps.logreg.trainer import read_checkpoint
from conftest import free_port, make_tokens, start_subprocess_server, tiny_settings
from fhe_core.serialize import dumps
from helr_helpers import config, local_model, session
from server.client import ServiceClient

ITERATIONS = 6


def history_files(job_dir: Path) -> dict[int, tuple[int, int]]:
    """Iteration -> (inode, mtime in ns) of the job's kept checkpoints (iteration-NNNNNN.bin). A
    step writes its file anew (a new inode), so an unchanged pair means that step never re-ran."""
    out = {}
    for path in job_dir.glob("iteration-*.bin"):
        stat = path.stat()
        out[int(path.stem.split("-")[1])] = (stat.st_ino, stat.st_mtime_ns)
    return out


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
        # where the job resumes: the checkpoint on disk (a kill between a step's kept copy and its
        # checkpoint's rename leaves one kept file past it, which the restart rightly rewrites)
        job_dir = settings.jobs_dir / job
        resume_from, _, _ = read_checkpoint((job_dir / "checkpoint.bin").read_bytes(), client.params)
        before = history_files(job_dir)
        assert done <= resume_from < ITERATIONS, "the job finished before the kill; raise ITERATIONS"

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
    # steps 1 .. resume_from were not computed again (a restart from 0 that caught up would have
    # rewritten them); the checkpoint's successor was written after the restart
    after = history_files(job_dir)
    assert sorted(after) == list(range(1, ITERATIONS + 1))
    assert all(after[i] == before[i] for i in range(1, resume_from + 1))
    assert after[resume_from + 1] != before.get(resume_from + 1)
    assert dumps(model) == dumps(local_model(ITERATIONS))
    assert uploads_after == uploads_before  # nothing lost or changed
