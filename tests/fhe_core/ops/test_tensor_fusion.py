"""HMult's tensor product inside the relinearization's kernels: ops.intt_product (ModUp's inverse NTT reading a1 and
b1 and storing d2 = a1 b1) against ops.mul followed by the inverse NTT, on the CPU and on every CUDA kernel plan, bit
for bit, with q - 1 operands and the lazy forward's largest primes; and the one-word Barrett reduction (ShortBarrett:
the products of intt_product and of the fused inner product's tensor terms) with Python integers."""
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import RNSBasis, generate_primes, shoup_constants
from fhe_core.ring.primes import is_prime
from fhe_reference import fresh_rng, random_residues
from plan_cases import KERNEL_PLANS


def _largest_prime_below(limit: int, n: int) -> int:
    """The largest prime q = 1 mod 2N with q <= limit."""
    q = limit - (limit - 1) % (2 * n)
    while not is_prime(q):
        q -= 2 * n
    return q


def _edge_primes(log_n: int) -> list[int]:
    """The largest primes of the lazy forward ((5 + 2 log N) q < 2^64) and of its truncated columns ((5 + 4 k1 +
    2 k2) q < 2^64): the rows kernel's epilogue gets its largest c + bound q - x there."""
    n, k1 = 1 << log_n, log_n // 2
    return [_largest_prime_below((2 ** 64 - 1) // (5 + 2 * log_n), n),
            _largest_prime_below((2 ** 64 - 1) // (5 + 4 * k1 + 2 * (log_n - k1)), n)]


def _ciphertexts(rng, primes, n, device="cpu"):
    """Two degree-1 operands [2, l, N], q - 1 in both at the start of every row (the largest products)."""
    moduli = RNSBasis.get(primes, n).moduli
    a, b = (random_residues(rng, primes, (2,), n) for _ in range(2))
    for x in (a, b):
        x[:, :, :72] = moduli[:, :1] - 1
    return a.to(device), b.to(device)


def _misaligned(t: torch.Tensor) -> torch.Tensor:
    """A copy of t 8 bytes past a 16-byte aligned address (the CUDA kernels' fallback path)."""
    flat = torch.empty(1 + t.numel(), dtype=torch.int64, device=t.device)
    view = flat[1:].view(t.shape)
    view.copy_(t)
    return view


def test_intt_product_on_cpu_is_mul_then_intt():
    rng, _ = fresh_rng()
    n = 1 << 11
    primes = generate_primes([61, 58, 50], n)
    basis = RNSBasis.get(primes, n)
    a, b = _ciphertexts(rng, primes, n)
    coeffs, product = ops.intt_product(a[1], b[1], basis.moduli, basis.ntt_table)
    assert torch.equal(product, ops.mul(a[1], b[1], basis.moduli))
    assert torch.equal(coeffs, basis.intt(product))
    both = ops.intt_product(a, b, basis.moduli, basis.ntt_table)  # any leading dims
    assert torch.equal(both[1], ops.mul(a, b, basis.moduli)) and torch.equal(both[0], basis.intt(both[1]))
    with pytest.raises(RuntimeError, match="intt_product: b must have a's shape"):
        ops.intt_product(a[1], b, basis.moduli, basis.ntt_table)
    with pytest.raises(RuntimeError, match="intt_product: b must be contiguous"):
        ops.intt_product(a[1], b[1].t().contiguous().t(), basis.moduli, basis.ntt_table)


def _mod_down_case(rng, n, primes, p_rows=2):
    basis = RNSBasis.get(primes, n)
    x = random_residues(rng, primes, (2,), n)
    c = random_residues(rng, generate_primes([61] * p_rows, n) + list(primes), (2,), n)
    c[:, p_rows:, :64] = basis.moduli[:, :1] - 1
    consts = shoup_constants([int(q) - 1 for q in primes], primes)
    return basis, x, c, consts


def _short_barrett(z: int, q: int) -> int:
    """ShortBarrett::reduce of cuda/ntt_math.cuh on 64-bit words: one 64-bit quotient from z's bits above 2^(k-2)."""
    k = q.bit_length()
    ratio = 2 ** 128 // q
    mu = (ratio >> (66 - k)) % 2 ** 64
    assert mu < 2 ** 63 and mu == 2 ** (62 + k) // q
    s = k - 2
    x = ((z % 2 ** 64) >> s) | (((z >> 64) << (64 - s)) % 2 ** 64)
    assert x == z >> s and x < 2 ** 64  # z < 2^(2k + 1): no bit of z above 2^(s + 64)
    r = (z - ((x * mu) >> 64) * q) % 2 ** 64
    assert r < 3 * q
    r = r - 2 * q if r >= 2 * q else r
    return r - q if r >= q else r


def test_short_barrett_is_exact_up_to_its_bound():
    """z mod q for every z < 2^(2k + 1) it is given: at both ends of every prime size it meets (20 to 61 bits),
    for the largest sums of the tensor terms (y + a0 b1 + a1 b0 with y < 2q) and for random z."""
    rng, _ = fresh_rng()
    for k in (20, 30, 36, 40, 41, 46, 50, 58, 59, 60, 61):
        for q in (2 ** (k - 1) + 1, 2 ** k - 1, int(rng.integers(2 ** (k - 1), 2 ** k)) | 1):
            top = 2 ** (2 * k + 1) - 1
            for z in (0, q - 1, q, 2 * q + 2 * (q - 1) ** 2 - 1, (q - 1) ** 2, top, top - q,
                      *(int.from_bytes(rng.bytes(16), "little") % top for _ in range(50))):
                assert _short_barrett(z, q) == z % q, (k, q, z)


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [11, 16, 17])
def test_intt_product_on_cuda_every_plan(log_n):
    """intt_product on every kernel plan (the reference kernels and misaligned views: mul, then the inverse; the tuned
    ones: the products read by the inverse rows kernel) == the CPU build."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    primes = [*_edge_primes(log_n), *generate_primes([61, 50], n)]
    cpu, gpu = RNSBasis.get(primes, n), RNSBasis.get(primes, n, "cuda")
    a, b = _ciphertexts(rng, primes, n)
    expected = ops.intt_product(a[1], b[1], cpu.moduli, cpu.ntt_table)
    a1, b1 = a[1].cuda(), b[1].cuda()
    for plan_name, plan in KERNEL_PLANS.items():
        got = ops.intt_product(a1, b1, gpu.moduli, gpu.ntt_table, plan=plan)
        got_shifted = ops.intt_product(_misaligned(a1), b1, gpu.moduli, gpu.ntt_table, plan=plan)
        for name, pair in (("aligned", got), ("misaligned", got_shifted)):
            assert torch.equal(pair[1].cpu(), expected[1]), (plan_name, name, "product")
            assert torch.equal(pair[0].cpu(), expected[0]), (plan_name, name)


@pytest.mark.parametrize("device", [pytest.param("cpu"), pytest.param("cuda", marks=pytest.mark.gpu)])
def test_opcheck_of_the_fused_ops(device):
    """Schemas and fake implementations of intt_product and mod_down_ntt with an addend (torch.library.opcheck)."""
    rng, _ = fresh_rng()
    n = 1 << 10
    primes = generate_primes([50, 40], n)
    basis, x, c, consts = _mod_down_case(rng, n, primes)
    basis = RNSBasis.get(primes, n, device)
    a, b = _ciphertexts(rng, primes, n, device)
    x, c, consts = x.to(device), c.to(device), tuple(t.to(device) for t in consts)
    plan = ops.TUNED.kernel_flags
    cases = [(torch.ops.fhe_core.intt_product.default, (a[1], b[1], basis.moduli, basis.ntt_table, plan)),
             (torch.ops.fhe_core.mod_down_ntt.default, (x, c, 2, *consts, basis.moduli, basis.ntt_table, plan, a, 1))]
    for op, args in cases:
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))
