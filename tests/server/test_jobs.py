"""HELR training jobs through a real uvicorn server and the real client (tiny insecure CKKS
with bootstrapping): the downloaded encrypted model equals the in-process run bit for bit;
progress, cancel, queue bounds, mismatched inputs and tenant isolation."""
from __future__ import annotations

import dataclasses
import json
import time

import numpy as np
import pytest

from fhe_core.serialize import dumps
from helr_helpers import config, local_run, session
from server.client import APIError, JobFailedError


@pytest.fixture(scope="module")
def uploaded(live_server):
    """Alice's key set and dataset on the server: (keyset id, dataset id)."""
    client, keys, dataset = session()
    with live_server.client() as api:
        return api.register_keys(keys, client.params), api.upload_dataset(dataset, client.params)


def wait_for(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_training_job_matches_the_local_run_bit_for_bit(live_server, uploaded):
    keyset, dataset = uploaded
    client, _, _ = session()
    seen = []
    with live_server.client() as api:
        job = api.train(config(4), keyset, dataset)
        final = api.wait(job, timeout=120, poll=0.05, on_progress=lambda s: seen.append(s["iteration"]))
        model = api.download_model(job, client.params)
    assert final["state"] == "succeeded" and final["iteration"] == final["iterations"] == 4
    assert seen == sorted(seen) and seen[-1] == 4
    local = local_run(4)
    assert model.level == 0 and dumps(model) == dumps(local.for_client(local.weights))  # the same, bit for bit
    w = client.decrypt_weights(model)
    assert w.shape == (dataset_features(),) and np.array_equal(w, client.decrypt_weights(local.weights))


def dataset_features() -> int:
    return session()[2].features


def test_progress_then_cancel(live_server, uploaded):
    keyset, dataset = uploaded
    with live_server.client() as api:
        job = api.train(config(400), keyset, dataset)
        wait_for(lambda: api.job(job)["iteration"] >= 2)
        status = api.job(job)
        assert status["state"] == "running" and status["iterations"] == 400
        assert status["seconds_per_iteration"] > 0 and status["eta_seconds"] > 0
        for in_use in (f"/keysets/{keyset}", f"/datasets/{dataset}"):  # the running job holds both
            with pytest.raises(APIError) as err:
                api._request("DELETE", in_use)
            assert err.value.status == 409 and err.value.error == "ConflictError"
            assert api._json("GET", in_use)["state"] == "ready"  # refused, not half-removed
        assert api.cancel(job)["cancel_requested"]
        with pytest.raises(JobFailedError) as err:
            api.wait(job, timeout=60, poll=0.05)
        assert err.value.state == "cancelled"
        with pytest.raises(APIError) as err:  # no result for a cancelled job
            api.download_model(job, session()[0].params)
        assert err.value.status == 409
        with pytest.raises(APIError) as err:
            api.cancel(job)
        assert err.value.status == 409


def test_queue_bound_per_tenant(live_server, uploaded):
    keyset, dataset = uploaded
    limit = live_server.settings.max_jobs_per_tenant
    with live_server.client() as api:
        jobs = [api.train(config(400), keyset, dataset) for _ in range(limit)]
        with pytest.raises(APIError) as err:
            api.train(config(400), keyset, dataset)
        assert err.value.status == 429 and err.value.error == "QueueFullError"
        for job in jobs:
            api.cancel(job)
        for job in jobs:
            wait_for(lambda: api.job(job)["state"] == "cancelled")  # noqa: B023 (called at once)


def test_mismatched_inputs_are_refused(live_server, uploaded):
    keyset, dataset = uploaded
    with live_server.client() as api:
        before = len(api._json("GET", "/jobs"))
        cases = [  # (config, keyset, dataset, status, error, words in the detail)
            (dataclasses.replace(config(4), batch_size=8), keyset, dataset, 422, "UnprocessableError", "batch size"),
            (config(4).__class__(bootstrapping="TINY_N10_FULL", allow_insecure=True, iterations=2, batch_size=16),
             keyset, dataset, 422, "UnprocessableError", "params_id"),
            ({"bootstrapping": "N16_H192_FULL", "iterations": -1}, keyset, dataset, 422, "HELRConfigError",
             "iterations"),
            ({"nonsense": 1}, keyset, dataset, 422, "HELRConfigError", "fields"),
            (config(4), "ke_nope", dataset, 404, "NotFoundError", "ke_nope"),
            (config(4), keyset, keyset, 404, "NotFoundError", keyset),  # a key set is not a dataset
            (config(20_000), keyset, dataset, 422, "UnprocessableError", "iterations"),
        ]
        for cfg, ks, ds, status, error, words in cases:
            with pytest.raises(APIError) as err:
                api.train(cfg, ks, ds)
            assert (err.value.status, err.value.error) == (status, error), err.value
            assert words in err.value.detail
        assert len(api._json("GET", "/jobs")) == before  # nothing queued


def test_another_tenant_cannot_see_or_touch_a_job(live_server, uploaded):
    keyset, dataset = uploaded
    with live_server.client("alice") as alice, live_server.client("bob") as bob:
        job = alice.train(config(2), keyset, dataset)
        for call in (lambda: bob.job(job), lambda: bob.cancel(job),
                     lambda: bob.download_model(job, session()[0].params),
                     lambda: bob.train(config(2), keyset, dataset)):  # nor use alice's uploads
            with pytest.raises(APIError) as err:
                call()
            assert err.value.status == 404
        assert alice.wait(job, timeout=60, poll=0.05)["state"] == "succeeded"
        assert job not in [j["id"] for j in bob._json("GET", "/jobs")]


def test_datasets_at_the_wrong_level_or_scale_are_refused_at_submission(live_server, uploaded):
    from apps.logreg.dataset import EncryptedDataset
    from fhe_core.ckks import Evaluator

    keyset, _ = uploaded
    client, _, dataset = session()
    top = config(4).bootstrapping_parameters.output_level
    evaluator = Evaluator(client.params)

    def altered(change) -> EncryptedDataset:
        blocks = tuple(tuple(change(ct) for ct in block) for block in dataset.blocks)
        return EncryptedDataset(blocks, dataset.samples, dataset.features, dataset.batch_size)

    cases = [(altered(lambda ct: evaluator.drop_level(ct, top - 1)), f"level {top - 1}"),
             (altered(lambda ct: ct.replace(scale=ct.scale * 2)), "scales")]
    with live_server.client() as api:
        for bad, words in cases:
            bad_id = api.upload_dataset(bad, client.params)  # well-formed ciphertexts: the upload is fine
            with pytest.raises(APIError) as err:
                api.train(config(4), keyset, bad_id)
            assert err.value.status == 422 and words in err.value.detail, err.value


def test_bad_dataset_uploads_are_refused_and_nothing_kept(live_server, uploaded):
    from fhe_core import rlwe
    from fhe_core.params import preset
    from fhe_core.serialize import dumps as dump_object

    client, _, dataset = session()
    other = preset("N10QP241L3D4Insecure", allow_insecure=True)  # declared parameters the data are not for
    secret = dump_object(rlwe.gen_secret_key(client._ctx, seed=b"s" * 32))
    cases = [(b"HELRDATA" + b"\xff" * 500, client.params, 400, "SerializationError"),
             (secret, client.params, 422, "UnprocessableError"),
             (dataset.to_bytes(), other, 422, "SerializedParamsMismatchError"),
             (dataset.to_bytes()[:-10], client.params, 400, "TruncatedError")]
    with live_server.client() as api:
        before = len(api._json("GET", "/datasets"))
        for blob, params, status, error in cases:
            with pytest.raises(APIError) as err:
                api.upload_dataset(blob, params)
            assert (err.value.status, err.value.error) == (status, error), err.value
        assert len(api._json("GET", "/datasets")) == before


def test_client_command_line_trains_like_the_twin(live_server, tmp_path, capsys):
    from apps.logreg.twin import train_helr
    from helr_helpers import design
    from server.client_cli import main

    x, y = design()
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    code = main(["--url", live_server.url, "--token", live_server.tokens["bob"], "--quiet", "train",
                 "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy"), "--tiny", "--iterations", "2",
                 "--out", str(tmp_path / "w.npy")])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    cfg = config(2)
    twin = train_helr(x, y, cfg.twin_config(), schedule=cfg.schedule(len(x)))
    w = np.load(tmp_path / "w.npy")
    assert np.abs(w - twin.w).max() < 2**-10 and np.abs(twin.w).max() > 1e-3
    assert printed["weights"] == w.tolist()


def test_finished_jobs_can_be_deleted_with_their_result(live_server, uploaded):
    keyset, dataset = uploaded
    with live_server.client() as api:
        job = api.train(config(1), keyset, dataset)
        with pytest.raises(APIError) as err:
            api.delete_job(job)  # queued or running
        assert err.value.status == 409
        api.wait(job, timeout=60, poll=0.05)
        blob = live_server.service.db.one("SELECT result_blob FROM jobs WHERE id = ?", (job,))["result_blob"]
        assert live_server.service.blobs.exists(blob)
        api.delete_job(job)
        with pytest.raises(APIError) as err:
            api.job(job)
        assert err.value.status == 404
        assert not live_server.service.blobs.exists(blob)
        assert not (live_server.settings.jobs_dir / job).exists()  # kept checkpoints go too


def test_abandoned_uploads_expire(live_server):
    client, _, _ = session()
    with live_server.client() as api:
        manifest = {"params": client.params.literal.to_dict(), "parts": [{"sha256": "0" * 64, "size": 1000}],
                    "sha256": "1" * 64, "size": 1000}
        upload = api._json("POST", "/datasets", json=manifest)["id"]
        uploads = live_server.service.uploads
        assert uploads.expire(3600.0) == 0  # young: kept
        live_server.service.db.execute("UPDATE uploads SET created = created - 7200 WHERE id = ?", (upload,))
        assert uploads.expire(3600.0) == 1
        with pytest.raises(APIError) as err:
            api._json("GET", f"/datasets/{upload}")
        assert err.value.status == 404


@pytest.mark.parametrize("iterations", [300_000_000, 10**15])
def test_iterations_are_bounded_before_the_schedule_is_built(live_server, uploaded, monkeypatch, iterations):
    keyset, dataset = uploaded

    def no_schedule(*args, **kwargs):
        raise AssertionError("a schedule was built before the iterations were checked")

    monkeypatch.setattr("apps.logreg.schedule.MiniBatchSchedule.build", no_schedule)
    with live_server.client() as api, pytest.raises(APIError) as err:
        api.train(json.loads(config(4).to_json()) | {"iterations": iterations}, keyset, dataset)
    assert err.value.status == 422 and f"iterations: {iterations}" in err.value.detail
