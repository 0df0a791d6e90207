"""HMult's tensor product inside the relinearization's key switch (keyswitch._relinearize_product, ops.kernel_variant
"tensor_fuse") == the tensor product followed by keyswitch._relinearize, bit for bit: on the CPU (where the fused
composition runs the unfused ops) and on CUDA for every variant, at alpha = 11 / dnum = 3 like N16QP1766L30D3 (three
full digits, a last digit shorter than alpha, one short digit) and at alpha = 5."""
import pytest
import torch

from fhe_core import ops, rlwe
from fhe_core.rlwe import keyswitch
from fhe_reference import fresh_rng, random_residues
from rlwe_helpers import Shape, context, fixed_seed

# N16QP1766L30D3's chain at N = 2^10: 31 primes of Q, alpha = 11 special primes (dnum = 3 at the top)
ALPHA_11 = Shape(10, (60,) + (40,) * 30, (46,) * 11)
# alpha = 5 with 50- and 60-bit primes (the lazy forward's and Harvey's epilogue bounds)
ALPHA_5 = Shape(10, (50,) * 12, (60,) * 5)
LEVELS = {ALPHA_11: (30, 24, 5), ALPHA_5: (11, 7)}


def _operands(ctx, level, rng):
    """Two degree-1 operands' data at ``level`` ([2, l+1, N], NTT domain), q - 1 in their first columns."""
    moduli = ctx.q_at(level).moduli.cpu()
    a, b = (random_residues(rng, ctx.q_at(level).primes, (2,), ctx.n) for _ in range(2))
    for x in (a, b):
        x[:, :, :16] = moduli[:, :1] - 1
    return a.to(ctx.device), b.to(ctx.device)


def _relinearized(ctx, a, b, key, level):
    """What ckks.Evaluator.mul_relin runs: the fused composition where keyswitch says so, else the tensor product's
    three rows and the relinearization."""
    if keyswitch._tensor_in_key_switch(ctx):
        return keyswitch._relinearize_product(ctx, a, b, key, level).cpu()
    degree2 = rlwe.Ciphertext(data=ops.tensor_product(a, b, ctx.q_at(level).moduli), level=level,
                              params_id=ctx.params_id)
    return keyswitch._relinearize(ctx, degree2, key, level).data.cpu()


def _keys(ctx):
    sk = rlwe.gen_secret_key(ctx, seed=fixed_seed("tensor/sk"))
    return rlwe.gen_eval_keys(ctx, sk, [], seed=fixed_seed("tensor/evk")).relin_key("test")


@pytest.mark.parametrize("shape", [ALPHA_11, ALPHA_5], ids=lambda s: s.id)
def test_relinearize_product_is_bit_identical_on_cpu(shape):
    """The fused composition (forced on the CPU, where its ops run unfused) == tensor product + relinearize, for
    both ModUp compositions."""
    rng, _ = fresh_rng()
    ctx = context(shape)
    key = _keys(ctx)
    for level in LEVELS[shape]:
        a, b = _operands(ctx, level, rng)
        with ops.use_kernel_variant("tensor_fuse", 0):
            expected = _relinearized(ctx, a, b, key, level)
        for mod_up in (1, 0):
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(keyswitch, "_mod_up_all_digits_at_once", lambda ctx, on=mod_up == 1: on)
                got = keyswitch._relinearize_product(ctx, a, b, key, level)
            assert torch.equal(got, expected), (level, mod_up)


def test_tensor_is_fused_only_on_cuda_with_the_fused_mod_up_and_mod_down():
    ctx = context(ALPHA_5)
    assert not keyswitch._tensor_in_key_switch(ctx)  # the CPU keeps tensor_product (its ModUp per digit)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keyswitch, "_mod_up_all_digits_at_once", lambda ctx: True)
        assert keyswitch._tensor_in_key_switch(ctx)
        for name in ("tensor_fuse", "mod_down"):
            with ops.use_kernel_variant(name, 0):
                assert not keyswitch._tensor_in_key_switch(ctx), name


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [ALPHA_11, ALPHA_5], ids=lambda s: s.id)
def test_relinearize_product_is_bit_identical_on_cuda(shape):
    """On CUDA, tensor_fuse 1 and 0 on NTT variants 6, 5, 3 (the inverse unfused) and 0 (both unfused) == the CPU's
    tensor product + relinearize, bit for bit."""
    rng, _ = fresh_rng()
    cpu, gpu = context(shape), context(shape, "cuda")
    key, key_gpu = _keys(cpu), _keys(gpu)
    for level in LEVELS[shape]:
        a, b = _operands(cpu, level, rng)
        with ops.use_kernel_variant("tensor_fuse", 0):
            expected = _relinearized(cpu, a, b, key, level)
        a_gpu, b_gpu = a.cuda(), b.cuda()
        for ntt in (6, 5, 3, 0):
            for variant in (1, 0):
                with ops.use_kernel_variant("ntt", ntt), ops.use_kernel_variant("tensor_fuse", variant):
                    assert keyswitch._tensor_in_key_switch(gpu) == (variant > 0)
                    got = _relinearized(gpu, a_gpu, b_gpu, key_gpu, level)
                assert torch.equal(got, expected), (level, ntt, variant)
