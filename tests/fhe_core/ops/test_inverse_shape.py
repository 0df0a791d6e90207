"""The inverse NTT's launch shapes for small batches and its arithmetic (ops.kernel_variant "inverse", ntt.cu's
inverse_shape): where a kernel's grid is below 2.5 waves of its resident blocks, 1 runs the rows kernel with half
the rows per block and the columns kernel in blocks of 4 columns, 2 with a quarter of the rows, 3 as 1 with the
4-column kernel at 48 registers; 4 keeps the shapes and truncates the Shoup quotients of both kernels for primes
below 2^59; 5 runs no reduction between stages for primes below 2^(63 - log N), with truncated quotients, 6 the same
with exact ones, 7 is 5 with the rows kernel's first round computing its Shoup companions (w alone from the table).
The rounds of 4-7 in Python integers (every bound the kernels assume asserted) == the CPU build; on CUDA every
variant == variant 0 == the CPU build, bit for bit, at the key switch's batch sizes (ModDown's 22 = 2 x 11 rows,
read in place from its [2, P + Q, N] input; ModUp's 31; 33 = 3 x 11), through intt, intt_galois and intt_product,
with inputs at q - 1 and primes on both sides of every limit."""
import numpy as np
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import RNSBasis, generate_primes
from fhe_core.ring.primes import is_prime
from fhe_reference import fresh_rng, random_residues

INVERSE_VARIANTS = (0, 1, 2, 3, 4, 5, 6, 7)
WORD = 1 << 64
# (batch prefix, limbs): 2 x 11 ModDown's P rows, 31 ModUp's Q rows, 3 x 11 a third batch past ModDown's
SHAPES = (((2,), 11), ((), 31), ((3,), 11))


def test_inverse_variant_switch():
    assert ops.kernel_variant("inverse") in INVERSE_VARIANTS
    with ops.use_kernel_variant("inverse", 7):
        assert ops.kernel_variant("inverse") == 7
    with pytest.raises(RuntimeError, match="inverse is 0 \\(reference\\) to 7, got 8"):
        ops.kernel_variant("inverse", 8)
    with pytest.raises(RuntimeError, match="unknown kernel ''"):
        ops.kernel_variant("", 0)  # (the reserved slots of other branches have no name here)


def _prime_below(limit: int, n: int) -> int:
    q = limit - 1 - (limit - 2) % (2 * n)
    while not is_prime(q):
        q -= 2 * n
    return q


def _prime_above(limit: int, n: int) -> int:
    q = limit + 1 + (-limit) % (2 * n)
    while not is_prime(q):
        q += 2 * n
    return q


def _primes(limbs: int, n: int) -> list[int]:
    """The primes on both sides of 2^(63 - log N) (variants 5, 6: no reductions below it, Harvey's butterflies above),
    of 2^59 (4: truncated rounds below) and of 2^60 (the lazy inverse's rounds below), a 61-bit one, then 46-bit
    primes (ModDown's P primes at N16QP1766L30D3): limbs primes q = 1 mod 2N."""
    unreduced_limit = 1 << (63 - (n.bit_length() - 1))
    edges = [_prime_below(unreduced_limit, n), _prime_above(unreduced_limit, n), _prime_below(1 << 59, n),
             _prime_above(1 << 59, n), _prime_below(1 << 60, n), _prime_above(1 << 60, n), _prime_below(1 << 61, n)]
    return edges + generate_primes([46] * (limbs - len(edges)), n)


def _mulhi_truncated(a: int, b: int) -> int:
    """ntt.cu's mulhi_truncated: a1 b1 + hi32(a0 b1) + hi32(a1 b0), 32-bit halves."""
    a0, a1, b0, b1 = a & 0xFFFFFFFF, a >> 32, b & 0xFFFFFFFF, b >> 32
    return a1 * b1 + ((a0 * b1) >> 32) + ((a1 * b0) >> 32)


def _bound(step: int, j: int) -> int:
    """Twice ntt.cu's lazy_inverse_bound: before step `step` of a truncated round, unit element j is below this q."""
    low = j & ((1 << step) - 1)
    return 2 * (2 << step if low == 0 else 2 << (step - 1 - (low.bit_length() - 1)))


def _rounds(log_n: int) -> list[tuple[int, int]]:
    """(lowest t-bit, stages) of each round of the inverse, in order: the rows kernel's k2 stages (t = 1 ..
    2^(k2-1)), then the columns kernel's k1, each local transform's rounds of 3 stages from the top group."""
    k1 = log_n // 2
    k2 = log_n - k1
    out = []
    for lo, length in ((0, k2), (k2, k1)):
        rounds = (length + 2) // 3
        for g in reversed(range(rounds)):
            stages = min(3, length - 3 * g)
            out.append((lo + length - 3 * g - stages, stages))
    return out


def _inverse_model(a: list[int], table: np.ndarray, q: int, log_n: int, unreduced: bool,
                   truncated: bool = True, computed_first: bool = False) -> list[int]:
    """The kernels' inverse on Python integers. Variant 4 (unreduced False): gs_butterfly_truncated (the difference's
    product from the truncated quotient, in [0, 4q)) with twice lazy_inverse_bound's bounds, each round reduced to
    below 4q. Variants 5 (truncated) and 6: before inverse stage s every value below 2^(s+1) q, no reductions; 7
    (computed_first): 5 with the first round's Shoup companions w'' = floor(w floor(2^128 / q) / 2^64) and exact
    quotients (products in [0, 3q)). The folded last stage with exact quotients in all."""
    n = 1 << log_n
    ratio = (1 << 128) // q
    inv, inv_shoup = [int(v) for v in table[2]], [int(v) for v in table[3]]
    a = list(a)
    rounds = _rounds(log_n)
    for r, (tb0, stages) in enumerate(rounds):
        fold = r == len(rounds) - 1
        for step in range(stages):
            t = 1 << (tb0 + step)
            m = n // (2 * t)
            for i in range(m):
                for j in range(2 * i * t, 2 * i * t + t):
                    if unreduced:  # (tb0 + step stages done)
                        b = q << (tb0 + step + 1)
                    else:
                        b = _bound(step, (j >> tb0) & ((1 << stages) - 1)) * q
                    x, y = a[j], a[j + t]
                    assert x < b and y < b
                    s, d = x + y, x + b - y
                    assert s < WORD and d < WORD
                    if fold and m == 1:  # exact Shoup quotients, then one conditional subtraction: canonical
                        for k, (v, w, ws) in enumerate(((s, inv[0], inv_shoup[0]), (d, inv[1], inv_shoup[1]))):
                            p = (v * w - ((v * ws) >> 64) * q) % WORD
                            assert p < 2 * q
                            a[j + k * t] = p - q if p >= q else p
                    elif computed_first and r == 0:
                        w = inv[m + i]
                        w2 = w * (ratio >> 64) + ((w * (ratio % WORD)) >> 64)  # ComputedShoupTwiddles::load
                        assert w2 < WORD and inv_shoup[m + i] - 1 <= w2 <= inv_shoup[m + i]
                        p = (d * w - ((d * w2) >> 64) * q) % WORD
                        assert p < 3 * q
                        a[j], a[j + t] = s, p
                    else:
                        w, ws = inv[m + i], inv_shoup[m + i]
                        quotient = _mulhi_truncated(d, ws) if truncated else (d * ws) >> 64
                        p = (d * w - quotient * q) % WORD
                        assert p < (4 if truncated else 2) * q
                        a[j], a[j + t] = s, p
        if not fold and not unreduced:  # the round's reduction back below 4q, element by element
            for j in range(n):
                b = _bound(stages, (j >> tb0) & ((1 << stages) - 1)) // 2
                while b >= 4:
                    a[j] = a[j] - b * q if a[j] >= b * q else a[j]
                    b //= 2
                assert a[j] < 4 * q
    return a


@pytest.mark.parametrize("log_n", [10, 11])
@pytest.mark.parametrize("unreduced,truncated,computed_first",
                         [(False, True, False), (True, True, False), (True, False, False), (True, True, True)])
def test_inverse_rounds_in_python_integers_at_the_prime_limit(log_n, unreduced, truncated, computed_first):
    """Variants 4, 5, 6, 7 at their largest prime (2^59, 2^(63 - log N)), inputs q - 1 and random: == the CPU build,
    every value below 2^64 and below its assumed bound."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    q = _prime_below(1 << (63 - log_n) if unreduced else 1 << 59, n)
    basis = RNSBasis.get([q], n)
    table = basis.ntt_table[0].numpy().view(np.uint64)
    for case in ("q - 1", "random"):
        x = torch.full((1, n), q - 1, dtype=torch.int64) if case == "q - 1" else random_residues(rng, [q], n=n)
        expected = [int(v) for v in basis.intt(x)[0].numpy().view(np.uint64)]
        got = _inverse_model([int(v) for v in x[0].numpy().view(np.uint64)], table, q, log_n, unreduced, truncated,
                             computed_first)
        assert got == expected, case


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
