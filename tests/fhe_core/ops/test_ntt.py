"""Batched negacyclic NTT against Python big-integer references, on CPU and CUDA."""
import hashlib

import numpy as np
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import RNSBasis, generate_primes, primitive_root_2n
from fhe_core.ring.primes import is_prime
from fhe_reference import DEVICES, bit_reverse, evaluate, fresh_rng, negacyclic_product, random_residues, to_ints

N_SMALL = 1 << 10
# Primes from 30 to 61 bits in one basis: every limb is checked in one batched call.
PRIMES_30_61 = generate_primes([30, 36, 45, 50, 55, 59, 61], N_SMALL)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.usefixtures("cpu_path")  # every CPU path (conftest.py)
def test_ntt_product_equals_schoolbook(device):
    """intt(ntt(a) * ntt(b)) is the negacyclic product, limb by limb (exact)."""
    rng, _ = fresh_rng()
    basis = RNSBasis.get(PRIMES_30_61, N_SMALL, device)
    a = random_residues(rng, basis.primes, n=N_SMALL, device=device)
    b = random_residues(rng, basis.primes, n=N_SMALL, device=device)
    product = basis.intt(ops.mul(basis.ntt(a), basis.ntt(b), basis.moduli))
    for limb, q in enumerate(basis.primes):
        expected = negacyclic_product(to_ints(a[limb]), to_ints(b[limb]), q)
        assert to_ints(product[limb]) == expected, f"limb {limb} (q = {q}, {q.bit_length()} bits)"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.usefixtures("cpu_path")  # every CPU path (conftest.py)
def test_ntt_slots_are_evaluations_in_bit_reversed_order(device):
    """Slot k of ntt(a) is a(psi^(2*brv(k)+1)): the one evaluation order every op relies on."""
    rng, _ = fresh_rng()
    basis = RNSBasis.get(PRIMES_30_61, N_SMALL, device)
    a = random_residues(rng, basis.primes, n=N_SMALL, device=device)
    slots = basis.ntt(a)
    for limb, q in enumerate(basis.primes):
        psi = primitive_root_2n(q, N_SMALL)
        coeffs = to_ints(a[limb])
        for k in rng.integers(0, N_SMALL, size=6):
            point = pow(psi, 2 * bit_reverse(int(k), 10) + 1, q)
            assert slots[limb, k].item() == evaluate(coeffs, point, q), f"limb {limb}, slot {k}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("log_n", range(10, 18))
def test_ntt_round_trip(device, log_n):
    """intt(ntt(a)) == a for every supported N, batched [2, l, N], including the extreme residues;
    and a few slots of each limb are a's evaluations at psi^(2*brv(k)+1), computed with Python
    integers (a round trip alone would pass a consistently wrong twiddle table)."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    basis = RNSBasis.get(generate_primes([61, 50, 30], n), n, device)
    a = random_residues(rng, basis.primes, shape_prefix=(2,), n=n, device=device)
    a[0, :, :4] = 0
    a[1, :, :4] = basis.moduli[:, :1] - 1  # q - 1
    forward = basis.ntt(a)
    assert bool((forward >= 0).all()) and bool((forward < basis.moduli[:, :1]).all()), "not canonical"
    assert torch.equal(basis.intt(forward), a)
    for limb, q in enumerate(basis.primes):
        psi, coeffs = primitive_root_2n(q, n), to_ints(a[1, limb])
        for k in (0, n - 1, *rng.integers(1, n - 1, size=2)):
            point = pow(psi, 2 * bit_reverse(int(k), log_n) + 1, q)
            assert forward[1, limb, k].item() == evaluate(coeffs, point, q), f"log N {log_n}, limb {limb}, slot {k}"


@pytest.mark.parametrize("device", DEVICES)
def test_ntt_in_place_and_out(device):
    rng, _ = fresh_rng()
    basis = RNSBasis.get(PRIMES_30_61, N_SMALL, device)
    a = random_residues(rng, basis.primes, n=N_SMALL, device=device)
    expected = basis.ntt(a)
    buffer = a.clone()
    assert basis.ntt(buffer, out=buffer).data_ptr() == buffer.data_ptr()
    assert torch.equal(buffer, expected)
    assert torch.equal(basis.intt(buffer, out=buffer), a)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.usefixtures("cpu_path")  # every CPU path (conftest.py)
def test_ntt_frozen_vector(device):
    """Regression lock: the NTT of a fixed input hashes to the digest recorded when the kernel was
    first verified against the schoolbook and evaluation references above."""
    n = 1 << 12
    basis = RNSBasis.get(generate_primes([60, 45], n), n, device)
    coeffs = torch.arange(n, dtype=torch.int64, device=device) ** 3
    a = torch.stack([coeffs % q for q in basis.primes])
    digest = hashlib.sha256(basis.ntt(a).cpu().numpy().tobytes()).hexdigest()
    assert digest == FROZEN_NTT_DIGEST


FROZEN_NTT_DIGEST = "56c427b256e2ab762ca91bffd85ee04bb078ff4edd17f2556e5f2f8a7c7966d8"


@pytest.mark.parametrize("device", DEVICES)
def test_ntt_rejects_bad_input(device):
    basis = RNSBasis.get(PRIMES_30_61, N_SMALL, device)
    good = torch.zeros(len(basis), N_SMALL, dtype=torch.int64, device=device)
    with pytest.raises(RuntimeError, match="ntt: a must be int64"):
        basis.ntt(good.to(torch.int32))
    with pytest.raises(RuntimeError, match="ntt: a has 3 limbs but moduli has 7"):
        basis.ntt(good[:3])
    with pytest.raises(RuntimeError, match="ntt: a must be contiguous"):
        basis.ntt(good.t().contiguous().t())
    with pytest.raises(RuntimeError, match="ntt: N must be a power of two"):
        basis.ntt(torch.zeros(len(basis), 1000, dtype=torch.int64, device=device))


def _largest_lazy_prime(log_n: int) -> int:
    """The largest prime q = 1 mod 2N with (5 + 2 log N) q < 2^64: the CUDA kernels' limit for forward
    butterflies without Harvey's reduction (common/ntt.h, "lazy forward")."""
    step = 2 << log_n
    q = (2 ** 64 - 1) // (5 + 2 * log_n)
    q -= (q - 1) % step
    while not is_prime(q):
        q -= step
    return q


def test_lazy_forward_butterflies_stay_in_range_in_python_integers():
    """The range argument behind the CUDA forward NTT without reductions, in Python integers with the
    table's own words and the largest prime it is used for: from inputs up to 4q - 1 (the largest the
    forward transform accepts), each Shoup product w*y comes out in [0, 2q) for y up to 2^64, every
    value of every stage stays below (4 + 2 log N) q < 2^64 (no 64-bit word overflows), and the output
    reduced mod q is the CPU build's NTT of the canonical input."""
    log_n = 10
    n = 1 << log_n
    q = _largest_lazy_prime(log_n)
    assert (5 + 2 * log_n) * q < 2 ** 64 <= (5 + 2 * log_n) * (q + (2 << log_n) * 1000)  # at the limit
    basis = RNSBasis.get([q], n)
    table = basis.ntt_table[0].numpy().view(np.uint64)
    fwd, fwd_shoup = [int(v) for v in table[0]], [int(v) for v in table[1]]
    rng, _ = fresh_rng()
    a = [4 * q - 1] * (n // 2) + [int(v) for v in rng.integers(0, 4 * q, size=n // 2, dtype=np.uint64)]
    inputs = list(a)
    bound, mask = (4 + 2 * log_n) * q, 2 ** 64 - 1
    m, t = 1, n // 2
    while m < n:
        for i in range(m):
            w, ws = fwd[m + i], fwd_shoup[m + i]
            for j in range(2 * i * t, 2 * i * t + t):
                x, y = a[j], a[j + t]
                wy = (y * w - ((y * ws) >> 64) * q) & mask  # the kernels' mul_shoup_lazy, mod 2^64
                assert wy < 2 * q and wy % q == y * w % q
                a[j], a[j + t] = x + wy, x + 2 * q - wy
                assert a[j] < bound and a[j + t] < bound
        m, t = 2 * m, t // 2
    expected = basis.ntt(torch.tensor([[v % q for v in inputs]], dtype=torch.int64))
    assert [v % q for v in a] == to_ints(expected[0])
