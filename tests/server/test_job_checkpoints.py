"""Every iteration's encrypted state of a training job: its owner downloads and decrypts it
(the demo follows training this way); it equals the in-process trainer's state bit for bit
(dropped to level 0, as the owner gets it: the same decryption), and nobody else gets it."""
from __future__ import annotations

import numpy as np
import pytest

from apps.logreg.trainer import EncryptedHELRTrainer, read_checkpoint
from fhe_core.serialize import dumps
from helr_helpers import FEATURES, config, session
from server.client import APIError


@pytest.fixture(scope="module")
def finished_job(live_server):
    client, keys, dataset = session()
    with live_server.client() as api:
        keyset, data = api.register_keys(keys, client.params), api.upload_dataset(dataset, client.params)
        job = api.train(config(3), keyset, data)
        api.wait(job, timeout=120, poll=0.05)
    return job


def test_each_iteration_checkpoint_is_the_local_trainers_state(live_server, finished_job):
    client, keys, dataset = session()
    cfg = config(3)
    local = EncryptedHELRTrainer(cfg, keys, dataset, cfg.schedule(dataset.samples))
    with live_server.client() as api:
        for iteration in (1, 2, 3):
            local.step()
            got, w, v = read_checkpoint(api.checkpoint(finished_job, iteration), client.params)
            assert got == iteration and w.level == v.level == 0   # the owner's copy: the smallest modulus
            assert dumps(w) == dumps(local.for_client(local.weights))
            assert dumps(v) == dumps(local.for_client(local.velocity))
            np.testing.assert_array_equal(client.decrypt_weights(w, FEATURES), client.decrypt_weights(local.weights,
                                                                                                    FEATURES))


def test_missing_iterations_and_other_tenants_get_404(live_server, finished_job):
    with live_server.client() as api:
        for iteration in (0, 4, -1):
            with pytest.raises(APIError) as err:
                api.checkpoint(finished_job, iteration)
            assert err.value.status == 404
    with live_server.client("bob") as api, pytest.raises(APIError) as err:
        api.checkpoint(finished_job, 1)
    assert err.value.status == 404
