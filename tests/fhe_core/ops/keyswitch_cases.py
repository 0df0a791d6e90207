"""For the tests that check the kernel plans against the CPU bit for bit (test_pdl, test_fp64_ntt): key switches at
the benchmark's shape (N = 2^16, L = 30, dnum = 3) on both devices: HMult + relin and HRotate at three levels, the
CPU's results, an evaluator per plan, eager and CUDA-graph runs."""
import torch

from fhe_core import ckks, rlwe
from fhe_core.params import preset
from fhe_reference import fresh_rng
from plan_cases import KERNEL_PLANS


def seed(label: str) -> bytes:
    return label.encode().ljust(32, b"\0")  # a fixed seed (tests only): the same keys on both devices


def fixed_seed_keys(params, elements, label: str):
    """(secret key, evaluation keys) from fixed seeds: the same on both devices."""
    ctx = ckks.rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx, seed=seed(f"{label}/sk"))
    return sk, rlwe.gen_eval_keys(ctx, sk, elements, seed=seed(f"{label}/evk"))


def extreme(params, ct):
    """ct with q_i - 1 in every word."""
    q = torch.tensor(params.q_primes[:ct.level + 1], dtype=torch.int64, device=ct.data.device) - 1
    return ct.replace(data=q.view(1, -1, 1).expand_as(ct.data).contiguous())


def key_switch_ops(ev, inputs):
    """HMult + relin and HRotate (by 1 and by -1) on each (a, b, q - 1 words at a's level): the top level (3 digits
    of 11, 11, 9 primes at N16QP1766L30D3), a level with a short last digit (2 digits: 11, 10) and one digit."""
    out = []
    for a, b, top in inputs:
        out += [ev.mul_relin(a, b), ev.rotate(a, 1), ev.rotate(b, -1), ev.mul_relin(top, b), ev.rotate(top, 1)]
    return [ct.data for ct in out]


def n16_key_switch_case(label: str):
    """({plan name: CUDA evaluator}, CUDA inputs, the CPU's key_switch_ops results) at N16QP1766L30D3, one evaluator
    per plan of KERNEL_PLANS (the plan of a whole context: every composition on but for the reference); the caller
    sets FHE_CORE_TEST_SEEDS (fixed-seed keys on a 128-bit preset)."""
    steps = [1, -1]
    cpu = preset("N16QP1766L30D3", device="cpu")
    gpu = preset("N16QP1766L30D3", device="cuda")
    sk, keys = fixed_seed_keys(cpu, ckks.galois_elements(cpu.n, steps), label)
    keys_gpu = fixed_seed_keys(gpu, ckks.galois_elements(gpu.n, steps), label)[1]
    encoder, encryptor = ckks.Encoder(cpu), ckks.Encryptor(cpu, sk)
    rng, _ = fresh_rng()
    inputs = []
    for level in (cpu.max_level, 20, 5):
        z = rng.uniform(-1, 1, cpu.slots) + 1j * rng.uniform(-1, 1, cpu.slots)
        a, b = (encryptor.encrypt(encoder.encode(v, level=level)) for v in (z, z[::-1].copy()))
        inputs.append((a, b, extreme(cpu, a)))
    expected = key_switch_ops(ckks.Evaluator(cpu, keys), inputs)
    inputs_gpu = [tuple(ct.replace(data=ct.data.cuda()) for ct in triple) for triple in inputs]
    evaluators = {name: ckks.Evaluator(gpu, keys_gpu, plan=plan) for name, plan in KERNEL_PLANS.items()}
    return evaluators, inputs_gpu, expected


def graphed(fn):
    """fn() captured in a CUDA graph (after one eager warm-up call, as scripts/bench.py), replayed twice."""
    fn()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        captured = fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph.replay()
    graph.replay()
    torch.cuda.synchronize()
    return [t.clone() for t in captured]


def assert_same(got, expected, label):
    assert len(got) == len(expected)
    for i, (x, y) in enumerate(zip(got, expected)):
        assert torch.equal(x.cpu(), y.cpu()), (label, i)
