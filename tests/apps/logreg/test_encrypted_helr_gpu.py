"""Encrypted HELR training at 128-bit security on the GPU (N16_H192_FULL: N = 2^16, h = 192,
2^15 slots = 128 rows of 256 columns, 9 levels after bootstrapping) on full MNIST 3 vs 8, batch
1024 (8 ciphertexts), against the plaintext twin at every iteration: decrypted w and v within 2^-10
of the twin's (the issue's target). Six iterations: two bootstraps of w + i v (before iterations 3 and 5).
And the tiny preset bit-identical on CPU (eager) and CUDA (graphed)."""
import time

import numpy as np
import pytest
import torch

from apps.logreg.client import HELRClient
from apps.logreg.config import HELRConfig
from apps.logreg.trainer import EncryptedHELRTrainer
from apps.logreg.twin import design_matrix, train_helr

TARGET = 2.0 ** -10
ITERATIONS = 6


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("preset", ["N16_H192_FULL"])
def test_secure_training_matches_the_twin_on_the_gpu(helr_full, preset):
    x = design_matrix(helr_full.x_train, helr_full.levels)
    y = helr_full.y_train
    config = HELRConfig.secure(bootstrapping=preset, iterations=ITERATIONS)
    schedule = config.schedule(len(x))
    twin = train_helr(x, y, config.twin_config(), schedule=schedule)

    start = time.perf_counter()
    client = HELRClient(config, device="cuda")
    keys = client.eval_keys()
    dataset = client.encrypt_dataset(x, y, schedule)
    torch.cuda.synchronize()
    print(f"keys and data: {time.perf_counter() - start:.1f} s, {len(keys.galois_elements)} Galois keys")

    trainer = EncryptedHELRTrainer(config, keys, dataset, schedule)
    errors, times = [], []

    def check(iteration, t):
        torch.cuda.synchronize()
        times.append(time.perf_counter())
        record = twin.records[iteration - 1]
        w, v = client.decrypt_weights(t.weights), client.decrypt_weights(t.velocity)
        errors.append(max(np.abs(w - record.w).max(), np.abs(v - record.v).max()))
        times.append(time.perf_counter())

    begin = time.perf_counter()
    assert trainer.run(on_iteration=check) == ITERATIONS
    steps = np.diff([begin] + times)[0::2]
    print("seconds per iteration:", np.round(steps, 3).tolist(), "bootstraps:", trainer.bootstraps)
    print("max |decrypted - twin| per iteration:", [f"2^{np.log2(e):.1f}" for e in errors])
    assert trainer.bootstraps == (ITERATIONS - 1) // 2
    assert max(errors) < TARGET


@pytest.mark.gpu
def test_tiny_training_is_bit_identical_on_cpu_and_cuda():
    """Fixed test seeds: the same keys, ciphertexts and seven iterations (three bootstraps) on both
    devices, compared word for word: on CUDA the iterations' two halves and the bootstrap are
    captured in CUDA graphs on first use and replayed after (each graph replayed at least twice)."""
    rng = np.random.default_rng(4)
    x = np.hstack([np.ones((24, 1)), rng.integers(0, 8, (24, 40)) / 8])
    y = (x[:, 1:5].sum(axis=1) > 2).astype(np.int64)
    config = HELRConfig.tiny(iterations=7)
    schedule = config.schedule(len(x))
    states = {}
    for device in ("cpu", "cuda"):
        client = HELRClient(config, device=device, seed=bytes(range(32)))
        trainer = EncryptedHELRTrainer(config, client.eval_keys(), client.encrypt_dataset(x, y, schedule), schedule)
        trainer.run()
        states[device] = (trainer.weights, trainer.velocity)
    for cpu, cuda in zip(states["cpu"], states["cuda"]):
        assert torch.equal(cpu.data, cuda.data.cpu()) and (cpu.scale, cpu.level) == (cuda.scale, cuda.level)
