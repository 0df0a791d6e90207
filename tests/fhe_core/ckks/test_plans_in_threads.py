"""Two evaluators of one parameter set with different kernel plans (the default and the reference), used from two
threads at once: each thread's results equal, bit for bit, what either plan computes alone. Nothing of a plan is
process state (the old ops.kernel_variant switch was a process-wide array that the request threads and the job
worker read at once). On the CPU the plans differ in their compositions (ModUp in one launch, the inner product's
op, the fused circuit: rescale in the NTT's store, linear combinations and the linear transform's batched passes);
on CUDA in every kernel as well."""
import threading

import pytest
import torch

from fhe_core import ckks, rlwe
from fhe_core.ckks import LinearTransform
from fhe_core.params import preset
from fhe_reference import DEVICES, fresh_rng
from plan_cases import REFERENCE, TUNED

ROUNDS = 3


def _setup(device: str):
    params = preset("N12QP483L6D3Insecure", allow_insecure=True, device=device)
    rng, _ = fresh_rng()
    ctx = ckks.rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx)
    diagonals = {k: rng.uniform(-1, 1, 64) for k in (0, 1, 5, 9, 17, 33)}
    transform = LinearTransform(params, diagonals, baby_step=4)
    elements = sorted(set(transform.galois_elements()) | set(ckks.galois_elements(params.n, [1])))
    keys = rlwe.gen_eval_keys(ctx, sk, elements)
    encoder, encryptor = ckks.Encoder(params), ckks.Encryptor(params, sk)
    z = rng.uniform(-1, 1, 64) + 1j * rng.uniform(-1, 1, 64)
    a, b = (encryptor.encrypt(encoder.encode(v, slots=64)) for v in (z, z[::-1].copy()))
    return params, keys, transform, a, b


def _work(ev: ckks.Evaluator, transform: LinearTransform, a, b) -> list[torch.Tensor]:
    """A product with its relinearization and rescale, a rotation, a linear combination and a linear transform."""
    product = ev.rescale(ev.mul_relin(a, b))
    combined = ev.linear_combination([(a, 0.5, 2.0 ** 20, 1), (b, 2.0, 2.0 ** 20, -1)], a.level)
    return [product.data, ev.rotate(a, 1).data, combined.data, transform.evaluate(ev, a).data]


def _in_threads(jobs) -> list:
    """Each job run ROUNDS times in its own thread, all threads started together; the results of every round."""
    barrier = threading.Barrier(len(jobs))
    results, errors = [[] for _ in jobs], []

    def run(i, job):
        try:
            barrier.wait()
            for _ in range(ROUNDS):
                results[i].append(job())
        except BaseException as exc:  # (re-raised in the main thread)
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, job)) for i, job in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


@pytest.mark.parametrize("device", DEVICES)
def test_two_plans_in_two_threads_give_the_reference_words(device):
    params, keys, transform, a, b = _setup(device)
    plans = {"default": TUNED, "reference": REFERENCE}  # (TUNED as it runs on the device: KernelPlan.on)
    evaluators = {name: ckks.Evaluator(params, keys, plan=plan) for name, plan in plans.items()}
    assert evaluators["default"].plan != evaluators["reference"].plan
    expected = _work(evaluators["reference"], transform, a, b)
    alone = _work(evaluators["default"], transform, a, b)
    for x, y in zip(alone, expected):
        assert torch.equal(x, y)
    results = _in_threads([lambda ev=ev: _work(ev, transform, a, b) for ev in evaluators.values()])
    for name, rounds in zip(evaluators, results):
        for r, got in enumerate(rounds):
            for i, (x, y) in enumerate(zip(got, expected)):
                assert torch.equal(x, y), (name, r, i)
