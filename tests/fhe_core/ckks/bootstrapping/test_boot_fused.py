"""The bootstrapping circuit with its fused passes (ops.kernel_variant("fused") = 1: the linear
transforms' fused inner products, one linear-combination pass per polynomial leaf and Chebyshev step,
the pair's one-launch tensor product and relinearization, rescale in the NTT's store; 2, the default:
also the giant steps' products in one pass, the pair's key read once, CtS writing the EvalMod pair;
3, the default: also the baby steps in one launch)
against the composed ops (variant 0), bit for bit: bootstrap and bootstrap_pair on the tiny presets
(CPU), and on CUDA (gpu marker) eager and graphed."""
import pytest
import torch

from fhe_core import ckks, ops, rlwe
from fhe_core.ckks.bootstrapping import (TINY_N10_FULL, TINY_N10_SLIM, TINY_N10_SPARSE, Bootstrapper,
                                         bootstrapping_galois_elements)
from fhe_reference import fresh_rng

PRESETS = {"full": TINY_N10_FULL, "sparse": TINY_N10_SPARSE, "slim": TINY_N10_SLIM}


def _setup(bparams, device):
    params = bparams.params(device=device, allow_insecure=True)
    ctx = ckks.rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx)
    boot = Bootstrapper(params, bparams, rlwe.gen_eval_keys(ctx, sk, bootstrapping_galois_elements(params, bparams)))
    rng, _ = fresh_rng()
    encryptor, encoder = ckks.Encryptor(params, sk), ckks.Encoder(params)

    def encrypt():
        z = rng.uniform(-1, 1, bparams.slots) + 1j * rng.uniform(-1, 1, bparams.slots)
        return encryptor.encrypt(encoder.encode(z, level=boot.min_input_level, slots=bparams.slots))
    return boot, encrypt


VARIANTS = (0, 1, 2, 3)  # the composed ops; the fused passes of rounds 1, 2 and 3 (the default)


def _all_variants(fn):
    out = []
    for variant in VARIANTS:
        with ops.use_kernel_variant("fused", variant):
            out.append(fn())
    return out


def _assert_same(a, *others):
    for b in others:
        assert torch.equal(a.data, b.data)
        assert (a.level, a.scale, a.slots) == (b.level, b.scale, b.slots)


@pytest.mark.parametrize("name", list(PRESETS))
def test_fused_bootstrap_equals_the_composed_one(name):
    boot, encrypt = _setup(PRESETS[name], "cpu")
    ct = encrypt()
    _assert_same(*_all_variants(lambda: boot.bootstrap(ct)))
    if name == "full":
        b = encrypt()
        pairs = _all_variants(lambda: boot.bootstrap_pair(ct, b))
        _assert_same(*(p[0] for p in pairs))
        _assert_same(*(p[1] for p in pairs))


def test_fused_single_hoisted_lintrans_is_unchanged():
    """The single-hoisted path does not use the fused inner products; it still bootstraps the same."""
    boot, encrypt = _setup(TINY_N10_SPARSE, "cpu")
    boot.double_hoisting = False
    ct = encrypt()
    _assert_same(*_all_variants(lambda: boot.bootstrap(ct)))


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["full", "sparse"])
def test_fused_bootstrap_on_cuda_equals_the_composed_one_eager_and_graphed(name):
    """Each fused variant against the composed ops on its own (a fault names its variant)."""
    boot, encrypt = _setup(PRESETS[name], "cuda")
    ct = encrypt()
    results = _all_variants(lambda: boot.bootstrap(ct))
    for variant, result in zip(VARIANTS[1:], results[1:]):
        assert torch.equal(result.data, results[0].data), f"fused variant {variant}"
    replayed = boot.graphed().bootstrap(ct)  # captured with the default variant
    assert torch.equal(replayed.data, results[-1].data)


def test_coeffs_to_slots_writes_the_pair_that_eval_mod_reads():
    """With the fused passes the real and imaginary parts are the two halves of one pair tensor, which
    CiphertextPair.of wraps without a copy; their residues are those of the composed ops."""
    from fhe_core.ckks.bootstrapping.pair import CiphertextPair

    boot, encrypt = _setup(TINY_N10_FULL, "cpu")
    raised = boot.mod_raise(encrypt())
    composed, _, fused, _ = _all_variants(lambda: boot.coeffs_to_slots(raised))
    for a, b in zip(composed, fused):
        _assert_same(a, b)
    pair = CiphertextPair.of(*fused)
    assert pair.data.data_ptr() == fused[0].data.data_ptr() and torch.equal(pair.data[:, 1], fused[1].data)
    assert CiphertextPair.of(*composed).data.data_ptr() != composed[0].data.data_ptr()  # stacked: a copy
