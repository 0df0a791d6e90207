"""RNS bases: table contents against Python pow, prefixes, caching and validation."""
import numpy as np
import pytest
import torch

from fhe_core.errors import ParameterError
from fhe_core.ring import RNSBasis, generate_primes, primitive_root_2n
from fhe_reference import DEVICES, bit_reverse, fresh_rng

N = 1 << 11


def _u64(t: torch.Tensor) -> list[int]:
    return [int(v) for v in t.cpu().numpy().view(np.uint64)]


@pytest.mark.parametrize("device", DEVICES)
def test_tables_hold_the_documented_constants(device):
    rng, _ = fresh_rng()
    primes = generate_primes([61, 45, 30], N)
    basis = RNSBasis.get(primes, N, device)
    assert basis.moduli.device.type == device and basis.ntt_table.shape == (3, 8, N)
    for limb, q in enumerate(primes):
        q_row = _u64(basis.moduli[limb])
        assert q_row == [q, ((1 << 128) // q) >> 64, ((1 << 128) // q) & (2 ** 64 - 1), q.bit_length()]
        psi = primitive_root_2n(q, N)
        fwd, fwd_shoup, inv, inv_shoup = (_u64(basis.ntt_table[limb, r]) for r in range(4))
        n_inv = pow(N, -1, q)
        assert inv[0] == n_inv
        assert inv[1] == pow(psi, -bit_reverse(1, 11), q) * n_inv % q
        for k in rng.integers(2, N, size=20).tolist():
            assert fwd[k] == pow(psi, bit_reverse(k, 11), q)
            assert inv[k] == pow(psi, -bit_reverse(k, 11), q)
            assert fwd_shoup[k] == (fwd[k] << 64) // q and inv_shoup[k] == (inv[k] << 64) // q
        # rows 4-5 and 6-7: the same words as interleaved (w, Shoup) pairs, for 16-byte loads on CUDA
        fwd_pairs = _u64(basis.ntt_table[limb, 4:6].reshape(-1))
        inv_pairs = _u64(basis.ntt_table[limb, 6:8].reshape(-1))
        assert fwd_pairs[0::2] == fwd and fwd_pairs[1::2] == fwd_shoup
        assert inv_pairs[0::2] == inv and inv_pairs[1::2] == inv_shoup


def test_bases_are_cached_and_prefixes_share_tables():
    primes = generate_primes([50, 50, 50], N)
    basis = RNSBasis.get(primes, N)
    assert RNSBasis.get(list(primes), N, "cpu") is basis
    low = basis.prefix(2)
    assert low.primes == tuple(primes[:2]) and len(low) == 2
    assert low.ntt_table.data_ptr() == basis.ntt_table.data_ptr()
    assert low.modulus == primes[0] * primes[1]
    with pytest.raises(ParameterError):
        basis.prefix(0)
    middle = basis.rows(1, 3)
    assert middle.primes == tuple(primes[1:3])
    assert middle.ntt_table.data_ptr() == basis.ntt_table[1].data_ptr()
    with pytest.raises(ParameterError, match="no row range"):
        basis.rows(2, 2)


@pytest.mark.parametrize("primes,n,match", [
    ([], N, "at least one prime"),
    ([12289 * 4], N, "not a prime"),
    ([7681], N, "not a prime"),                 # prime, but 7681 != 1 mod 2N for N = 2^11
    ([2 ** 61 - 1], N, "not a prime"),          # prime, too large and not 1 mod 2N
    ([1152921504606584833], 1000, "power of two"),
    ([1152921504606584833], 1 << 18, "power of two"),
])
def test_basis_validation(primes, n, match):
    with pytest.raises(ParameterError, match=match):
        RNSBasis(primes, n)


def test_duplicate_primes_are_refused():
    (q,) = generate_primes([40], N)
    with pytest.raises(ParameterError, match="distinct"):
        RNSBasis([q, q], N)


def test_to_residues_reduces_signed_integers():
    primes = generate_primes([40, 30], N)
    basis = RNSBasis.get(primes, N)
    coefficients = [(-1) ** i * i ** 5 for i in range(N)]
    residues = basis.to_residues(coefficients)
    assert residues[1].tolist() == [c % primes[1] for c in coefficients]
