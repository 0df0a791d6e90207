"""The inverse NTT's launch shapes for small batches (ops.kernel_variant "inverse", ntt.cu's inverse_shape): where a
kernel's grid is below 2.5 waves of its resident blocks, 1 runs the rows kernel with half the rows per block and the
columns kernel in blocks of 4 columns, 2 with a quarter of the rows, 3 as 1 with the narrow columns kernel at 48
registers. Only the grid changes: every variant == variant 0 == the CPU build, bit for bit, at the key switch's
batch sizes (ModDown's 22 = 2 x 11 rows, read in place from its [2, P + Q, N] input; ModUp's 31; 33 = 3 x 11),
through intt, intt_galois and intt_product, with inputs at q - 1 and primes on both sides of the lazy inverse's
2^60 limit."""
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import RNSBasis, generate_primes
from fhe_core.ring.primes import is_prime
from fhe_reference import fresh_rng, random_residues

INVERSE_VARIANTS = (0, 1, 2, 3)
# (batch prefix, limbs): 2 x 11 ModDown's P rows, 31 ModUp's Q rows, 3 x 11 a third batch past ModDown's
SHAPES = (((2,), 11), ((), 31), ((3,), 11))


def test_inverse_variant_switch():
    assert ops.kernel_variant("inverse") in INVERSE_VARIANTS
    with ops.use_kernel_variant("inverse", 3):
        assert ops.kernel_variant("inverse") == 3
    with pytest.raises(RuntimeError, match="inverse is 0 \\(reference\\) to 3, got 4"):
        ops.kernel_variant("inverse", 4)
    with pytest.raises(RuntimeError, match="unknown kernel ''"):
        ops.kernel_variant("", 0)  # (the reserved slots of other branches have no name here)


def _primes(limbs: int, n: int) -> list[int]:
    """The largest prime below 2^60 (the lazy inverse's rounds), the smallest above (reducing butterflies), a 61-bit
    one, then 50-bit primes: limbs primes q = 1 mod 2N."""
    def below(limit):
        q = limit - 1 - (limit - 2) % (2 * n)
        while not is_prime(q):
            q -= 2 * n
        return q

    above = (1 << 60) + 1 + (-(1 << 60)) % (2 * n)
    while not is_prime(above):
        above += 2 * n
    return [below(1 << 60), above, below(1 << 61)] + generate_primes([50] * (limbs - 3), n)


def _case(rng, prefix, limbs, n):
    primes = _primes(limbs, n)
    cpu, gpu = RNSBasis.get(primes, n), RNSBasis.get(primes, n, "cuda")
    a = random_residues(rng, primes, prefix, n)
    flat = a.view(-1, limbs, n)
    flat[0, :, : n // 2] = cpu.moduli[:, :1] - 1  # q - 1 in half of every row of the first batch
    return primes, cpu, gpu, a


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [15, 16])
@pytest.mark.parametrize("prefix,limbs", SHAPES)
def test_inverse_shapes_intt(log_n, prefix, limbs):
    rng, _ = fresh_rng()
    n = 1 << log_n
    primes, cpu, gpu, a = _case(rng, prefix, limbs, n)
    expected = cpu.intt(a)
    # the batch read in place from a wider tensor (ModDown's P rows of [B, P + Q, N]: in_batch_stride)
    wide = torch.cat([a.view(-1, limbs, n), a.view(-1, limbs, n).flip(-1)], dim=-2).cuda()
    for variant in INVERSE_VARIANTS:
        with ops.use_kernel_variant("inverse", variant):
            got = gpu.intt(a.cuda()).cpu()
            strided = ops.intt(wide[:, :limbs], gpu.moduli, gpu.ntt_table).cpu()
        assert torch.equal(got, expected), variant
        assert torch.equal(strided, expected.view(-1, limbs, n)), (variant, "strided")


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [15, 16])
@pytest.mark.parametrize("prefix,limbs", SHAPES)
def test_inverse_shapes_intt_galois_and_product(log_n, prefix, limbs):
    rng, _ = fresh_rng()
    n = 1 << log_n
    primes, cpu, gpu, a = _case(rng, prefix, limbs, n)
    b = random_residues(rng, primes, prefix, n)
    b.view(-1, limbs, n)[-1, :, n // 2:] = cpu.moduli[:, :1] - 1
    k = 5 ** 3 % (2 * n)
    expected_galois = ops.intt_galois(a, cpu.moduli, cpu.ntt_table, k)
    expected_product = ops.intt_product(a, b, cpu.moduli, cpu.ntt_table)
    for variant in INVERSE_VARIANTS:
        with ops.use_kernel_variant("inverse", variant):
            galois = ops.intt_galois(a.cuda(), gpu.moduli, gpu.ntt_table, k)
            product = ops.intt_product(a.cuda(), b.cuda(), gpu.moduli, gpu.ntt_table)
        for got, want, name in ((galois, expected_galois, "galois"), (product, expected_product, "product")):
            assert torch.equal(got[1].cpu(), want[1]), (variant, name, "stored rows")
            assert torch.equal(got[0].cpu(), want[0]), (variant, name)
