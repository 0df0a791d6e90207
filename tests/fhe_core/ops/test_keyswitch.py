"""Fused key-switching inner product against Python integers, on CPU and CUDA."""
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import RNSBasis, generate_primes
from fhe_reference import DEVICES, fresh_rng, random_residues, to_ints

N = 1 << 10


def _setup(device, q_total=6, level_q=4, p=2, dnum=3):
    """Digits over Q_l u P (level_q primes of Q, then P) and a key over Q_L u P."""
    rng, _ = fresh_rng()
    primes = generate_primes([50] * q_total + [61] * p, N)
    key_basis = RNSBasis.get(primes, N, device)
    level_basis = RNSBasis.get(primes[:level_q] + primes[q_total:], N, device)
    digits = random_residues(rng, level_basis.primes, (dnum,), N, device)
    key = random_residues(rng, key_basis.primes, (dnum + 1, 2), N, device)  # one spare digit
    return level_basis, digits, key, q_total


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dnum", [1, 3])
def test_inner_product_matches_python_integers(device, dnum):
    level_basis, digits, key, q_total = _setup(device, dnum=dnum)
    level_q = 4
    out = ops.ks_inner_product(digits, key, level_q, q_total, level_basis.moduli)
    assert out.shape == (2, len(level_basis), N)
    d, k, o = to_ints(digits), to_ints(key), to_ints(out)
    for limb, q in enumerate(level_basis.primes):
        row = limb if limb < level_q else q_total + (limb - level_q)
        for c in range(2):
            for i in (0, 1, N // 2, N - 1):
                expected = sum(d[j][limb][i] * k[j][c][row][i] for j in range(dnum)) % q
                assert o[c][limb][i] == expected, f"component {c}, limb {limb}, coefficient {i}"


@pytest.mark.parametrize("device", DEVICES)
def test_inner_product_equals_composed_ops(device):
    """The fused op equals the sum of element-wise products over every coefficient."""
    level_basis, digits, key, q_total = _setup(device)
    rows = list(range(4)) + [q_total + i for i in range(2)]
    fused = ops.ks_inner_product(digits, key, 4, q_total, level_basis.moduli)
    for c in range(2):
        acc = torch.zeros_like(digits[0])
        for j in range(digits.shape[0]):
            acc = ops.mul_add(digits[j], key[j, c, rows].contiguous(), acc, level_basis.moduli)
        assert torch.equal(fused[c], acc)


@pytest.mark.parametrize("device", DEVICES)
def test_inner_product_rejects_bad_layouts(device):
    level_basis, digits, key, q_total = _setup(device)
    with pytest.raises(RuntimeError, match="within the key's 8 rows"):
        ops.ks_inner_product(digits, key, 4, 7, level_basis.moduli)
    with pytest.raises(RuntimeError, match="key must be"):
        ops.ks_inner_product(digits, key[:2], 4, q_total, level_basis.moduli)
