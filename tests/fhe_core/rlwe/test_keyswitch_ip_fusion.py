"""The key switch with its inner product in ModUp's last forward NTT pass (ops.kernel_variant "ks_fuse" >= 1:
ops.ntt_inner_product) against the separate NTT and inner product (ks_fuse 0), bit for bit: relinearization's
key switch and a rotation's (sigma_k read inside the key switch), on the CPU (the fused composition forced) and
on every CUDA variant against the CPU."""
from types import SimpleNamespace

import pytest
import torch

from fhe_core import ops, rlwe
from fhe_core.rlwe import keyswitch
from fhe_reference import fresh_rng, random_residues
from rlwe_helpers import Shape, context, fixed_seed

# alpha = 5: 12 primes of Q in digits of 5, 5, 2; alpha = 11 as N16QP1766L30D3 (31 primes of Q: 11, 11, 9)
LARGE_DIGITS = Shape(10, (40,) * 12, (50,) * 5)
PRESET_LAYOUT = Shape(11, (60,) + (40,) * 30, (46,) * 11)


def _inputs(ctx, level, rng, count=2):
    t = ctx.tables(level)
    d = random_residues(rng, t.q.primes, (count,), n=ctx.n)
    d[:, :, 0] = t.q.moduli[:, 0] - 1
    return t.q.ntt(d).to(ctx.device)


def _switches(ctx, data, level, keys, elements, *, fuse: int):
    """(key_switch(data[1]), apply_galois(data, k) for every k) with ks_fuse = fuse; on the CPU the one-launch
    ModUp (and with it the fusion's composition) and the in-key-switch Galois path are forced."""
    with pytest.MonkeyPatch.context() as patch, ops.use_kernel_variant("ks_fuse", fuse):
        patch.setattr(keyswitch, "_INNER_PRODUCT_IN_MOD_UP_MIN_N", 0)  # (the fusion at these small N too)
        if ctx.device.type == "cpu":
            patch.setattr(keyswitch, "_mod_up_all_digits_at_once", lambda ctx: True)
            patch.setattr(keyswitch, "_galois_in_key_switch", lambda ctx: True)
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
    ctx = context(LARGE_DIGITS)
    elements = _elements(ctx.n)
    keys = _keys(ctx, elements)
    data = _inputs(ctx, level, rng)
    fused = _switches(ctx, data, level, keys, elements, fuse=1)
    separate = _switches(ctx, data, level, keys, elements, fuse=0)
    for i, (a, b) in enumerate(zip(fused, separate)):
        assert torch.equal(a, b), i


def test_ks_fuse_variant_switch():
    before = ops.kernel_variant("ks_fuse")
    other = 1 if before != 1 else 2
    with ops.use_kernel_variant("ks_fuse", other):
        assert ops.kernel_variant("ks_fuse") == other
    assert ops.kernel_variant("ks_fuse") == before
    with pytest.raises(RuntimeError, match="ks_fuse is 0"):
        ops.kernel_variant("ks_fuse", 6)


def test_fused_inner_product_only_from_n_2_15():
    """The key switch takes the fused path on CUDA from N = 2^15 on (below, it measured slower), with ks_fuse >= 1."""
    def ctx(log_n):
        return SimpleNamespace(device=torch.device("cuda"), n=1 << log_n)
    assert ops.kernel_variant("ks_fuse") >= 1 and ops.kernel_variant("mod_up") == 1
    assert [keyswitch._inner_product_in_mod_up(ctx(log_n)) for log_n in (13, 14, 15, 16)] == [False, False, True, True]
    with ops.use_kernel_variant("ks_fuse", 0):
        assert not keyswitch._inner_product_in_mod_up(ctx(16))
    assert not keyswitch._inner_product_in_mod_up(SimpleNamespace(device=torch.device("cpu"), n=1 << 16))


@pytest.mark.gpu
@pytest.mark.parametrize("shape, level", [(LARGE_DIGITS, 11), (LARGE_DIGITS, 6), (LARGE_DIGITS, 0),
                                          (PRESET_LAYOUT, 30), (PRESET_LAYOUT, 25), (PRESET_LAYOUT, 15),
                                          (PRESET_LAYOUT, 5)], ids=str)
def test_fused_inner_product_is_bit_identical_on_cuda(shape, level):
    """Every ks_fuse variant on the default NTT and on ntt 2 (where the op runs the two ops) == the CPU: 3, 2 and 1
    digits at the level (ks_fuse 4, 5: one thread group per digit)."""
    rng, _ = fresh_rng()
    cpu, gpu = context(shape), context(shape, "cuda")
    elements = _elements(cpu.n)
    keys, keys_gpu = _keys(cpu, elements), _keys(gpu, elements)
    data = _inputs(cpu, level, rng)
    expected = _switches(cpu, data, level, keys, elements, fuse=0)
    for ntt_variant in (ops.kernel_variant("ntt"), 2):
        for fuse in range(6):
            with ops.use_kernel_variant("ntt", ntt_variant):
                got = _switches(gpu, data.cuda(), level, keys_gpu, elements, fuse=fuse)
            for i, (a, b) in enumerate(zip(got, expected)):
                assert torch.equal(a, b), (ntt_variant, fuse, i)


@pytest.mark.gpu
def test_mod_up_conv_without_own_copies_and_intt_galois_without_store():
    """The two halves of the fused path's own rows read in place: mod_up_conv(copy_own=False) writes every converted
    row as before and no own row (a sentinel survives there), on every Conv variant; intt_galois(store_permuted=False)
    gives the same coefficients on every NTT variant."""
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
    for conv in range(9):
        with ops.use_kernel_variant("conv", conv):
            full = ops.mod_up_conv(*args, lazy=True, fragments=b.mma_fragments)
            out = torch.full_like(full, -1)
            ops.mod_up_conv(*args, lazy=True, fragments=b.mma_fragments, copy_own=False, out=out)
        assert torch.equal(out[~own], full[~own]), conv
        assert bool((out[own] == -1).all()), conv
    k = rlwe.galois_element_for_rotation(3, ctx.n)
    cpu = context(PRESET_LAYOUT).tables(level).q
    expected = ops.intt_galois(d.cpu(), cpu.moduli, cpu.ntt_table, k)[0]
    for ntt_variant in range(7):
        with ops.use_kernel_variant("ntt", ntt_variant):
            got, _ = ops.intt_galois(d, t.q.moduli, t.q.ntt_table, k, store_permuted=False)
        assert torch.equal(got.cpu(), expected), ntt_variant
