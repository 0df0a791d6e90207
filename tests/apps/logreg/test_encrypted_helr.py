"""Encrypted HELR training (client + trainer) on the tiny insecure preset TINY_N11_HELR (N = 2^11,
1024 slots = 4 samples x 256 features, feature-major, 9 levels after bootstrapping) against the plaintext twin on
the same 40 MNIST rows and the same schedule (batch 16: three blocks, the last padded).

Every iteration's decrypted w and v must be within 2^-10 of the twin's (the issue's target); the
level account must be 9 -> 5 -> 1 -> bootstrap -> 5 -> 1 ... (4 levels per iteration, two
iterations per bootstrap). Measured (CPU, 2026-11-23): worst |w - w_twin| 3.4e-7 (2^-21.5) over
six iterations; ~1.3 s key generation, ~0.2 s per iteration, ~1.2 s per bootstrap.
"""

import numpy as np
import pytest
import torch

from apps.logreg.client import HELRClient
from apps.logreg.config import HELRConfig, HELRConfigError
from apps.logreg.dataset import EncryptedDataset
from apps.logreg.trainer import (EncryptedHELRTrainer, HELRTrainingError, ITERATION_DEPTH, bootstraps_after,
                                 layout_rotation_steps, read_checkpoint, required_galois_elements)
from apps.logreg.twin import design_matrix, train_helr
from fhe_core import rlwe, serialize
from fhe_core.errors import ParameterError, SerializationError
from ml.metrics import binary_report
from object_lifetime import assert_freed_when_dropped

TARGET = 2.0 ** -10        # the per-iteration bound
EXPECTED = 2.0 ** -18      # what this run must keep (measured 2^-21.5): catches precision regressions
SAMPLES, TEST_SAMPLES, ITERATIONS = 40, 300, 6


@pytest.fixture(scope="module")
def tiny_run(helr_full):
    """Client, keys, dataset and a trainer run through the whole schedule, with the checkpoint
    and the decrypted state after every iteration."""
    x = design_matrix(helr_full.x_train[:SAMPLES], helr_full.levels)
    y = helr_full.y_train[:SAMPLES]
    config = HELRConfig.tiny(iterations=ITERATIONS)
    schedule = config.schedule(SAMPLES)
    x_test = design_matrix(helr_full.x_test[:TEST_SAMPLES], helr_full.levels)
    twin = train_helr(x, y, config.twin_config(), x_test, helr_full.y_test[:TEST_SAMPLES], schedule=schedule)
    client = HELRClient(config)
    keys = client.eval_keys()
    dataset = client.encrypt_dataset(x, y, schedule)
    trainer = EncryptedHELRTrainer(config, keys, dataset, schedule)
    history = []

    def record(iteration, t):
        history.append(dict(level=t.weights.level, bootstraps=t.bootstraps, checkpoint=t.checkpoint(),
                            w=client.decrypt_weights(t.weights), v=client.decrypt_weights(t.velocity)))

    assert trainer.run(on_iteration=record) == ITERATIONS
    return dict(config=config, client=client, keys=keys, dataset=dataset, schedule=schedule, twin=twin,
                trainer=trainer, history=history, x_test=x_test, y_test=helr_full.y_test[:TEST_SAMPLES])


def test_every_iteration_matches_the_twin(tiny_run):
    errors = []
    for state, record in zip(tiny_run["history"], tiny_run["twin"].records):
        errors.append(max(np.abs(state["w"] - record.w).max(), np.abs(state["v"] - record.v).max()))
    print("max |decrypted - twin| per iteration:", [f"2^{np.log2(e):.1f}" for e in errors])
    assert len(errors) == ITERATIONS
    assert max(errors) < TARGET and max(errors) < EXPECTED
    assert np.abs(tiny_run["twin"].records[-1].w).max() > 0.1  # the model moved: a real comparison


def test_levels_and_bootstraps_follow_the_account(tiny_run):
    top = tiny_run["config"].bootstrapping_parameters.output_level
    assert top == 9 and ITERATION_DEPTH == 4
    levels = [s["level"] for s in tiny_run["history"]]
    assert levels == [top - 4, top - 8] * (ITERATIONS // 2)
    assert [s["bootstraps"] for s in tiny_run["history"]] == [0, 0, 1, 1, 2, 2]
    assert [bootstraps_after(tiny_run["config"], i) for i in range(1, ITERATIONS + 1)] == [0, 0, 1, 1, 2, 2]


def test_the_client_gets_w_at_level_0_with_the_same_decryption(tiny_run):
    """w and v dropped to level 0 (one prime instead of up to ten): bit-identical decryptions, a
    fraction of the bytes; the resume checkpoint keeps the levels, the client's is smaller."""
    run = tiny_run
    trainer, client = run["trainer"], run["client"]
    w = trainer.for_client(trainer.weights)
    assert w.level == 0 < trainer.weights.level and w.scale == trainer.weights.scale
    np.testing.assert_array_equal(client.decrypt_weights(w), run["history"][-1]["w"])
    assert serialize.peek(serialize.dumps(w)).metadata["shape"] == [2, 1, trainer.params.n]
    assert len(serialize.dumps(w)) < len(serialize.dumps(trainer.weights))
    iteration, w_ct, v_ct = read_checkpoint(trainer.client_checkpoint(), trainer.params)
    assert iteration == ITERATIONS and w_ct.level == v_ct.level == 0
    np.testing.assert_array_equal(client.decrypt_weights(v_ct), run["history"][-1]["v"])
    assert len(trainer.client_checkpoint()) < len(trainer.checkpoint())


def test_decrypted_model_scores_like_the_twin(tiny_run):
    w = tiny_run["history"][-1]["w"]
    ours = binary_report(tiny_run["y_test"], tiny_run["x_test"] @ w)
    twin = tiny_run["twin"].records[-1]
    assert abs(ours.accuracy - twin.test_accuracy) <= 1 / TEST_SAMPLES
    assert abs(ours.auroc - twin.test_auroc) < 1e-3


def test_encrypted_scoring_matches_the_decrypted_model(tiny_run):
    run = tiny_run
    x = run["x_test"][:50]
    scored = run["trainer"].score(run["client"].encrypt_features(x))
    assert len(scored) == 13 and scored[0].level == run["trainer"].weights.level - 1
    margins = run["client"].decrypt_margins(scored, 50)
    np.testing.assert_allclose(margins, x @ run["history"][-1]["w"], atol=2.0 ** -15)
    twin_margins = x @ run["twin"].records[-1].w
    clear = np.abs(twin_margins) > 2.0 ** -10   # the predictions agree wherever the sign is not a tie
    assert clear.sum() > 40 and ((margins > 0) == (twin_margins > 0))[clear].all()
    with pytest.raises(HELRTrainingError, match="score"):
        run["trainer"].score([run["trainer"].weights.replace(slots=512)])


def test_checkpoint_resumes_bit_for_bit(tiny_run):
    run = tiny_run
    middle = run["history"][2]["checkpoint"]   # after 3 iterations (w, v at level 5, one bootstrap done)
    iteration, w, v = read_checkpoint(middle, run["trainer"].params)
    assert iteration == 3 and w.level == 5
    resumed = EncryptedHELRTrainer.resume(run["config"], run["keys"], run["dataset"], run["schedule"], middle)
    assert resumed.bootstraps == 1
    assert resumed.run() == ITERATIONS - 3 and resumed.bootstraps == run["trainer"].bootstraps
    assert torch.equal(resumed.weights.data, run["trainer"].weights.data)
    assert torch.equal(resumed.velocity.data, run["trainer"].velocity.data)
    assert resumed.weights.scale == run["trainer"].weights.scale
    it, w_dec, v_dec = run["client"].decrypt_checkpoint(middle)
    assert it == 3
    np.testing.assert_array_equal(w_dec, run["history"][2]["w"])
    np.testing.assert_array_equal(v_dec, run["history"][2]["v"])
    with pytest.raises(SerializationError):
        read_checkpoint(b"HELRCKPX" + middle[8:], run["trainer"].params)
    with pytest.raises(HELRTrainingError, match="all done"):
        run["trainer"].step()


def test_run_stops_when_the_callback_says_so(tiny_run):
    run = tiny_run
    trainer = EncryptedHELRTrainer(run["config"], run["keys"], run["dataset"], run["schedule"])
    assert trainer.run(on_iteration=lambda i, t: False) == 1 and trainer.iteration == 1
    trainer.cancel()
    assert trainer.run(1) == 1  # run() clears an old cancel request, then runs


def test_a_dropped_trainer_is_freed_at_once(tiny_run):
    """No reference cycle: on a GPU a trainer holds its graphs' memory pools (GBs), which must go with it,
    not at some later garbage collection."""
    run = tiny_run

    def trained():
        trainer = EncryptedHELRTrainer(run["config"], run["keys"], run["dataset"], run["schedule"])
        trainer.run(3)  # a bootstrap included
        return trainer

    assert_freed_when_dropped(trained)


def test_key_set_is_exactly_what_training_needs(tiny_run):
    run = tiny_run
    params = run["trainer"].params
    keys = run["keys"]
    assert keys.has_relin and keys.galois_elements == frozenset(required_galois_elements(run["config"], params))
    # features: stride rows = 4, 8 steps; samples: 1, 2 and -1, -2
    assert layout_rotation_steps(run["config"]) == [4, 8, 16, 32, 64, 128, 256, 512, 1, 2, -1, -2]
    elements = sorted(keys.galois_elements)
    short = rlwe.EvalKeySet(keys.params_id, relin=keys.relin_key("test"),
                            galois=[keys.galois_key(k, "test") for k in elements[1:]])
    with pytest.raises(HELRTrainingError, match=str(elements[0])):
        EncryptedHELRTrainer(run["config"], short, run["dataset"], run["schedule"])


def test_dataset_round_trips_through_bytes(tiny_run):
    run = tiny_run
    blob = run["dataset"].to_bytes()
    back = EncryptedDataset.from_bytes(blob, run["trainer"].params)
    assert (back.samples, back.features, back.batch_size, back.n_blocks) == (SAMPLES, 197, 16, 3)
    assert [len(b) for b in back.blocks] == [4, 4, 4]
    for a, b in zip(back.ciphertexts, run["dataset"].ciphertexts):
        assert torch.equal(a.data, b.data) and (a.scale, a.slots, a.level) == (b.scale, b.slots, b.level)
    with pytest.raises(SerializationError):
        EncryptedDataset.from_bytes(blob[:-1], run["trainer"].params)
    with pytest.raises(SerializationError, match="magic"):
        EncryptedDataset.from_bytes(b"X" + blob[1:], run["trainer"].params)


def test_bad_inputs_are_refused(tiny_run):
    client, run = tiny_run["client"], tiny_run
    x = np.zeros((8, 197))
    with pytest.raises(ParameterError, match="labels"):
        client.encrypt_dataset(x, np.full(8, 2))
    with pytest.raises(ParameterError, match=r"\[-1, 1\]"):
        client.encrypt_dataset(x + 8.0, np.zeros(8, dtype=int))
    with pytest.raises(ParameterError, match="schedule"):
        client.encrypt_dataset(x, np.zeros(8, dtype=int), run["schedule"])
    wrong = HELRConfig.tiny(iterations=ITERATIONS, batch_size=8)
    with pytest.raises(HELRTrainingError, match="schedule"):
        EncryptedHELRTrainer(wrong, run["keys"], run["dataset"], wrong.schedule(SAMPLES))


def test_config_json_round_trip_and_validation():
    config = HELRConfig.tiny(iterations=7, seed=3, block_order="shuffle")
    assert HELRConfig.from_json(config.to_json()) == config
    assert config.rows_per_ciphertext == 4 and config.ciphertexts_per_batch == 4
    secure = HELRConfig.secure()
    assert (secure.rows_per_ciphertext, secure.ciphertexts_per_batch, secure.allow_insecure) == (128, 8, False)
    assert secure.twin_config().batch_size == 1024
    for bad in (dict(bootstrapping="TINY_N11_HELR"), dict(bootstrapping="nope"), dict(columns=200),
                dict(columns=1 << 16), dict(batch_size=0), dict(learning_rate=-1.0), dict(block_order="random")):
        with pytest.raises(HELRConfigError):
            HELRConfig(**bad)
    with pytest.raises(HELRConfigError, match="fields"):
        HELRConfig.from_json('{"bootstrapping": "N16_H192_FULL", "extra": 1}')
    with pytest.raises(HELRConfigError, match="JSON"):
        HELRConfig.from_json("{")
