"""The bootstrapping circuit with its fused passes (KernelPlan.fused_circuit: the baby steps' inner products in one
launch, the giant steps' products in one pass and their ModDowns batched, one linear-combination pass per polynomial
leaf and Chebyshev step, the pair's one-launch tensor product and relinearization reading the key once, CtS writing
the EvalMod pair, rescale in the NTT's store) against the composed ops (the reference plan's), bit for bit: bootstrap
and bootstrap_pair on the tiny presets (CPU), and on CUDA (gpu marker) eager and graphed."""
import pytest
import torch

from fhe_core import ckks, rlwe
from fhe_core.ckks.bootstrapping import (TINY_N10_FULL, TINY_N10_SLIM, TINY_N10_SPARSE, Bootstrapper,
                                         bootstrapping_galois_elements)
from fhe_reference import fresh_rng

PRESETS = {"full": TINY_N10_FULL, "sparse": TINY_N10_SPARSE, "slim": TINY_N10_SLIM}


def _setup(bparams, device):
    """(the composed ops' Bootstrapper, the fused circuit's (the default plan), an encryption function)."""
    params = bparams.params(device=device, allow_insecure=True)
    ctx = ckks.rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx)
    keys = rlwe.gen_eval_keys(ctx, sk, bootstrapping_galois_elements(params, bparams))
    fused = Bootstrapper(params, bparams, keys)
    composed = Bootstrapper(params, bparams, keys, plan=fused.evaluator.plan.replace(fused_circuit=False))
    assert fused.evaluator.plan.fused_circuit
    rng, _ = fresh_rng()
    encryptor, encoder = ckks.Encryptor(params, sk), ckks.Encoder(params)

    def encrypt():
        z = rng.uniform(-1, 1, bparams.slots) + 1j * rng.uniform(-1, 1, bparams.slots)
        return encryptor.encrypt(encoder.encode(z, level=fused.min_input_level, slots=bparams.slots))
    return composed, fused, encrypt


def _assert_same(a, *others):
    for b in others:
        assert torch.equal(a.data, b.data)
        assert (a.level, a.scale, a.slots) == (b.level, b.scale, b.slots)


@pytest.mark.parametrize("name", list(PRESETS))
def test_fused_bootstrap_equals_the_composed_one(name):
    composed, fused, encrypt = _setup(PRESETS[name], "cpu")
    ct = encrypt()
    _assert_same(composed.bootstrap(ct), fused.bootstrap(ct))
    if name == "full":
        b = encrypt()
        for x, y in zip(composed.bootstrap_pair(ct, b), fused.bootstrap_pair(ct, b)):
            _assert_same(x, y)


def test_fused_single_hoisted_lintrans_is_unchanged():
    """Single-hoisted linear transforms (their fused multiply-accumulate against mul/mul_add): the same."""
    composed, fused, encrypt = _setup(TINY_N10_SPARSE, "cpu")
    composed.double_hoisting = fused.double_hoisting = False
    ct = encrypt()
    _assert_same(composed.bootstrap(ct), fused.bootstrap(ct))


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["full", "sparse"])
def test_fused_bootstrap_on_cuda_equals_the_composed_one_eager_and_graphed(name):
    composed, fused, encrypt = _setup(PRESETS[name], "cuda")
    ct = encrypt()
    result = fused.bootstrap(ct)
    assert torch.equal(result.data, composed.bootstrap(ct).data)
    replayed = fused.graphed().bootstrap(ct)
    assert torch.equal(replayed.data, result.data)


def test_coeffs_to_slots_writes_the_pair_that_eval_mod_reads():
    """With the fused passes the real and imaginary parts are the two halves of one pair tensor, which
    CiphertextPair.of wraps without a copy; their residues are those of the composed ops."""
    from fhe_core.ckks.bootstrapping.pair import CiphertextPair

    composed_boot, fused_boot, encrypt = _setup(TINY_N10_FULL, "cpu")
    raised = fused_boot.mod_raise(encrypt())
    composed, fused = composed_boot.coeffs_to_slots(raised), fused_boot.coeffs_to_slots(raised)
    for a, b in zip(composed, fused):
        _assert_same(a, b)
    pair = CiphertextPair.of(*fused)
    assert pair.data.data_ptr() == fused[0].data.data_ptr() and torch.equal(pair.data[:, 1], fused[1].data)
    assert CiphertextPair.of(*composed).data.data_ptr() != composed[0].data.data_ptr()  # stacked: a copy
