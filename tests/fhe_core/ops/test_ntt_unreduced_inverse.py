"""The tuned inverse NTT's arithmetic (ntt_math.cuh's UnreducedTwiddles): no reduction between the inverse's stages for
primes below 2^(63 - log N), truncated Shoup quotients, and the rows kernel's first round reading each twiddle
without its Shoup companion, which it computes. Its rounds in Python integers (every bound the kernels assume
asserted) == the CPU build; on CUDA every kernel plan == the CPU build, bit for bit, at the key switch's batch sizes
(ModDown's 22 = 2 x 11 rows, read in place from its [2, P + Q, N] input; ModUp's 31; 33 = 3 x 11), through intt,
intt_galois and intt_product, with inputs at q - 1 and primes on both sides of 2^(63 - log N), 2^59 and 2^60 (the
lazy rounds' limit) and a 61-bit one."""
import numpy as np
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import RNSBasis, generate_primes
from fhe_reference import fresh_rng, inverse_ntt_rounds, ntt_prime_above, ntt_prime_below, random_residues
from plan_cases import KERNEL_PLANS

WORD = 1 << 64
# (batch prefix, limbs): 2 x 11 ModDown's P rows, 31 ModUp's Q rows, 3 x 11 a third batch past ModDown's
SHAPES = (((2,), 11), ((), 31), ((3,), 11))


def _primes(limbs: int, n: int) -> list[int]:
    """The primes on both sides of 2^(63 - log N) (no reductions below it, the lazy rounds above), of 2^59 and of 2^60
    (the lazy rounds' limit: Harvey's butterflies above), a 61-bit one, then 46-bit primes (ModDown's P primes at
    N16QP1766L30D3): limbs primes q = 1 mod 2N."""
    unreduced_limit = 1 << (63 - (n.bit_length() - 1))
    edges = [ntt_prime_below(unreduced_limit, n), ntt_prime_above(unreduced_limit, n),
             ntt_prime_below(1 << 59, n), ntt_prime_above(1 << 59, n),
             ntt_prime_below(1 << 60, n), ntt_prime_above(1 << 60, n), ntt_prime_below(1 << 61, n)]
    return edges + generate_primes([46] * (limbs - len(edges)), n)


def _mulhi_truncated(a: int, b: int) -> int:
    """cuda/ntt_math.cuh's mulhi_truncated: a1 b1 + hi32(a0 b1) + hi32(a1 b0), 32-bit halves."""
    a0, a1, b0, b1 = a & 0xFFFFFFFF, a >> 32, b & 0xFFFFFFFF, b >> 32
    return a1 * b1 + ((a0 * b1) >> 32) + ((a1 * b0) >> 32)


def _inverse_model(a: list[int], table: np.ndarray, q: int, log_n: int) -> list[int]:
    """The kernels' inverse (UnreducedTwiddles) on Python integers: before inverse stage s every value below
    2^(s+1) q, no reductions; the rows kernel's first round with w'' = floor(w floor(2^128 / q) / 2^64) and exact
    quotients (in [0, 3q)), the later rounds' products from truncated quotients (in [0, 4q)); the folded last stage
    with exact quotients (canonical)."""
    n = 1 << log_n
    ratio = (1 << 128) // q
    inv, inv_shoup = [int(v) for v in table[2]], [int(v) for v in table[3]]
    a = list(a)
    rounds = inverse_ntt_rounds(log_n)
    for r, (tb0, stages) in enumerate(rounds):
        fold = r == len(rounds) - 1
        for step in range(stages):
            t = 1 << (tb0 + step)  # (tb0 + step stages done)
            m = n // (2 * t)
            b = q << (tb0 + step + 1)
            for i in range(m):
                for j in range(2 * i * t, 2 * i * t + t):
                    x, y = a[j], a[j + t]
                    assert x < b and y < b
                    s, d = x + y, x + b - y
                    assert s < WORD and d < WORD
                    if fold and m == 1:  # exact Shoup quotients, then one conditional subtraction: canonical
                        for k, (v, w, ws) in enumerate(((s, inv[0], inv_shoup[0]), (d, inv[1], inv_shoup[1]))):
                            p = (v * w - ((v * ws) >> 64) * q) % WORD
                            assert p < 2 * q
                            a[j + k * t] = p - q if p >= q else p
                    elif r == 0:
                        w = inv[m + i]
                        w2 = w * (ratio >> 64) + ((w * (ratio % WORD)) >> 64)  # ComputedShoupTwiddles::load
                        assert w2 < WORD and inv_shoup[m + i] - 1 <= w2 <= inv_shoup[m + i]
                        p = (d * w - ((d * w2) >> 64) * q) % WORD
                        assert p < 3 * q
                        a[j], a[j + t] = s, p
                    else:
                        p = (d * inv[m + i] - _mulhi_truncated(d, inv_shoup[m + i]) * q) % WORD
                        assert p < 4 * q
                        a[j], a[j + t] = s, p
    return a


@pytest.mark.parametrize("log_n", [10, 11])
def test_inverse_rounds_in_python_integers_at_the_prime_limit(log_n):
    """The unreduced inverse at its largest prime (below 2^(63 - log N)), inputs q - 1 and random: == the CPU build,
    every value below 2^64 and below its assumed bound."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    q = ntt_prime_below(1 << (63 - log_n), n)
    basis = RNSBasis.get([q], n)
    table = basis.ntt_table[0].numpy().view(np.uint64)
    for case in ("q - 1", "random"):
        x = torch.full((1, n), q - 1, dtype=torch.int64) if case == "q - 1" else random_residues(rng, [q], n=n)
        expected = [int(v) for v in basis.intt(x)[0].numpy().view(np.uint64)]
        got = _inverse_model([int(v) for v in x[0].numpy().view(np.uint64)], table, q, log_n)
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
def test_inverse_plans_match_the_cpu(log_n, prefix, limbs):
    """intt (also read in place from a wider tensor), intt_galois and intt_product, every plan == the CPU."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    primes, cpu, gpu, a = _case(rng, prefix, limbs, n)
    b = random_residues(rng, primes, prefix, n)
    b.view(-1, limbs, n)[-1, :, n // 2:] = cpu.moduli[:, :1] - 1
    k = 5 ** 3 % (2 * n)
    expected = cpu.intt(a)
    expected_galois = ops.intt_galois(a, cpu.moduli, cpu.ntt_table, k)
    expected_product = ops.intt_product(a, b, cpu.moduli, cpu.ntt_table)
    # the batch read in place from a wider tensor (ModDown's P rows of [B, P + Q, N]: in_batch_stride)
    wide = torch.cat([a.view(-1, limbs, n), a.view(-1, limbs, n).flip(-1)], dim=-2).cuda()
    for plan_name, plan in KERNEL_PLANS.items():
        got = gpu.with_plan(plan).intt(a.cuda()).cpu()
        strided = ops.intt(wide[:, :limbs], gpu.moduli, gpu.ntt_table, plan=plan).cpu()
        galois = ops.intt_galois(a.cuda(), gpu.moduli, gpu.ntt_table, k, plan=plan)
        product = ops.intt_product(a.cuda(), b.cuda(), gpu.moduli, gpu.ntt_table, plan=plan)
        assert torch.equal(got, expected), plan_name
        assert torch.equal(strided, expected.view(-1, limbs, n)), (plan_name, "strided")
        for got, want, name in ((galois, expected_galois, "galois"), (product, expected_product, "product")):
            assert torch.equal(got[1].cpu(), want[1]), (plan_name, name, "stored rows")
            assert torch.equal(got[0].cpu(), want[0]), (plan_name, name)
