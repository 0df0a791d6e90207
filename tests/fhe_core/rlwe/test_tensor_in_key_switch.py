"""HMult's tensor product inside the relinearization's key switch (switching.relinearize_product where
KernelPlan.tensor_in_inner_product: ModUp's inverse NTT reads a1 and b1, the fused inner product adds the tensor
terms) == the tensor product followed by switching.relinearize, bit for bit: on the CPU (where the plan keeps the
tensor product's pass, in either ModUp composition) and on CUDA for every plan, at alpha = 11 / dnum = 3 like
N16QP1766L30D3 (three full digits, a last digit shorter than alpha, one short digit), at alpha = 5 and at alpha = 2
(6, 4 and 3 digits: beyond 4 the terms cannot go into the inner product's kernel)."""
import pytest
import torch

from fhe_core import ops, rlwe
from fhe_core.rlwe import switching
from fhe_reference import fresh_rng, random_residues
from plan_cases import KERNEL_PLANS, REFERENCE
from rlwe_helpers import Shape, context, fixed_seed

# N16QP1766L30D3's chain at N = 2^10: 31 primes of Q, alpha = 11 special primes (dnum = 3 at the top)
ALPHA_11 = Shape(10, (60,) + (40,) * 30, (46,) * 11)
# alpha = 5 with 50- and 60-bit primes (the lazy forward's and Harvey's epilogue bounds)
ALPHA_5 = Shape(10, (50,) * 12, (60,) * 5)
ALPHA_2 = Shape(10, (50,) * 12, (60,) * 2)
LEVELS = {ALPHA_11: (30, 24, 5), ALPHA_5: (11, 7), ALPHA_2: (11, 7, 4)}


def _operands(ctx, level, rng):
    """Two degree-1 operands' data at ``level`` ([2, l+1, N], NTT domain), q - 1 in their first columns."""
    moduli = ctx.q_at(level).moduli.cpu()
    a, b = (random_residues(rng, ctx.q_at(level).primes, (2,), ctx.n) for _ in range(2))
    for x in (a, b):
        x[:, :, :16] = moduli[:, :1] - 1
    return a.to(ctx.device), b.to(ctx.device)


def _separate(ctx, a, b, key, level):
    """The tensor product's three rows, then the relinearization."""
    degree2 = rlwe.Ciphertext(data=ops.tensor_product(a, b, ctx.q_at(level).moduli), level=level,
                              params_id=ctx.params_id)
    return switching.relinearize(ctx, degree2, key, level).data.cpu()


def _keys(ctx):
    sk = rlwe.gen_secret_key(ctx, seed=fixed_seed("tensor/sk"))
    return rlwe.gen_eval_keys(ctx, sk, [], seed=fixed_seed("tensor/evk")).relin_key("test")


@pytest.mark.parametrize("shape", [ALPHA_11, ALPHA_5], ids=lambda s: s.id)
def test_relinearize_product_is_bit_identical_on_cpu(shape):
    """relinearize_product == tensor product + relinearize, for both ModUp compositions."""
    rng, _ = fresh_rng()
    ctx = context(shape, plan=REFERENCE)
    key = _keys(ctx)
    for level in LEVELS[shape]:
        a, b = _operands(ctx, level, rng)
        expected = _separate(ctx, a, b, key, level)
        for plan in (REFERENCE, REFERENCE.replace(mod_up_in_one_launch=True, inner_product_in_mod_up=True)):
            got = switching.relinearize_product(context(shape, plan=plan), a, b, key, level)
            assert torch.equal(got, expected), (level, plan)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [ALPHA_11, ALPHA_5, ALPHA_2], ids=lambda s: s.id)
def test_relinearize_product_is_bit_identical_on_cuda(shape):
    """On CUDA, every plan (the tuned ones put the tensor terms into the inner product up to 4 digits; the reference
    keeps the tensor product's pass) == the CPU's tensor product + relinearize, bit for bit."""
    rng, _ = fresh_rng()
    cpu = context(shape)
    key = _keys(cpu)
    for level in LEVELS[shape]:
        a, b = _operands(cpu, level, rng)
        expected = _separate(cpu, a, b, key, level)
        for name, plan in KERNEL_PLANS.items():
            gpu = context(shape, "cuda", plan)
            got = switching.relinearize_product(gpu, a.cuda(), b.cuda(), _keys(gpu), level)
            assert torch.equal(got.cpu(), expected), (level, name)
