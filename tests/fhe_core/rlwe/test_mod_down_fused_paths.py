"""Key switching with ModDown as ops.mod_down_fused (ops.kernel_variant "col_fuse" >= 1: the inverse's columns, the
exact Conv and the forward's columns in one CUDA kernel) == the composed ModDown, bit for bit: relinearization (the
addend (d0, d1)), a rotation (sigma_k(c0) read by the last store) and hoisted rotations, at the top level and below
it with a short last digit."""
import pytest
import torch

from fhe_core import ops, rlwe
from fhe_core.rlwe import keyswitch
from fhe_reference import fresh_rng, random_residues
from rlwe_helpers import Shape, context, fixed_seed

# alpha = 11 like N16QP1766L30D3 (3 K tiles of the tensor-core Conv), at N = 2^11; and alpha = 5 with wide primes
ALPHA_11 = Shape(11, (50,) * 14, (59,) * 11)
WIDE_PRIMES = Shape(10, (50,) * 12, (60,) * 5)


def _inputs(ctx, level, rng, count):
    t = ctx.tables(level)
    d = random_residues(rng, t.q.primes, (count,), n=ctx.n)
    d[:, :, 0] = t.q.moduli[:, 0] - 1
    return t.q.ntt(d.to(ctx.device))


def _key_switches(ctx, degree2, degree1, elements, keys, *, col_fuse: int):
    """relinearize, apply_galois and apply_galois_hoisted with the given col_fuse variant; on the CPU the fused
    op is forced (it composes the ops there)."""
    with pytest.MonkeyPatch.context() as patch, ops.use_kernel_variant("col_fuse", col_fuse):
        if ctx.device.type == "cpu":
            patch.setattr(keyswitch, "_mod_down_columns_fused", lambda ctx: col_fuse > 0)
        hoisted = rlwe.apply_galois_hoisted(ctx, degree1, elements, keys)
        return [rlwe.relinearize(ctx, degree2, keys).data.cpu(),
                *(rlwe.apply_galois(ctx, degree1, k, keys).data.cpu() for k in elements),
                *(hoisted[k].data.cpu() for k in elements)]


def _ciphertexts(ctx, level, rng):
    data = _inputs(ctx, level, rng, 3)
    degree2 = rlwe.Ciphertext(data=data, level=level, params_id=ctx.params_id)
    return degree2, degree2.replace(data=data[:2].clone())


def _keys(ctx, elements):
    sk = rlwe.gen_secret_key(ctx, seed=fixed_seed("colfuse/sk"))
    return rlwe.gen_eval_keys(ctx, sk, elements, seed=fixed_seed("colfuse/evk"))


@pytest.mark.parametrize("level", [13, 6])
def test_mod_down_fused_key_switches_on_cpu(level):
    """The op's wiring in rlwe.keyswitch (run on the CPU, where it composes the ops) == the composed ModDown."""
    rng, _ = fresh_rng()
    ctx = context(ALPHA_11)
    elements = [rlwe.galois_element_for_rotation(1, ctx.n), 2 * ctx.n - 1]
    keys = _keys(ctx, elements)
    degree2, degree1 = _ciphertexts(ctx, level, rng)
    fused = _key_switches(ctx, degree2, degree1, elements, keys, col_fuse=1)
    composed = _key_switches(ctx, degree2, degree1, elements, keys, col_fuse=0)
    for i, (a, b) in enumerate(zip(fused, composed)):
        assert torch.equal(a, b), i


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [ALPHA_11, WIDE_PRIMES], ids=lambda s: s.id)
@pytest.mark.parametrize("level", ["top", "short last digit"])
def test_mod_down_fused_key_switches_on_cuda(shape, level):
    """Every col_fuse variant on CUDA == the CPU, bit for bit."""
    rng, _ = fresh_rng()
    cpu, gpu = context(shape), context(shape, "cuda")
    level = cpu.max_level if level == "top" else cpu.alpha + 1
    elements = [rlwe.galois_element_for_rotation(1, cpu.n), 2 * cpu.n - 1]
    keys, keys_gpu = _keys(cpu, elements), _keys(gpu, elements)
    degree2, degree1 = _ciphertexts(cpu, level, rng)
    expected = _key_switches(cpu, degree2, degree1, elements, keys, col_fuse=0)
    on_gpu = [ct.replace(data=ct.data.cuda()) for ct in (degree2, degree1)]
    for variant in range(8):
        got = _key_switches(gpu, *on_gpu, elements, keys_gpu, col_fuse=variant)
        for i, (a, b) in enumerate(zip(got, expected)):
            assert torch.equal(a, b), (variant, i)
