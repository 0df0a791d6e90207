"""The key switch with its inner product in ModUp's last forward NTT pass (KernelPlan.inner_product_in_mod_up:
ops.ntt_inner_product) against the separate NTT and inner product (the reference), bit for bit: relinearization's
key switch and a rotation's (sigma_k read inside the key switch), on the CPU (the fused composition forced by the
plan) and on every CUDA kernel plan against the CPU."""
import pytest
import torch

from fhe_core import ops, rlwe
from fhe_reference import fresh_rng, random_residues
from plan_cases import KERNEL_PLANS, REFERENCE
from rlwe_helpers import Shape, context, fixed_seed

# alpha = 5: 12 primes of Q in digits of 5, 5, 2; alpha = 11 as N16QP1766L30D3 (31 primes of Q: 11, 11, 9)
LARGE_DIGITS = Shape(10, (40,) * 12, (50,) * 5)
PRESET_LAYOUT = Shape(11, (60,) + (40,) * 30, (46,) * 11)
# the compositions of the tuned plan on the CPU (its ops compose the kernels: the fused inner product's pieces)
FUSED_ON_CPU = REFERENCE.replace(mod_up_in_one_launch=True, inner_product_in_mod_up=True)


def _inputs(ctx, level, rng, count=2):
    t = ctx.tables(level)
    d = random_residues(rng, t.q.primes, (count,), n=ctx.n)
    d[:, :, 0] = t.q.moduli[:, 0] - 1
    return t.q.ntt(d).to(ctx.device)


def _switches(ctx, data, level, keys, elements):
    """(key_switch(data[1]), apply_galois(data, k) for every k) in ctx (its plan)."""
    ct = rlwe.Ciphertext(data=data, level=level, params_id=ctx.params_id)
    out = [rlwe.key_switch(ctx, data[1], keys.relin_key("t"), level).cpu()]
    out += [rlwe.apply_galois(ctx, ct, k, keys).data.cpu() for k in elements]
    return out


def _keys(ctx, elements):
    sk = rlwe.gen_secret_key(ctx, seed=fixed_seed("ipfuse/sk"))
    return rlwe.gen_eval_keys(ctx, sk, elements, seed=fixed_seed("ipfuse/evk"))


def _elements(n):
    return [rlwe.galois_element_for_rotation(1, n), 2 * n - 1]


@pytest.mark.parametrize("level", [11, 6, 3])
def test_fused_inner_product_is_bit_identical_on_cpu(level):
    """At the top level, with a short last digit, with one digit only."""
    rng, _ = fresh_rng()
    reference, fused_ctx = context(LARGE_DIGITS, plan=REFERENCE), context(LARGE_DIGITS, plan=FUSED_ON_CPU)
    elements = _elements(reference.n)
    keys = _keys(reference, elements)
    data = _inputs(reference, level, rng)
    fused = _switches(fused_ctx, data, level, keys, elements)
    separate = _switches(reference, data, level, keys, elements)
    for i, (a, b) in enumerate(zip(fused, separate)):
        assert torch.equal(a, b), i


@pytest.mark.gpu
def test_fused_inner_product_resolved_from_n_2_15_on_cuda():
    """A CUDA context's plan takes the fused path from N = 2^15 on (below, it measured slower)."""
    primes = [(1 << 40) + 1, (1 << 46) + 1]  # (resolve reads only their sizes)
    assert [ops.KernelPlan.resolve("cuda", 1 << log_n, primes).inner_product_in_mod_up
            for log_n in (13, 14, 15, 16)] == [False, False, True, True]


@pytest.mark.gpu
@pytest.mark.parametrize("shape, level", [(LARGE_DIGITS, 11), (LARGE_DIGITS, 6), (LARGE_DIGITS, 0),
                                          (PRESET_LAYOUT, 30), (PRESET_LAYOUT, 25), (PRESET_LAYOUT, 15),
                                          (PRESET_LAYOUT, 5)], ids=str)
def test_fused_inner_product_is_bit_identical_on_cuda(shape, level):
    """Every kernel plan, the inner product fused even at these small N (the plans ask for it), == the CPU: 3, 2 and
    1 digits at the level (the digit-group kernel: one thread group per digit)."""
    rng, _ = fresh_rng()
    cpu = context(shape)
    elements = _elements(cpu.n)
    keys = _keys(cpu, elements)
    data = _inputs(cpu, level, rng)
    expected = _switches(cpu, data, level, keys, elements)
    for name, plan in KERNEL_PLANS.items():
        gpu = context(shape, "cuda", plan)
        got = _switches(gpu, data.cuda(), level, _keys(gpu, elements), elements)
        for i, (a, b) in enumerate(zip(got, expected)):
            assert torch.equal(a, b), (name, i)


@pytest.mark.gpu
def test_mod_up_conv_without_own_copies_and_intt_galois_without_store():
    """The two halves of the fused path's own rows read in place: mod_up_conv(copy_own=False) writes every converted
    row as before and no own row (a sentinel survives there), on every plan's Conv; intt_galois(store_permuted=False)
    gives the same coefficients on every plan's NTT."""
    rng, _ = fresh_rng()
    ctx = context(PRESET_LAYOUT, "cuda")
    level = 30
    t, b = ctx.tables(level), ctx.tables(level).batched_mod_up
    d = _inputs(context(PRESET_LAYOUT), level, rng, count=1)[0].cuda()
    coeffs = t.q.intt(d)
    args = (coeffs, t.q.moduli, b.qhat_inv, b.qhat_inv_shoup, t.qp.moduli, b.qhat_mod_p, d)
    own = torch.zeros(len(t.digits), len(t.qp), dtype=torch.bool, device=ctx.device)
    for j in range(len(t.digits)):
        own[j, ctx.alpha + j * ctx.alpha:ctx.alpha + (j + 1) * ctx.alpha] = True
    k = rlwe.galois_element_for_rotation(3, ctx.n)
    cpu = context(PRESET_LAYOUT).tables(level).q
    expected = ops.intt_galois(d.cpu(), cpu.moduli, cpu.ntt_table, k)[0]
    for name, plan in KERNEL_PLANS.items():
        full = ops.mod_up_conv(*args, lazy=True, fragments=b.mma_fragments, plan=plan)
        out = torch.full_like(full, -1)
        ops.mod_up_conv(*args, lazy=True, fragments=b.mma_fragments, copy_own=False, plan=plan, out=out)
        assert torch.equal(out[~own], full[~own]), name
        assert bool((out[own] == -1).all()), name
        got, _ = ops.intt_galois(d, t.q.moduli, t.q.ntt_table, k, store_permuted=False, plan=plan)
        assert torch.equal(got.cpu(), expected), name
