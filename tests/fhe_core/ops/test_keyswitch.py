"""Fused key-switching inner product against Python integers, on CPU and CUDA."""
from math import prod

import pytest
import torch

from fhe_core import ops
from fhe_core.ring import RNSBasis, generate_primes, shoup_constants, words_tensor
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


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("alpha", [1, 3])
def test_mod_up_conv_matches_python_integers(device, alpha):
    """Every digit of [d]_{Q_j} extended to all primes: sum_k [x_k (Q_j/q_k)^-1]_{q_k} (Q_j/q_k)
    mod p_r, in Python integers; the digit's own rows reproduce the input exactly."""
    rng, _ = fresh_rng()
    q_primes = generate_primes([50] * 5, N)
    p_primes = generate_primes([61] * alpha, N, exclude=q_primes)
    rows = p_primes + q_primes
    q_basis, out_basis = RNSBasis.get(q_primes, N, device), RNSBasis.get(rows, N, device)
    x = random_residues(rng, q_primes, (), N, device)
    digits = [q_primes[j:j + alpha] for j in range(0, len(q_primes), alpha)]
    inverses, table = [], []
    for digit in digits:
        qhat = [prod(digit) // q for q in digit]
        inverses += [pow(h % q, -1, q) for h, q in zip(qhat, digit)]
        table += [h % r for h in qhat + [0] * (alpha - len(qhat)) for r in rows]
    inv, inv_shoup = shoup_constants(inverses, q_primes, device)
    qhat_mod_p = words_tensor(table, device).reshape(len(digits), alpha, len(rows))
    out = to_ints(ops.mod_up_conv(x, q_basis.moduli, inv, inv_shoup, out_basis.moduli, qhat_mod_p))
    xs = to_ints(x)
    for j, digit in enumerate(digits):
        first = j * alpha
        for i in (0, 1, N - 1):
            ys = [xs[first + k][i] * inverses[first + k] % q for k, q in enumerate(digit)]
            qhat = [prod(digit) // q for q in digit]
            for r, p in enumerate(rows):
                assert out[j][r][i] == sum(y * h for y, h in zip(ys, qhat)) % p, f"digit {j}, row {r}"
            for k, q in enumerate(digit):
                assert out[j][rows.index(q)][i] == xs[first + k][i]  # exact on its own primes
