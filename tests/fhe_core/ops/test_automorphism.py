"""Galois automorphisms X -> X^k against direct substitution mod X^N + 1, on CPU and CUDA."""
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import RNSBasis, generate_primes
from fhe_reference import DEVICES, fresh_rng, random_residues, substitute, to_ints

N = 1 << 10


def _galois_elements(rng):
    """Rotation-style elements 5^r mod 2N, conjugation 2N - 1, and random odd k."""
    two_n = 2 * N
    ks = [pow(5, int(r), two_n) for r in rng.integers(1, N // 2, size=3)]
    return ks + [two_n - 1, 1] + [int(k) | 1 for k in rng.integers(1, two_n, size=3)]


@pytest.mark.parametrize("device", DEVICES)
def test_coefficient_automorphism_is_substitution(device):
    rng, _ = fresh_rng()
    basis = RNSBasis.get(generate_primes([61, 40], N), N, device)
    a = random_residues(rng, basis.primes, n=N, device=device)
    a[:, 3] = 0
    for k in _galois_elements(rng):
        got = ops.automorphism_coeff(a, basis.moduli, k)
        for limb, q in enumerate(basis.primes):
            assert to_ints(got[limb]) == substitute(to_ints(a[limb]), k, q), f"k = {k}, limb {limb}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("log_n", [10, 13, 16])
def test_ntt_automorphism_commutes_with_ntt(device, log_n):
    """automorphism_ntt(ntt(a)) == ntt(a(X^k)), batched [2, l, N]."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    basis = RNSBasis.get(generate_primes([60, 50, 35], n), n, device)
    a = random_residues(rng, basis.primes, shape_prefix=(2,), n=n, device=device)
    for k in [pow(5, int(rng.integers(1, n)), 2 * n), 2 * n - 1, int(rng.integers(1, 2 * n)) | 1]:
        direct = basis.ntt(ops.automorphism_coeff(a, basis.moduli, k))
        assert torch.equal(ops.automorphism_ntt(basis.ntt(a), basis.moduli, k), direct), f"k = {k}"


@pytest.mark.parametrize("device", DEVICES)
def test_automorphism_rejects_bad_galois_elements(device):
    basis = RNSBasis.get(generate_primes([40], N), N, device)
    a = torch.zeros(1, N, dtype=torch.int64, device=device)
    for k in (0, 2, 2 * N + 1, -3):
        with pytest.raises(RuntimeError, match="Galois element must be odd"):
            ops.automorphism_ntt(a, basis.moduli, k)
    with pytest.raises(RuntimeError):
        ops.automorphism_coeff(a, basis.moduli, 5, out=a)  # out may not alias the input
