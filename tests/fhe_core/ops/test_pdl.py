"""Programmatic dependent launch (ops.kernel_variant "pdl", cuda/launch.cuh): a kernel's blocks start in its
predecessor's last wave and wait (griddepcontrol.wait) before they touch its data. A schedule change only: the
residues of HMult + relin, HRotate and a bootstrap are the same with every pdl variant, eager and replayed from a CUDA
graph (torch's capture turns the launches into programmatic graph edges), and equal to the CPU's, bit for bit."""
import numpy as np
import pytest
import torch

from fhe_core import ckks, ops, rlwe
from fhe_core.ckks.bootstrapping import TINY_N10_SPARSE, Bootstrapper, bootstrapping_galois_elements
from fhe_core.params import preset
from fhe_reference import fresh_rng


# 0: plain launches; 1: programmatic launches, no early trigger; 2: and the element-wise / circuit kernels trigger
# their successor at their start
PDL_VARIANTS = (0, 1, 2)


def _seed(label: str) -> bytes:
    return label.encode().ljust(32, b"\0")  # a fixed seed (tests only): the same keys on both devices


def test_pdl_variant_is_read_set_and_restored():
    before = ops.kernel_variant("pdl")
    assert before in PDL_VARIANTS
    for other in PDL_VARIANTS:
        with ops.use_kernel_variant("pdl", other):
            assert ops.kernel_variant("pdl") == other
        assert ops.kernel_variant("pdl") == before
    with pytest.raises(RuntimeError, match=r"pdl is 0 \(reference\) to 2, got 3"):
        ops.kernel_variant("pdl", 3)


def _keys(params, elements):
    ctx = ckks.rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx, seed=_seed("pdl/sk"))
    return sk, rlwe.gen_eval_keys(ctx, sk, elements, seed=_seed("pdl/evk"))


def _extreme(params, ct):
    """ct with q_i - 1 in every word."""
    q = torch.tensor(params.q_primes[:ct.level + 1], dtype=torch.int64, device=ct.data.device) - 1
    return ct.replace(data=q.view(1, -1, 1).expand_as(ct.data).contiguous())


def _key_switch_ops(ev, inputs):
    """HMult + relin and HRotate (by 1 and by -1) on each (a, b, q - 1 words at a's level): the top level (3 digits
    of 11, 11, 9 primes at N16QP1766L30D3), a level with a short last digit (2 digits: 11, 10) and one digit."""
    out = []
    for a, b, top in inputs:
        out += [ev.mul_relin(a, b), ev.rotate(a, 1), ev.rotate(b, -1), ev.mul_relin(top, b), ev.rotate(top, 1)]
    return [ct.data for ct in out]


def _graphed(fn):
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


def _assert_same(got, expected, label):
    assert len(got) == len(expected)
    for i, (x, y) in enumerate(zip(got, expected)):
        assert torch.equal(x.cpu(), y.cpu()), (label, i)


@pytest.mark.gpu
def test_pdl_key_switches_match_plain_launches_graphs_and_the_cpu(monkeypatch):
    """At N = 2^16, L = 30, dnum = 3 (the benchmark's shape): every pdl variant, eager and graphed, == the CPU."""
    monkeypatch.setenv("FHE_CORE_TEST_SEEDS", "1")  # fixed-seed keys on a 128-bit preset: the same on both devices
    steps = [1, -1]
    cpu = preset("N16QP1766L30D3", device="cpu")
    gpu = preset("N16QP1766L30D3", device="cuda")
    sk, keys = _keys(cpu, ckks.galois_elements(cpu.n, steps))
    keys_gpu = _keys(gpu, ckks.galois_elements(gpu.n, steps))[1]
    encoder, encryptor = ckks.Encoder(cpu), ckks.Encryptor(cpu, sk)
    rng, _ = fresh_rng()
    inputs = []
    for level in (cpu.max_level, 20, 5):
        z = rng.uniform(-1, 1, cpu.slots) + 1j * rng.uniform(-1, 1, cpu.slots)
        a, b = (encryptor.encrypt(encoder.encode(v, level=level)) for v in (z, z[::-1].copy()))
        inputs.append((a, b, _extreme(cpu, a)))
    expected = _key_switch_ops(ckks.Evaluator(cpu, keys), inputs)
    ev = ckks.Evaluator(gpu, keys_gpu)
    inputs_gpu = [tuple(ct.replace(data=ct.data.cuda()) for ct in triple) for triple in inputs]
    for pdl in PDL_VARIANTS:
        with ops.use_kernel_variant("pdl", pdl):
            _assert_same(_key_switch_ops(ev, inputs_gpu), expected, ("eager", pdl))
            _assert_same(_graphed(lambda: _key_switch_ops(ev, inputs_gpu)), expected, ("graphed", pdl))
    for ks_fuse, tensor_fuse in ((0, 1), (5, 0)):  # the separate inner-product and tensor-product kernels
        with ops.use_kernel_variant("pdl", 2), ops.use_kernel_variant("ks_fuse", ks_fuse), \
                ops.use_kernel_variant("tensor_fuse", tensor_fuse):
            _assert_same(_key_switch_ops(ev, inputs_gpu), expected, ("ks_fuse", ks_fuse, tensor_fuse))


@pytest.mark.gpu
def test_pdl_bootstrap_matches_plain_launches_graphs_and_the_cpu():
    """A bootstrap (TINY_N10_SPARSE: the NTT, Conv, inner-product, element-wise and fused circuit kernels) with every
    pdl variant, eager and through GraphedBootstrapper, == the CPU's bootstrap of the same ciphertext; precision
    kept."""
    bparams = TINY_N10_SPARSE
    cpu = bparams.params(device="cpu", allow_insecure=True)
    gpu = bparams.params(device="cuda", allow_insecure=True)
    sk, keys = _keys(cpu, bootstrapping_galois_elements(cpu, bparams))
    keys_gpu = _keys(gpu, bootstrapping_galois_elements(gpu, bparams))[1]
    boot_cpu = Bootstrapper(cpu, bparams, keys)
    boot = Bootstrapper(gpu, bparams, keys_gpu)
    rng, _ = fresh_rng()
    z = rng.uniform(-1, 1, bparams.slots) + 1j * rng.uniform(-1, 1, bparams.slots)
    encoder = ckks.Encoder(cpu)
    ct = ckks.Encryptor(cpu, sk).encrypt(encoder.encode(z, level=boot_cpu.min_input_level, slots=bparams.slots))
    expected = boot_cpu.bootstrap(ct)
    decoded = encoder.decode(ckks.Decryptor(cpu, sk).decrypt(expected))
    assert np.max(np.abs(decoded - z)) < 2.0 ** -18
    ct_gpu = ct.replace(data=ct.data.cuda())
    for pdl in PDL_VARIANTS:
        with ops.use_kernel_variant("pdl", pdl):
            graphed = boot.graphed()  # captured on its first call, with this pdl
            for label, out in (("eager", boot.bootstrap(ct_gpu)), ("graphed", graphed.bootstrap(ct_gpu)),
                               ("replayed", graphed.bootstrap(ct_gpu))):
                assert (out.level, out.scale) == (expected.level, expected.scale), (label, pdl)
                assert torch.equal(out.data.cpu(), expected.data), (label, pdl)
