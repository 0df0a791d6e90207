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
    # the (w, w') and FP64 pair rows only where a kernel reads them (CUDA): CPU tables stay [l, 4, N]
    rows = 12 if device == "cuda" else 4
    assert basis.moduli.device.type == device and basis.ntt_table.shape == (3, rows, N)
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
        if rows == 4:
            continue
        # rows 4-5 and 6-7: the same words as interleaved (w, Shoup) pairs, for 16-byte loads on CUDA
        fwd_pairs = _u64(basis.ntt_table[limb, 4:6].reshape(-1))
        inv_pairs = _u64(basis.ntt_table[limb, 6:8].reshape(-1))
        assert fwd_pairs[0::2] == fwd and fwd_pairs[1::2] == fwd_shoup
        assert inv_pairs[0::2] == inv and inv_pairs[1::2] == inv_shoup
        # rows 8-9 and 10-11: (w, w / q) as doubles for the FP64 butterflies (test_fp64_ntt checks their values)
        fwd_fp64 = basis.ntt_table[limb, 8:10].reshape(-1).cpu().view(torch.float64).tolist()
        assert fwd_fp64[0::2] == [float(w) for w in fwd]


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


def test_pair_rows_are_built_on_request_and_the_cpu_kernels_take_either_table():
    """ops.ntt_table(pairs=True) appends the pair rows to the same four rows; the CPU kernels read the
    row count from the table (4 or 12 rows give the same residues); CUDA refuses a table without pairs."""
    from fhe_core import ops
    from fhe_core.ring import modulus_table, shoup_constants, words_tensor

    primes = generate_primes([50, 61], N)
    moduli = modulus_table(primes)
    roots = words_tensor([primitive_root_2n(q, N) for q in primes])
    plain = ops.ntt_table(moduli, roots, 11)
    paired = ops.ntt_table(moduli, roots, 11, pairs=True)
    assert plain.shape == (2, 4, N) and paired.shape == (2, 12, N)
    assert torch.equal(paired[:, :4], plain)
    for limb in range(2):
        pairs = _u64(paired[limb, 4:6].reshape(-1)) + _u64(paired[limb, 6:8].reshape(-1))
        assert pairs[0::2] == _u64(plain[limb, 0]) + _u64(plain[limb, 2])
        assert pairs[1::2] == _u64(plain[limb, 1]) + _u64(plain[limb, 3])
    basis = RNSBasis.get(primes, N)
    x = basis.to_residues([int(v) for v in fresh_rng()[0].integers(-2**40, 2**40, size=N)])
    x = torch.stack([x, x.flip(-1)])
    for fn in (ops.ntt, ops.intt):
        expected = fn(x, moduli, plain)
        assert torch.equal(fn(x, moduli, paired), expected)
        assert torch.equal(fn(x, moduli, paired, skip=(1, 0, 1)), fn(x, moduli, plain, skip=(1, 0, 1)))
    c = torch.cat([x, x], dim=1)
    consts, shoup = shoup_constants([q - 5 for q in primes], primes)
    assert torch.equal(ops.mod_down_ntt(x, c, 2, consts, shoup, moduli, paired),
                       ops.mod_down_ntt(x, c, 2, consts, shoup, moduli, plain))
    with pytest.raises(RuntimeError, match="4 or 12"):
        ops.ntt(x, moduli, plain[:, :3].contiguous())
    if torch.cuda.is_available() and ops.cuda_built():
        with pytest.raises(RuntimeError, match="pair rows"):
            ops.ntt(x.cuda(), moduli.cuda(), plain.cuda())
