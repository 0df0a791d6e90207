"""The iDASH 2020 model (Magara's encoding) as a served model kind: an administrator registers
it, a client scores encrypted samples through a real uvicorn server (tiny insecure BFV), and
the decrypted scores equal the integer twin's exactly."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from apps.xgboost.client import ForestClient, IdashSamples
from apps.xgboost.idash import evaluate_idash
from apps.xgboost.plan import IdashModel, PublicModel, named_params
from data.idash import N_CLASSES, load_idash
from server.client import APIError

PRESET, SAMPLES, TREES_PER_CLASS = "BFVN11QP335L4D5T20Insecure", 20, 8


def small_workload(idash_dir):
    """The first 8 trees of each class (88 of 1,408): a batch fits the test server's limits."""
    workload = load_idash(idash_dir)
    per_class = len(workload.leaves) // N_CLASSES
    trees = (np.arange(N_CLASSES)[:, None] * per_class + np.arange(TREES_PER_CLASS)).ravel()
    return dataclasses.replace(workload, thresholds=workload.thresholds[trees], leaves=workload.leaves[trees],
                               leaves_float=workload.leaves_float[trees], x0=workload.x0[:, trees],
                               x2=workload.x2[:, trees])


def test_idash_predictions_through_the_service_equal_the_twin(live_server, idash_dir):
    workload = small_workload(idash_dir)
    with live_server.client("admin") as admin:
        row = admin.add_model("idash", IdashModel.from_workload(workload).to_bytes(),
                              named_params(PRESET, allow_insecure=True), kind="idash", width=SAMPLES)
    assert row["kind"] == "idash" and row["public"]["kind"] == "idash" and row["public"]["width"] == SAMPLES
    with live_server.client() as api:
        client = ForestClient(PublicModel.from_json(json.dumps(api.model("idash")["public"])), allow_insecure=True)
        keyset = api.register_keys(client.eval_keys(), client.params, public_key=client.public_key)
        samples = IdashSamples(workload.x0[:SAMPLES], workload.x2[:SAMPLES])
        results = api.predict("idash", keyset, client.encrypt(samples), client.params)
        scores = client.decrypt_scores(results, SAMPLES)
    np.testing.assert_array_equal(scores, evaluate_idash(workload).scores[:SAMPLES])


def test_a_file_that_is_not_an_idash_model_is_refused(live_server):
    with live_server.client("admin") as admin:
        with pytest.raises(APIError) as err:
            admin.add_model("not-idash", b"PK\x03\x04 not an archive", named_params(PRESET, allow_insecure=True),
                            kind="idash")
        assert (err.value.status, err.value.error) == (422, "ModelFormatError")
        assert all(m["name"] != "not-idash" for m in admin.models())


def test_a_width_the_slots_cannot_hold_is_refused(live_server, idash_dir):
    model = IdashModel.from_workload(small_workload(idash_dir))
    with live_server.client("admin") as admin:
        with pytest.raises(APIError) as err:
            admin.add_model("too-wide", model.to_bytes(), named_params(PRESET, allow_insecure=True), kind="idash",
                            width=1 << 20)
        assert (err.value.status, err.value.error) == (422, "PlanError") and "width" in err.value.detail
