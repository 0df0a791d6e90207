"""ops.tensor_product against Python integers and the element-wise ops it replaces, CPU and CUDA."""
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import RNSBasis, generate_primes
from fhe_reference import DEVICES, fresh_rng, random_residues, to_ints


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [1024, 6])  # 6: no 16-byte vector path on CUDA
@pytest.mark.usefixtures("cpu_path")  # every CPU path (conftest.py)
def test_tensor_product_is_exact(device, n):
    """(a0 b0, a0 b1 + a1 b0, a1 b1) mod q_i on every coefficient, q - 1 everywhere in one column."""
    rng, _ = fresh_rng()
    primes = generate_primes([61, 59, 50, 36], 1024)
    moduli = RNSBasis.get(primes, 1024, device).moduli
    a = random_residues(rng, primes, (2,), n, device)
    b = random_residues(rng, primes, (2,), n, device)
    a[:, :, 0] = moduli[:, 0] - 1
    b[:, :, 0] = moduli[:, 0] - 1
    out = ops.tensor_product(a, b, moduli)
    assert out.shape == (3, len(primes), n)
    (a0, a1), (b0, b1), d = to_ints(a), to_ints(b), to_ints(out)
    for i, q in enumerate(primes):
        for c in range(n):
            x0, x1, y0, y1 = a0[i][c], a1[i][c], b0[i][c], b1[i][c]
            assert [d[0][i][c], d[1][i][c], d[2][i][c]] == [x0 * y0 % q, (x0 * y1 + x1 * y0) % q, x1 * y1 % q]
    expected_d1 = ops.mul_add(a[0], b[1], ops.mul(a[1], b[0], moduli), moduli)
    assert torch.equal(out[1], expected_d1)
    written = torch.empty_like(out)
    assert ops.tensor_product(a, b, moduli, out=written) is written and torch.equal(written, out)


@pytest.mark.gpu
def test_tensor_product_cuda_equals_cpu():
    rng, _ = fresh_rng()
    n = 1 << 16
    primes = generate_primes([61, 58, 41, 41, 41, 30], n)
    cpu, gpu = RNSBasis.get(primes, n, "cpu"), RNSBasis.get(primes, n, "cuda")
    a, b = (random_residues(rng, primes, (2,), n) for _ in range(2))
    assert torch.equal(ops.tensor_product(a.cuda(), b.cuda(), gpu.moduli).cpu(), ops.tensor_product(a, b, cpu.moduli))


@pytest.mark.parametrize("device", DEVICES)
def test_tensor_product_refuses_bad_shapes(device):
    primes = generate_primes([50, 50], 1024)
    moduli = RNSBasis.get(primes, 1024, device).moduli
    a = torch.zeros(2, 2, 1024, dtype=torch.int64, device=device)
    with pytest.raises(RuntimeError, match="tensor_product: a and b must both be \\[2, limbs, N\\]"):
        ops.tensor_product(a, a[:1], moduli)
    with pytest.raises(RuntimeError, match="tensor_product: a and b must both be \\[2, limbs, N\\]"):
        ops.tensor_product(torch.zeros(3, 2, 1024, dtype=torch.int64, device=device), a, moduli)
    flat = torch.zeros(1024, dtype=torch.int64, device=device)  # the functional form's checks come first
    with pytest.raises(RuntimeError, match="tensor_product: a must be \\[..., limbs, N\\]"):
        ops.tensor_product(flat, flat, moduli)
