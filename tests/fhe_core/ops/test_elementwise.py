"""Element-wise RNS ops against Python integers, on CPU and CUDA."""
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import RNSBasis, generate_primes, shoup_constants
from fhe_reference import DEVICES, fresh_rng, random_residues

N = 1 << 10
PRIMES = generate_primes([61, 58, 50, 40, 31], N)


def _setup(device, shape_prefix=(2,)):
    rng, _ = fresh_rng()
    basis = RNSBasis.get(PRIMES, N, device)
    a = random_residues(rng, PRIMES, shape_prefix, N, device)
    b = random_residues(rng, PRIMES, shape_prefix, N, device)
    c = random_residues(rng, PRIMES, shape_prefix, N, device)
    # extreme residues in the first columns: 0 and q - 1 meet every combination
    top = basis.moduli[:, :1] - 1
    a[..., :2] = top
    b[..., 0] = top[:, 0]
    b[..., 1] = 0
    return rng, basis, a, b, c


def _expect(fn, *tensors):
    """Apply fn(x, y, ..., q) to every element in Python ints; q per limb (dim -2)."""
    flat = [t.cpu().reshape(-1, N) for t in tensors]
    rows = flat[0].shape[0]
    out = []
    for r in range(rows):
        q = PRIMES[r % len(PRIMES)]
        cols = [f[r].tolist() for f in flat]
        out.append([fn(*vals, q) for vals in zip(*cols)])
    return torch.tensor(out, dtype=torch.int64).reshape(tensors[0].shape)


REFERENCES = {
    "add": (ops.add, lambda x, y, q: (x + y) % q),
    "sub": (ops.sub, lambda x, y, q: (x - y) % q),
    "mul": (ops.mul, lambda x, y, q: (x * y) % q),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(REFERENCES))
@pytest.mark.usefixtures("cpu_path")  # every CPU path (conftest.py)
def test_binary_ops(device, name):
    _, basis, a, b, _ = _setup(device)
    op, ref = REFERENCES[name]
    assert torch.equal(op(a, b, basis.moduli).cpu(), _expect(ref, a, b))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_binary_ops_broadcast_b_over_leading_dims(device, name):
    """A ciphertext [2, l, N] against a plaintext [l, N], as in ct-pt products."""
    _, basis, a, b, _ = _setup(device)
    op, ref = REFERENCES[name]
    pt = b[0]
    assert torch.equal(op(a, pt, basis.moduli).cpu(), _expect(ref, a, pt.expand_as(a)))


@pytest.mark.parametrize("device", DEVICES)
def test_neg(device):
    _, basis, a, _, _ = _setup(device)
    a[..., 5] = 0
    assert torch.equal(ops.neg(a, basis.moduli).cpu(), _expect(lambda x, q: (-x) % q, a))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.usefixtures("cpu_path")  # every CPU path (conftest.py)
def test_mul_const(device):
    rng, basis, a, _, _ = _setup(device)
    constants = [int(rng.integers(0, q)) for q in PRIMES]
    constants[0] = PRIMES[0] - 1
    consts, shoup = shoup_constants(constants, PRIMES, device)
    got = ops.mul_const(a, consts, shoup, basis.moduli).cpu()
    expected = _expect(lambda x, q: x * constants[PRIMES.index(q)] % q, a)
    assert torch.equal(got, expected)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.usefixtures("cpu_path")  # every CPU path (conftest.py)
def test_sub_mul_const(device):
    rng, basis, a, b, _ = _setup(device)
    constants = [int(rng.integers(0, q)) for q in PRIMES]
    consts, shoup = shoup_constants(constants, PRIMES, device)
    got = ops.sub_mul_const(a, b, consts, shoup, basis.moduli).cpu()
    expected = _expect(lambda x, y, q: (x - y) * constants[PRIMES.index(q)] % q, a, b)
    assert torch.equal(got, expected)
    got_broadcast = ops.sub_mul_const(a, b[0], consts, shoup, basis.moduli).cpu()
    assert torch.equal(got_broadcast, _expect(lambda x, y, q: (x - y) * constants[PRIMES.index(q)] % q, a,
                                              b[0].expand_as(a)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.usefixtures("cpu_path")  # every CPU path (conftest.py)
def test_mul_add(device):
    _, basis, a, b, c = _setup(device)
    got = ops.mul_add(a, b, c, basis.moduli).cpu()
    assert torch.equal(got, _expect(lambda x, y, z, q: (x * y + z) % q, a, b, c))


@pytest.mark.parametrize("device", DEVICES)
def test_out_argument_reuses_buffer(device):
    _, basis, a, b, _ = _setup(device)
    out = torch.empty_like(a)
    result = ops.add(a, b, basis.moduli, out=out)
    assert result.data_ptr() == out.data_ptr()
    assert torch.equal(out, ops.add(a, b, basis.moduli))
    expected = ops.mul(a, b, basis.moduli)
    ops.mul(a, b, basis.moduli, out=a)  # in place
    assert torch.equal(a, expected)


@pytest.mark.parametrize("device", DEVICES)
def test_elementwise_rejects_mismatches(device):
    _, basis, a, b, _ = _setup(device)
    with pytest.raises(RuntimeError, match="add: b must have the shape of a"):
        ops.add(a, b[..., :512].contiguous(), basis.moduli)
    with pytest.raises(RuntimeError, match="mul: a has 5 limbs but moduli has 2"):
        ops.mul(a, b, basis.moduli[:2])
    with pytest.raises(RuntimeError, match="out must have shape"):
        ops.sub(a, b, basis.moduli, out=torch.empty_like(a[0]))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [2, 7, 1026])
@pytest.mark.usefixtures("cpu_path")  # every CPU path (conftest.py)
def test_elementwise_ops_on_any_row_length(device, n):
    """Rows that are not a multiple of 4 words (the decoder works on [l, 2 * slots]): no op may
    read or write past its row. Each op is checked against Python integers on every element."""
    rng, _ = fresh_rng()
    basis = RNSBasis.get(PRIMES, N, device)
    a, b, c = (random_residues(rng, PRIMES, (2,), n, device) for _ in range(3))
    qs = [PRIMES[r % len(PRIMES)] for r in range(2 * len(PRIMES))]
    flat = lambda t: t.cpu().reshape(-1, n).tolist()  # noqa: E731
    constants = [int(rng.integers(0, q)) for q in PRIMES]
    consts, shoup = shoup_constants(constants, PRIMES, device)
    cases = {
        "add": (ops.add(a, b, basis.moduli), lambda x, y, z, q, k: (x + y) % q),
        "mul": (ops.mul(a, b, basis.moduli), lambda x, y, z, q, k: x * y % q),
        "mul_add": (ops.mul_add(a, b, c, basis.moduli), lambda x, y, z, q, k: (x * y + z) % q),
        "mul_const": (ops.mul_const(a, consts, shoup, basis.moduli), lambda x, y, z, q, k: x * k % q),
        "sub_mul_const": (ops.sub_mul_const(a, b, consts, shoup, basis.moduli), lambda x, y, z, q, k: (x - y) * k % q),
    }
    for name, (got, ref) in cases.items():
        rows = flat(got)
        for r, (xs, ys, zs) in enumerate(zip(flat(a), flat(b), flat(c))):
            q = qs[r]
            k = constants[PRIMES.index(q)]
            assert rows[r] == [ref(x, y, z, q, k) for x, y, z in zip(xs, ys, zs)], f"{name}, row {r}, n = {n}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.usefixtures("cpu_path")  # every CPU path (conftest.py)
def test_elementwise_ops_on_unaligned_views(device):
    """A contiguous view starting one word into a buffer is not 16-byte aligned."""
    rng, _ = fresh_rng()
    basis = RNSBasis.get(PRIMES, N, device)
    rows, n = len(PRIMES), 1020
    buffer = torch.empty(rows * n + 1, dtype=torch.int64, device=device)
    view = buffer[1:].view(rows, n)
    view.copy_(random_residues(rng, PRIMES, (), n, device))
    b = random_residues(rng, PRIMES, (), n, device)
    got = ops.add(view, b, basis.moduli).cpu().tolist()
    for r, q in enumerate(PRIMES):
        assert got[r] == [(x + y) % q for x, y in zip(view[r].cpu().tolist(), b[r].cpu().tolist())]
