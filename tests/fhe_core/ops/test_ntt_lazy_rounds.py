"""Two pieces of the tuned NTT kernels. The inverse's lazy rounds, which its kernels run for primes between the
unreduced inverse's limit 2^(63 - log N) and 2^60: the sums left unreduced within each round of up to 3 stages
(gs_butterfly_lazy), a Python-integer model of the kernels' rounds at the largest such prime (every bound the kernel
assumes asserted, every value below 2^64) == the CPU build. The forward columns' Shoup quotient truncated
(mulhi_truncated): its error in Python integers at extreme inputs. On CUDA, every kernel plan at both prime limits
== the CPU build."""
import numpy as np
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import RNSBasis
from fhe_reference import fresh_rng, inverse_ntt_rounds, ntt_prime_above, ntt_prime_below, random_residues
from plan_cases import KERNEL_PLANS, assert_forward_ntt_matches_cpu

WORD = 1 << 64


def _bound(step: int, j: int) -> int:
    """cuda/ntt_math.cuh's lazy_inverse_bound: before step `step` of a round, unit element j is below this times q."""
    low = j & ((1 << step) - 1)
    return 2 << step if low == 0 else 2 << (step - 1 - (low.bit_length() - 1))


def _shoup_lazy(a: int, w: int, w_shoup: int, q: int) -> int:
    assert 0 <= a < WORD
    return (a * w - ((a * w_shoup) >> 64) * q) % WORD


def _lazy_inverse_model(a: list[int], inv: list[int], inv_shoup: list[int], q: int, log_n: int) -> list[int]:
    n = 1 << log_n
    a = list(a)
    rounds = inverse_ntt_rounds(log_n)
    for r, (tb0, stages) in enumerate(rounds):
        fold = r == len(rounds) - 1  # the last round holds the stage with N^-1 folded in
        for step in range(stages):
            t = 1 << (tb0 + step)
            m = n // (2 * t)
            for i in range(m):
                for j in range(2 * i * t, 2 * i * t + t):
                    b = _bound(step, (j >> tb0) & ((1 << stages) - 1)) * q
                    x, y = a[j], a[j + t]
                    assert x < b and y < b
                    s, d = x + y, x + b - y
                    assert s < WORD and d < WORD
                    if fold and m == 1:
                        a[j] = _shoup_lazy(s, inv[0], inv_shoup[0], q) % q
                        a[j + t] = _shoup_lazy(d, inv[1], inv_shoup[1], q) % q
                    else:
                        a[j], a[j + t] = s, _shoup_lazy(d, inv[m + i], inv_shoup[m + i], q)
        if not fold:  # the round's reduction back below 2q, element by element
            for j in range(n):
                b = _bound(stages, (j >> tb0) & ((1 << stages) - 1)) // 2
                while b >= 2:
                    a[j] = a[j] - b * q if a[j] >= b * q else a[j]
                    b //= 2
                assert a[j] < 2 * q
    return a


@pytest.mark.parametrize("log_n", [10, 11])
def test_lazy_inverse_rounds_in_python_integers_at_the_prime_limit(log_n):
    rng, _ = fresh_rng()
    n = 1 << log_n
    q = ntt_prime_below(1 << 60, n)
    basis = RNSBasis.get([q], n)
    table = basis.ntt_table[0].numpy().view(np.uint64)
    inv, inv_shoup = [int(v) for v in table[2]], [int(v) for v in table[3]]
    for case in ("q - 1", "random"):
        x = torch.full((1, n), q - 1, dtype=torch.int64) if case == "q - 1" else random_residues(rng, [q], n=n)
        expected = [int(v) for v in basis.intt(x)[0].numpy().view(np.uint64)]
        got = _lazy_inverse_model([int(v) for v in x[0].numpy().view(np.uint64)], inv, inv_shoup, q, log_n)
        assert got == expected, case


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [11, 16, 17])
def test_lazy_inverse_on_cuda_at_its_prime_limit(log_n):
    """The largest prime below 2^60 (lazy rounds), the smallest above (reducing butterflies) and a 61-bit one,
    inputs at q - 1: every kernel plan == the CPU build (also through intt_galois)."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    below = ntt_prime_below(1 << 60, n)
    above = ntt_prime_above(1 << 60, n)
    primes = [below, above, ntt_prime_below(1 << 61, n)]
    cpu, gpu = RNSBasis.get(primes, n), RNSBasis.get(primes, n, "cuda")
    a = random_residues(rng, primes, (2,), n)
    a[0, :, : n // 2] = cpu.moduli[:, :1] - 1
    expected = cpu.intt(a)
    expected_galois = ops.intt_galois(a, cpu.moduli, cpu.ntt_table, 5)
    for name, plan in KERNEL_PLANS.items():
        got = gpu.with_plan(plan).intt(a.cuda()).cpu()
        got_galois = ops.intt_galois(a.cuda(), gpu.moduli, gpu.ntt_table, 5, plan=plan)
        assert torch.equal(got, expected), name
        assert torch.equal(got_galois[0].cpu(), expected_galois[0]), (name, "galois")


def _mulhi_truncated(a: int, b: int) -> int:
    """cuda/ntt_math.cuh's mulhi_truncated: a1 b1 + hi32(a0 b1) + hi32(a1 b0), 32-bit halves."""
    a0, a1, b0, b1 = a & 0xFFFFFFFF, a >> 32, b & 0xFFFFFFFF, b >> 32
    return a1 * b1 + ((a0 * b1) >> 32) + ((a1 * b0) >> 32)


def _trunc_limit(log_n: int) -> int:
    """The largest q with (trunc_bound + 1) q < 2^64, trunc_bound = 4 + 4 k1 + 2 k2."""
    k1 = log_n // 2
    return (WORD - 1) // (5 + 4 * k1 + 2 * (log_n - k1))


def test_truncated_shoup_product_is_within_4q_at_extreme_inputs():
    """The truncated quotient is 0-2 below floor(a w' / 2^64), so a w - q' q lies in [0, 4q): at a = 2^64 - 1
    and 2^64 - 2^32, w = q - 1 and 1, and random ones, for primes at the truncated columns' limit."""
    rng, _ = fresh_rng()
    for log_n in (16, 17):
        q = ntt_prime_below(_trunc_limit(log_n), 1 << log_n)
        for w in [q - 1, 1, q // 3, *(int(v) for v in rng.integers(1, q, size=50, dtype=np.uint64))]:
            w_shoup = (w << 64) // q
            for a in [WORD - 1, WORD - (1 << 32), (1 << 32) - 1, 4 * q - 1,
                      *(int(v) for v in rng.integers(0, 2 ** 63, size=50, dtype=np.uint64))]:
                exact = (a * w_shoup) >> 64
                assert exact - 2 <= _mulhi_truncated(a, w_shoup) <= exact
                r = (a * w - _mulhi_truncated(a, w_shoup) * q) % WORD
                assert r < 4 * q and r % q == a * w % q


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [11, 16, 17])
def test_truncated_forward_on_cuda_at_its_prime_limit(log_n):
    """The largest prime with (trunc_bound + 1) q < 2^64 (truncated columns, values up to trunc_bound q) and the
    smallest above it (the lazy forward with exact quotients), inputs 4q - 1 and q - 1, plain and through ModDown's
    epilogue: every kernel plan == the CPU build."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    limit = _trunc_limit(log_n)
    below = ntt_prime_below(limit, n)
    above = ntt_prime_above(limit, n)
    primes = [below, above, ntt_prime_below(1 << 50, n)]
    assert_forward_ntt_matches_cpu(rng, primes, n)
