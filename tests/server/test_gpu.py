"""The service on a CUDA device: a server with ``device="cuda"`` (key sets cached on the GPU,
ciphertexts loaded there, the worker training there) answers bit for bit what the CPU computes
in process, for predictions and for a training job (the kernels are bit-identical)."""
from __future__ import annotations

import os

import pytest

from conftest import LiveServer, make_tokens, tiny_settings
from fhe_core.params import preset
from fhe_core.serialize import dumps, dumps_many
from helr_helpers import config, local_model, session
from server.embedded import background_server

pytestmark = pytest.mark.gpu
DEVICE = os.environ.get("FHE_SERVER_TEST_DEVICE", "cuda")  # "cpu" runs the same checks without a GPU


@pytest.fixture(scope="module")
def device_server(tmp_path_factory):
    settings = tiny_settings(tmp_path_factory.mktemp("device-data"), device=DEVICE)
    tokens = make_tokens(settings)
    with background_server(settings) as server:
        yield LiveServer(server.url, settings, server.app, tokens)


def test_predictions_on_the_device_equal_the_cpu_evaluation(device_server):
    from apps.xgboost.server import ForestEvaluator
    from xgb_helpers import PRESET, forest, samples

    with device_server.client("admin") as admin:
        admin.add_model("toy", forest().to_bytes(), preset(PRESET, allow_insecure=True))
    with device_server.client() as api:
        client = api.forest_client("toy", seed=b"gpu".ljust(32, b"\0"), allow_insecure=True)  # client on the CPU
        keyset = api.register_keys(client.eval_keys(), client.params)
        cts = client.encrypt(samples(40, seed=9))
        remote = api.predict("toy", keyset, cts, client.params)
        assert api.health()["cached_keysets"] >= 1
    local = ForestEvaluator(client.params, client.eval_keys(), forest()).evaluate(cts)  # CPU
    assert dumps_many(remote) == dumps_many(local)


def test_training_job_on_the_device_equals_the_cpu_run(device_server):
    client, keys, dataset = session()
    with device_server.client() as api:
        keyset = api.register_keys(keys, client.params)
        data = api.upload_dataset(dataset, client.params)
        job = api.train(config(4), keyset, data)
        assert api.wait(job, timeout=300, poll=0.05)["state"] == "succeeded"
        model = api.download_model(job, client.params)
    assert dumps(model) == dumps(local_model(4))  # CPU, in process
