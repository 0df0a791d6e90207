"""The iDASH 2020 workload encrypted (Magara's encoding): scores equal the integer twin's, 81/99.

CI runs 20 samples on a tiny insecure ring; the full 99 and the reference's 258 samples at the
128-bit preset are `slow` on the CPU and `gpu` on a device.
"""
import numpy as np
import pytest
import torch

from apps.xgboost.client import ForestClient, IdashSamples
from apps.xgboost.idash import evaluate_idash
from apps.xgboost.plan import MARGIN_BITS, ForestPlan, IdashModel, PublicModel, named_params
from apps.xgboost.server import ForestEvaluator
from data.idash import load_idash


def repeated(workload, n):
    """The 99 samples repeated up to n (as the reference's 258-sample run)."""
    reps = -(-n // len(workload.labels))
    return (IdashSamples(np.concatenate([workload.x0] * reps)[:n], np.concatenate([workload.x2] * reps)[:n]),
            np.concatenate([workload.labels] * reps)[:n], reps)


def run_idash(idash_dir, n, preset, device="cpu", allow_insecure=False):
    workload = load_idash(idash_dir)
    samples, labels, reps = repeated(workload, n)
    model = IdashModel.from_workload(workload)
    params = named_params(preset, allow_insecure=allow_insecure, device=device)
    plan = ForestPlan.build(model, params, width=n)
    client = ForestClient(PublicModel.from_json(plan.public_model(preset).to_json()), device=device,
                          allow_insecure=allow_insecure)
    server = ForestEvaluator(params, client.eval_keys(), model, plan=plan)
    results = server.evaluate(client.encrypt(samples))
    scores = client.decrypt_scores(results, n)
    twin = np.concatenate([evaluate_idash(workload).scores] * reps)[:n]
    np.testing.assert_array_equal(scores, twin)
    budget = min(client.noise_budget(ct) for ct in results)
    assert budget >= plan.answer_budget >= MARGIN_BITS  # after the switch down to plan.answer_level
    return scores, labels, plan


def test_idash_subset_exact(idash_dir):
    _, _, plan = run_idash(idash_dir, 20, "BFVN11QP335L4D5T20Insecure", allow_insecure=True)
    assert plan.layout.blocks == 4 and plan.fold_mask  # 8 trees per class and group, a block fold
    assert plan.n_groups == 16 and plan.n_inputs == 16 * 6


def test_idash_stacked_equals_per_group(idash_dir):
    workload = load_idash(idash_dir)
    samples, _, reps = repeated(workload, 90)  # one block per row: 64 groups
    model = IdashModel.from_workload(workload)
    params = named_params("BFVN11QP335L4D5T20Insecure", allow_insecure=True)
    plan = ForestPlan.build(model, params, width=90)
    client = ForestClient(plan.public_model(), seed=b"s" * 32, allow_insecure=True)
    keys, cts = client.eval_keys(), client.encrypt(samples)
    stacked = ForestEvaluator(params, keys, model, plan=plan).evaluate(cts)
    per_group = ForestEvaluator(params, keys, model, plan=plan, stacked=False).evaluate(cts)
    assert plan.n_groups == 64 and stacked[0].data.equal(per_group[0].data)
    twin = np.concatenate([evaluate_idash(workload).scores] * reps)[:90]
    np.testing.assert_array_equal(client.decrypt_scores(stacked, 90), twin)


@pytest.mark.slow
@pytest.mark.parametrize("n", [99, 258])
def test_idash_full_128_bit(idash_dir, n):
    scores, labels, plan = run_idash(idash_dir, n, "BFVN13QP218L3D4T20")
    assert (scores[:99].argmax(axis=1) == labels[:99]).sum() == 81
    assert plan.ops["multiply"] == plan.n_groups and plan.n_groups == (64 if n == 258 else 22)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [99, 258])
def test_idash_full_gpu(idash_dir, n):
    scores, labels, _ = run_idash(idash_dir, n, "BFVN13QP218L3D4T20", device="cuda")
    assert (scores[:99].argmax(axis=1) == labels[:99]).sum() == 81


@pytest.mark.gpu
def test_idash_cpu_and_cuda_bit_identical(idash_dir):
    """Fixed seeds: the CPU and CUDA result ciphertexts are the same words."""
    workload = load_idash(idash_dir)
    samples, _, _ = repeated(workload, 30)
    model = IdashModel.from_workload(workload)
    results = []
    for device in ("cpu", "cuda"):
        params = named_params("BFVN11QP335L4D5T20Insecure", allow_insecure=True, device=device)
        plan = ForestPlan.build(model, params, width=30)
        client = ForestClient(plan.public_model(), device=device, seed=b"i" * 32, allow_insecure=True)
        server = ForestEvaluator(params, client.eval_keys(), model, plan=plan)
        results.append(server.evaluate(client.encrypt(samples))[0].data.cpu())
    assert torch.equal(results[0], results[1])
