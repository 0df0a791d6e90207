"""The bootstrapping circuit's fused ops (ks_inner_product_fused, linear_combination, giant_products,
ks_inner_product_pair, ks_inner_product_babies) against the composed ops they replace and against
Python integers, bit for bit, at random and extreme residues (q - 1 everywhere: the largest 128-bit
sums), on the CPU and (gpu marker) on CUDA."""
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import generate_primes, modulus_table, shoup_constants
from fhe_reference import DEVICES, fresh_rng, random_residues, to_ints

N = 1024
PRIMES = generate_primes([61, 60, 58, 50, 40], N)  # 61- and 60-bit words: the largest products


def _residues(rng, shape_prefix, primes, extreme, device):
    if extreme:  # q - 1 in every word
        rows = torch.tensor([q - 1 for q in primes], dtype=torch.int64).view(-1, 1).expand(len(primes), N)
        return rows.expand(*shape_prefix, len(primes), N).contiguous().to(device)
    return random_residues(rng, primes, shape_prefix, N, device)


def _composed_inner_product(digits, key, moduli, galois, add, add_galois, accumulate_into):
    """The same sum by the composed ops: permuted copies, ks_inner_product, additions."""
    permuted = ops.automorphism_ntt(digits, moduli, galois) if galois != 1 else digits
    out = ops.ks_inner_product(permuted, key, digits.shape[1], digits.shape[1], moduli)
    if add is not None:
        rows = add.shape[0]
        added = ops.automorphism_ntt(add, moduli[-rows:], add_galois) if add_galois != 1 else add
        out[0, -rows:] = ops.add(out[0, -rows:].contiguous(), added, moduli[-rows:])
    if accumulate_into is not None:
        out = ops.add(out, accumulate_into, moduli)
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("extreme", [False, True])
@pytest.mark.parametrize("galois, add_rows, add_galois, accumulate", [
    (1, 0, 1, False), (5, 0, 1, False), (2 * N - 1, 3, 2 * N - 1, False), (25, 5, 25, True), (1, 5, 125, True)])
def test_ks_inner_product_fused_equals_the_composed_ops(device, extreme, galois, add_rows, add_galois, accumulate):
    rng, _ = fresh_rng()
    moduli = modulus_table(PRIMES).to(device)
    digits = _residues(rng, (3,), PRIMES, extreme, device)
    key = _residues(rng, (4, 2), PRIMES, extreme, device)  # one digit more than used: a prefix is read
    add = _residues(rng, (), PRIMES[-add_rows:], extreme, device) if add_rows else None
    before = _residues(rng, (2,), PRIMES, extreme, device) if accumulate else None
    expected = _composed_inner_product(digits, key, moduli, galois, add, add_galois, before)
    buffer = torch.zeros((2, 3, len(PRIMES), N), dtype=torch.int64, device=device)  # components apart: [:, 1]
    out = buffer[:, 1]
    if accumulate:
        out.copy_(before)
    result = ops.ks_inner_product_fused(digits, key, len(PRIMES), len(PRIMES), moduli, out=out, galois=galois,
                                        add=add, add_galois=add_galois, accumulate=accumulate)
    assert result.data_ptr() == out.data_ptr()
    assert torch.equal(out, expected)
    assert not buffer[:, 0].any() and not buffer[:, 2].any()  # nothing written outside out


def test_ks_inner_product_fused_against_python_integers():
    rng, _ = fresh_rng()
    primes = PRIMES[:2]
    moduli = modulus_table(primes)
    digits, key = random_residues(rng, primes, (2,), N), random_residues(rng, primes, (2, 2), N)
    add = random_residues(rng, primes[1:], (), N)
    out = torch.empty((2, 2, N), dtype=torch.int64)
    ops.ks_inner_product_fused(digits, key, 2, 2, moduli, out=out, galois=3, add=add, add_galois=3)
    d, k, a = to_ints(digits), to_ints(key), to_ints(add)
    source = to_ints(ops.automorphism_ntt(torch.arange(N, dtype=torch.int64).view(1, N), moduli[:1], 3))[0]
    for c in (0, 1):
        for i, q in enumerate(primes):
            for x in (0, 1, N // 2, N - 1):
                value = sum(d[j][i][source[x]] * k[j][c][i][x] for j in range(2))
                if c == 0 and i == 1:
                    value += a[0][source[x]]
                assert int(out[c, i, x]) == value % q


def test_ks_inner_product_fused_refuses_bad_operands():
    moduli = modulus_table(PRIMES)
    digits = torch.zeros((2, len(PRIMES), N), dtype=torch.int64)
    key = torch.zeros((2, 2, len(PRIMES), N), dtype=torch.int64)
    out = torch.empty((2, len(PRIMES), N), dtype=torch.int64)
    with pytest.raises(RuntimeError, match="Galois element must be odd"):
        ops.ks_inner_product_fused(digits, key, len(PRIMES), len(PRIMES), moduli, out=out, galois=4)
    with pytest.raises(RuntimeError, match="out must be \\[2, 5, 1024\\] with contiguous"):
        ops.ks_inner_product_fused(digits, key, len(PRIMES), len(PRIMES), moduli, out=out[:, :, :N // 2])
    with pytest.raises(RuntimeError, match="add must be"):
        ops.ks_inner_product_fused(digits, key, len(PRIMES), len(PRIMES), moduli, out=out,
                                   add=torch.zeros((6, N), dtype=torch.int64))
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        ops.ks_inner_product_fused(digits, key, len(PRIMES), len(PRIMES), moduli, out=digits)


def _weights(rng, count, primes, extreme, device):
    if extreme:
        return torch.tensor([[[q - 1, q - 1] for q in primes]] * count, dtype=torch.int64, device=device)
    return torch.tensor([[[int(rng.integers(0, q)), int(rng.integers(0, q))] for q in primes] for _ in range(count)],
                        dtype=torch.int64, device=device)


def _composed_combination(terms, weights, moduli, constant, constant_components, limbs, primes):
    """sum_k w_k t_k (+ constant) by mul_const on the [..., 2 limbs, N/2] halves view and add."""
    halves_moduli = moduli.repeat_interleave(2, dim=0)
    halves_primes = [q for q in primes for _ in range(2)]
    out = None
    for t, w in zip(terms, weights):
        rows = t[:, :limbs].contiguous()
        consts, consts_shoup = shoup_constants(w.reshape(-1).tolist(), halves_primes, t.device)
        term = ops.mul_const(rows.view(rows.shape[0], 2 * limbs, N // 2), consts, consts_shoup,
                             halves_moduli).view(rows.shape)
        out = term if out is None else ops.add(out, term, moduli)
    if constant is not None:
        c = constant.reshape(-1, 1).expand(2 * limbs, N // 2).reshape(limbs, N)
        out[:constant_components] = ops.add(out[:constant_components].contiguous(), c, moduli)
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("extreme", [False, True])
@pytest.mark.parametrize("count, constant_components", [(1, 1), (3, 0), (7, 2), (16, 1)])
def test_linear_combination_equals_mul_const_and_add(device, extreme, count, constant_components):
    rng, _ = fresh_rng()
    limbs = 3
    moduli = modulus_table(PRIMES[:limbs]).to(device)
    # terms at different levels (more rows than the output: read in place) and batch strides
    terms = [_residues(rng, (3,), PRIMES[:limbs + k % 3], extreme, device) for k in range(count)]
    weights = _weights(rng, count, PRIMES[:limbs], extreme, device)
    constant = _weights(rng, 1, PRIMES[:limbs], extreme, device)[0] if constant_components else None
    expected = _composed_combination(terms, weights, moduli, constant, constant_components, limbs, PRIMES[:limbs])
    out = torch.empty((3, limbs, N), dtype=torch.int64, device=device)
    ops.linear_combination(terms, weights, moduli, out=out, constant=constant,
                           constant_components=constant_components)
    assert torch.equal(out, expected)


def test_linear_combination_against_python_integers():
    rng, _ = fresh_rng()
    primes = PRIMES[:2]
    moduli = modulus_table(primes)
    terms = [random_residues(rng, PRIMES[:3], (2,), N), random_residues(rng, primes, (2,), N)]
    weights, constant = _weights(rng, 2, primes, False, "cpu"), _weights(rng, 1, primes, False, "cpu")[0]
    out = torch.empty((2, 2, N), dtype=torch.int64)
    ops.linear_combination(terms, weights, moduli, out=out, constant=constant)
    t, w, c = [to_ints(x) for x in terms], to_ints(weights), to_ints(constant)
    for b in (0, 1):
        for i, q in enumerate(primes):
            for x in (0, N // 2 - 1, N // 2, N - 1):
                half = int(x >= N // 2)
                value = sum(w[k][i][half] * t[k][b][i][x] for k in range(2)) + (c[i][half] if b == 0 else 0)
                assert int(out[b, i, x]) == value % q


def test_linear_combination_refuses_bad_operands():
    moduli = modulus_table(PRIMES[:2])
    out = torch.empty((2, 2, N), dtype=torch.int64)
    term = torch.zeros((2, 2, N), dtype=torch.int64)
    weights = torch.zeros((1, 2, 2), dtype=torch.int64)
    with pytest.raises(RuntimeError, match="1 to 16 terms"):
        ops.linear_combination([term] * 17, torch.zeros((17, 2, 2), dtype=torch.int64), moduli, out=out)
    with pytest.raises(RuntimeError, match="weights must be"):
        ops.linear_combination([term], torch.zeros((2, 2, 2), dtype=torch.int64), moduli, out=out)
    with pytest.raises(RuntimeError, match="term 0 must be"):
        ops.linear_combination([term[:, :1]], weights, moduli, out=out)
    with pytest.raises(RuntimeError, match="constant_components must be in"):
        ops.linear_combination([term], weights, moduli, out=out, constant=torch.zeros((2, 2), dtype=torch.int64),
                               constant_components=3)
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        ops.linear_combination([out], weights, moduli, out=out)


@pytest.mark.gpu
@pytest.mark.parametrize("extreme", [False, True])
def test_fused_ops_on_cuda_equal_the_cpu(extreme):
    rng, _ = fresh_rng()
    moduli = modulus_table(PRIMES)
    digits, key = _residues(rng, (3,), PRIMES, extreme, "cpu"), _residues(rng, (3, 2), PRIMES, extreme, "cpu")
    add, before = _residues(rng, (), PRIMES[2:], extreme, "cpu"), _residues(rng, (2,), PRIMES, extreme, "cpu")
    outs = []
    for device in ("cpu", "cuda"):
        out = before.to(device).clone()
        ops.ks_inner_product_fused(digits.to(device), key.to(device), len(PRIMES), len(PRIMES), moduli.to(device),
                                   out=out, galois=2 * N - 5, add=add.to(device), add_galois=7, accumulate=True)
        outs.append(out.cpu())
    assert torch.equal(*outs)
    terms = [_residues(rng, (4,), PRIMES, extreme, "cpu") for _ in range(5)]
    weights, constant = _weights(rng, 5, PRIMES[:4], extreme, "cpu"), _weights(rng, 1, PRIMES[:4], extreme, "cpu")[0]
    outs = []
    for device in ("cpu", "cuda"):
        out = torch.empty((4, 4, N), dtype=torch.int64, device=device)
        ops.linear_combination([t.to(device) for t in terms], weights.to(device), moduli[:4].to(device), out=out,
                               constant=constant.to(device), constant_components=2)
        outs.append(out.cpu())
    assert torch.equal(*outs)


def _giant_case(rng, device, extreme):
    """A stack of 6 baby steps and 3 giants: consecutive babies (0-3), scattered (5, 1, 4), one (2)."""
    moduli = modulus_table(PRIMES).to(device)
    babies = _residues(rng, (6, 2), PRIMES, extreme, device)
    positions = [[0, 1, 2, 3], [5, 1, 4], [2]]
    pts = [_residues(rng, (len(p),), PRIMES, extreme, device) for p in positions]
    index = [-1] * (3 * 6)
    for g, p in enumerate(positions):
        for t, j in enumerate(p):
            index[g * 6 + j] = t
    return moduli, babies, positions, pts, index


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("extreme", [False, True])
def test_giant_products_equal_one_inner_product_per_giant(device, extreme):
    rng, _ = fresh_rng()
    moduli, babies, positions, pts, index = _giant_case(rng, device, extreme)
    buffer = torch.zeros((2, 5, len(PRIMES), N), dtype=torch.int64, device=device)
    out = buffer[:, 1:4]  # component-major, a slice of a larger buffer
    ops.giant_products(babies, pts, index, moduli, out=out)
    for g, p in enumerate(positions):
        expected = ops.ks_inner_product(pts[g], babies[p].contiguous(), len(PRIMES), len(PRIMES), moduli)
        assert torch.equal(out[:, g], expected)
    assert not buffer[:, 0].any() and not buffer[:, 4].any()


def test_giant_products_against_python_integers():
    rng, _ = fresh_rng()
    moduli, babies, positions, pts, index = _giant_case(rng, "cpu", False)
    out = torch.empty((2, 3, len(PRIMES), N), dtype=torch.int64)
    ops.giant_products(babies, pts, index, moduli, out=out)
    b, p = to_ints(babies), [to_ints(x) for x in pts]
    for g, used in enumerate(positions):
        for c in (0, 1):
            for i, q in enumerate(PRIMES):
                for x in (0, N - 1):
                    assert int(out[c, g, i, x]) == sum(p[g][t][i][x] * b[j][c][i][x] for t, j in enumerate(used)) % q


def test_giant_products_refuse_bad_tables():
    rng, _ = fresh_rng()
    moduli, babies, _, pts, index = _giant_case(rng, "cpu", False)
    out = torch.empty((2, 3, len(PRIMES), N), dtype=torch.int64)
    with pytest.raises(RuntimeError, match="must pair with exactly one baby step"):
        ops.giant_products(babies, pts, [0 if i == 4 else v for i, v in enumerate(index)], moduli, out=out)
    with pytest.raises(RuntimeError, match="index must have giants x n1 = 18 entries"):
        ops.giant_products(babies, pts, index[:-1], moduli, out=out)
    with pytest.raises(RuntimeError, match="1 to 4 giant steps"):
        ops.giant_products(babies, pts * 2, index * 2, moduli, out=out)
    with pytest.raises(RuntimeError, match="outside \\[-1, 1\\)"):
        ops.giant_products(babies, pts, index[:12] + [-1, -1, 1, -1, -1, -1], moduli, out=out)


@pytest.mark.gpu
@pytest.mark.parametrize("extreme", [False, True])
def test_giant_products_on_cuda_equal_the_cpu(extreme):
    rng, _ = fresh_rng()
    moduli, babies, _, pts, index = _giant_case(rng, "cpu", extreme)
    outs = []
    for device in ("cpu", "cuda"):
        out = torch.empty((2, 3, len(PRIMES), N), dtype=torch.int64, device=device)
        ops.giant_products(babies.to(device), [p.to(device) for p in pts], index, moduli.to(device), out=out)
        outs.append(out.cpu())
    assert torch.equal(*outs)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("extreme", [False, True])
def test_ks_inner_product_pair_equals_two_inner_products(device, extreme):
    rng, _ = fresh_rng()
    moduli = modulus_table(PRIMES).to(device)
    a, b = _residues(rng, (3,), PRIMES, extreme, device), _residues(rng, (3,), PRIMES, extreme, device)
    key = _residues(rng, (4, 2), PRIMES + PRIMES[:1], extreme, device)  # one row more: q_count/p_row map
    rows = len(PRIMES)
    out = torch.empty((2, 2, rows, N), dtype=torch.int64, device=device)
    ops.ks_inner_product_pair(a, b, key, rows - 2, rows - 1, moduli, out=out)
    for i, digits in enumerate((a, b)):
        assert torch.equal(out[:, i], ops.ks_inner_product(digits, key, rows - 2, rows - 1, moduli))
    with pytest.raises(RuntimeError, match="the two digit sets differ in shape"):
        ops.ks_inner_product_pair(a, b[:2], key, rows - 2, rows - 1, moduli, out=out)


def test_linear_combination_into_a_strided_out():
    """out may be one ciphertext of a pair tensor ([B, 2, limbs, N][:, i]): the same words, nothing else written."""
    rng, _ = fresh_rng()
    moduli = modulus_table(PRIMES[:3])
    terms = [random_residues(rng, PRIMES[:3], (2,), N) for _ in range(2)]
    weights, constant = _weights(rng, 2, PRIMES[:3], False, "cpu"), _weights(rng, 1, PRIMES[:3], False, "cpu")[0]
    expected = torch.empty((2, 3, N), dtype=torch.int64)
    ops.linear_combination(terms, weights, moduli, out=expected, constant=constant)
    pair = torch.zeros((2, 2, 3, N), dtype=torch.int64)
    ops.linear_combination(terms, weights, moduli, out=pair[:, 1], constant=constant)
    assert torch.equal(pair[:, 1], expected) and not pair[:, 0].any()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("extreme", [False, True])
def test_ks_inner_product_babies_equal_one_fused_inner_product_each(device, extreme):
    rng, _ = fresh_rng()
    moduli = modulus_table(PRIMES).to(device)
    digits = _residues(rng, (3,), PRIMES, extreme, device)
    elements, positions = [5, 25, 2 * N - 1], [3, 0, 2]
    keys = [_residues(rng, (3, 2), PRIMES, extreme, device) for _ in elements]
    add = _residues(rng, (), PRIMES[2:], extreme, device)
    out = torch.zeros((4, 2, len(PRIMES), N), dtype=torch.int64, device=device)
    ops.ks_inner_product_babies(digits, keys, elements, positions, len(PRIMES), len(PRIMES), moduli, out=out, add=add)
    for key, element, position in zip(keys, elements, positions):
        expected = torch.empty((2, len(PRIMES), N), dtype=torch.int64, device=device)
        ops.ks_inner_product_fused(digits, key, len(PRIMES), len(PRIMES), moduli, out=expected, galois=element,
                                   add=add, add_galois=element)
        assert torch.equal(out[position], expected)
    assert not out[1].any()  # no baby at position 1
    with pytest.raises(RuntimeError, match="two baby steps write position 3"):
        ops.ks_inner_product_babies(digits, keys, elements, [3, 3, 2], len(PRIMES), len(PRIMES), moduli, out=out)
    with pytest.raises(RuntimeError, match="one Galois element and one position each"):
        ops.ks_inner_product_babies(digits, keys, elements[:2], positions, len(PRIMES), len(PRIMES), moduli, out=out)


@pytest.mark.gpu
def test_ks_inner_product_babies_on_cuda_equal_the_cpu():
    rng, _ = fresh_rng()
    moduli = modulus_table(PRIMES)
    digits = _residues(rng, (3,), PRIMES, True, "cpu")
    keys = [_residues(rng, (3, 2), PRIMES, False, "cpu") for _ in range(16)]
    elements = [pow(5, k, 2 * N) for k in range(1, 17)]
    add = _residues(rng, (), PRIMES[1:], False, "cpu")
    outs = []
    for device in ("cpu", "cuda"):
        out = torch.empty((16, 2, len(PRIMES), N), dtype=torch.int64, device=device)
        ops.ks_inner_product_babies(digits.to(device), [k.to(device) for k in keys], elements, list(range(16)),
                                    len(PRIMES) - 1, len(PRIMES) - 1, moduli.to(device), out=out, add=add.to(device))
        outs.append(out.cpu())
    assert torch.equal(*outs)
