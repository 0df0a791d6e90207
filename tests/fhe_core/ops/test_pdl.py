"""Programmatic dependent launch (ops.kernel_variant "pdl", cuda/launch.cuh): a kernel's blocks start in its
predecessor's last wave and wait (griddepcontrol.wait) before they touch its data. A schedule change only: the
residues of HMult + relin, HRotate and a bootstrap are the same with every pdl variant, eager and replayed from a CUDA
graph (torch's capture turns the launches into programmatic graph edges), and equal to the CPU's, bit for bit."""
import numpy as np
import pytest
import torch

from fhe_core import ckks, ops
from fhe_core.ckks.bootstrapping import TINY_N10_SPARSE, Bootstrapper, bootstrapping_galois_elements
from fhe_reference import fresh_rng
from keyswitch_cases import (assert_same, assert_variant_switch, fixed_seed_keys, graphed, key_switch_ops,
                             n16_key_switch_case)


# 0: plain launches; 1: programmatic launches, no early trigger; 2: and the element-wise / circuit kernels trigger
# their successor at their start
PDL_VARIANTS = (0, 1, 2)


def test_pdl_variant_is_read_set_and_restored():
    assert_variant_switch("pdl", PDL_VARIANTS, default=2)


@pytest.mark.gpu
def test_pdl_key_switches_match_plain_launches_graphs_and_the_cpu(monkeypatch):
    """At N = 2^16, L = 30, dnum = 3 (the benchmark's shape): every pdl variant, eager and graphed, == the CPU."""
    monkeypatch.setenv("FHE_CORE_TEST_SEEDS", "1")  # fixed-seed keys on a 128-bit preset: the same on both devices
    ev, inputs_gpu, expected = n16_key_switch_case("pdl")
    for pdl in PDL_VARIANTS:
        with ops.use_kernel_variant("pdl", pdl):
            assert_same(key_switch_ops(ev, inputs_gpu), expected, ("eager", pdl))
            assert_same(graphed(lambda: key_switch_ops(ev, inputs_gpu)), expected, ("graphed", pdl))
    for ks_fuse, tensor_fuse in ((0, 1), (5, 0)):  # the separate inner-product and tensor-product kernels
        with ops.use_kernel_variant("pdl", 2), ops.use_kernel_variant("ks_fuse", ks_fuse), \
                ops.use_kernel_variant("tensor_fuse", tensor_fuse):
            assert_same(key_switch_ops(ev, inputs_gpu), expected, ("ks_fuse", ks_fuse, tensor_fuse))


@pytest.mark.gpu
def test_pdl_bootstrap_matches_plain_launches_graphs_and_the_cpu():
    """A bootstrap (TINY_N10_SPARSE: the NTT, Conv, inner-product, element-wise and fused circuit kernels) with every
    pdl variant, eager and through GraphedBootstrapper, == the CPU's bootstrap of the same ciphertext; precision
    kept."""
    bparams = TINY_N10_SPARSE
    cpu = bparams.params(device="cpu", allow_insecure=True)
    gpu = bparams.params(device="cuda", allow_insecure=True)
    sk, keys = fixed_seed_keys(cpu, bootstrapping_galois_elements(cpu, bparams), "pdl")
    keys_gpu = fixed_seed_keys(gpu, bootstrapping_galois_elements(gpu, bparams), "pdl")[1]
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
            graphed_boot = boot.graphed()  # captured on its first call, with this pdl
            for label, out in (("eager", boot.bootstrap(ct_gpu)), ("graphed", graphed_boot.bootstrap(ct_gpu)),
                               ("replayed", graphed_boot.bootstrap(ct_gpu))):
                assert (out.level, out.scale) == (expected.level, expected.scale), (label, pdl)
                assert torch.equal(out.data.cpu(), expected.data), (label, pdl)
