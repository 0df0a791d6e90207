"""Programmatic dependent launch (cuda/launch.cuh; on compute capability 9.0 and later unless FHE_CORE_PDL=0): a
kernel's blocks start in its predecessor's last wave and wait (griddepcontrol.wait) before they touch its data. A
schedule change only: the residues of HMult + relin, HRotate and a bootstrap with every kernel plan (each a different
chain of kernels), eager and replayed from a CUDA graph (torch's capture turns the launches into programmatic graph
edges), equal the CPU's, bit for bit."""
import numpy as np
import pytest
import torch

from fhe_core import ckks
from fhe_core.ckks.bootstrapping import TINY_N10_SPARSE, Bootstrapper, bootstrapping_galois_elements
from fhe_reference import fresh_rng
from keyswitch_cases import assert_same, fixed_seed_keys, graphed, key_switch_ops, n16_key_switch_case
from plan_cases import KERNEL_PLANS


@pytest.mark.gpu
def test_pdl_key_switches_match_graphs_and_the_cpu(monkeypatch):
    """At N = 2^16, L = 30, dnum = 3 (the benchmark's shape): every plan, eager and graphed, == the CPU."""
    monkeypatch.setenv("FHE_CORE_TEST_SEEDS", "1")  # fixed-seed keys on a 128-bit preset: the same on both devices
    evaluators, inputs_gpu, expected = n16_key_switch_case("pdl")
    for name, ev in evaluators.items():
        assert_same(key_switch_ops(ev, inputs_gpu), expected, ("eager", name))
        assert_same(graphed(lambda: key_switch_ops(ev, inputs_gpu)), expected, ("graphed", name))  # noqa: B023


@pytest.mark.gpu
def test_pdl_bootstrap_matches_plain_launches_graphs_and_the_cpu():
    """A bootstrap (TINY_N10_SPARSE: the NTT, Conv, inner-product, element-wise and fused circuit kernels) with every
    plan, eager and through GraphedBootstrapper, == the CPU's bootstrap of the same ciphertext; precision kept."""
    bparams = TINY_N10_SPARSE
    cpu = bparams.params(device="cpu", allow_insecure=True)
    gpu = bparams.params(device="cuda", allow_insecure=True)
    sk, keys = fixed_seed_keys(cpu, bootstrapping_galois_elements(cpu, bparams), "pdl")
    keys_gpu = fixed_seed_keys(gpu, bootstrapping_galois_elements(gpu, bparams), "pdl")[1]
    boot_cpu = Bootstrapper(cpu, bparams, keys)
    rng, _ = fresh_rng()
    z = rng.uniform(-1, 1, bparams.slots) + 1j * rng.uniform(-1, 1, bparams.slots)
    encoder = ckks.Encoder(cpu)
    ct = ckks.Encryptor(cpu, sk).encrypt(encoder.encode(z, level=boot_cpu.min_input_level, slots=bparams.slots))
    expected = boot_cpu.bootstrap(ct)
    decoded = encoder.decode(ckks.Decryptor(cpu, sk).decrypt(expected))
    assert np.max(np.abs(decoded - z)) < 2.0 ** -18
    ct_gpu = ct.replace(data=ct.data.cuda())
    for name, plan in KERNEL_PLANS.items():
        boot = Bootstrapper(gpu, bparams, keys_gpu, plan=plan)
        graphed_boot = boot.graphed()  # captured on its first call
        for label, out in (("eager", boot.bootstrap(ct_gpu)), ("graphed", graphed_boot.bootstrap(ct_gpu)),
                           ("replayed", graphed_boot.bootstrap(ct_gpu))):
            assert (out.level, out.scale) == (expected.level, expected.scale), (label, name)
            assert torch.equal(out.data.cpu(), expected.data), (label, name)
