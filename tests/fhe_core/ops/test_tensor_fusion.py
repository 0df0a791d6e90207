"""HMult's tensor product inside the relinearization's kernels (ops.kernel_variant "tensor_fuse"): ops.intt_product
(ModUp's inverse NTT reading a1 and b1) and ops.mod_down_ntt's times (ModDown's last store adding a0 b0 and a0 b1 +
a1 b0) against ops.mul / ops.tensor_product followed by the plain ops, on the CPU and on every CUDA NTT variant,
bit for bit, with q - 1 operands and the lazy forward's largest primes; and the epilogue's bounds and the one-word
Barrett reduction (ShortBarrett) with Python integers."""
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import RNSBasis, generate_primes, shoup_constants
from fhe_core.ring.primes import is_prime
from fhe_reference import fresh_rng, random_residues

NTT_VARIANTS = tuple(range(7))


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


def test_mod_down_ntt_times_on_cpu_adds_the_tensor_products():
    rng, _ = fresh_rng()
    n = 1 << 11
    primes = generate_primes([61, 58, 50], n)
    basis, x, c, consts = _mod_down_case(rng, n, primes)
    a, b = _ciphertexts(rng, primes, n)
    args = (x, c, 2, *consts, basis.moduli, basis.ntt_table)
    expected = ops.mod_down_ntt(*args, ops.tensor_product(a, b, basis.moduli)[:2].contiguous())
    assert torch.equal(ops.mod_down_ntt(*args, a, times=b), expected)
    out = torch.empty_like(x)
    assert ops.mod_down_ntt(*args, a, times=b, out=out) is out and torch.equal(out, expected)
    with pytest.raises(RuntimeError, match="times needs add"):
        ops.mod_down_ntt(*args, times=b)
    with pytest.raises(RuntimeError, match="times and add_galois cannot be combined"):
        ops.mod_down_ntt(*args, a, add_galois=5, times=b)
    with pytest.raises(RuntimeError, match="add and times must be contiguous \\[2, limbs, N\\]"):
        ops.mod_down_ntt(*args, a[:1], times=b[:1])
    with pytest.raises(RuntimeError, match="times must be int64"):
        ops.mod_down_ntt(*args, a, times=b.to(torch.int32))


def _shoup_lazy(a: int, w: int, w_shoup: int, q: int) -> int:
    """mul_shoup_lazy of modarith.h on 64-bit words."""
    return (a * w - ((a * w_shoup) >> 64) * q) % 2 ** 64


def _reduce128(z: int, q: int) -> int:
    """reduce128 of modarith.h (Barrett with floor(2^128 / q), the low x low partial product dropped)."""
    ratio = 2 ** 128 // q
    z_lo, z_hi, r_lo, r_hi = z % 2 ** 64, z >> 64, ratio % 2 ** 64, ratio >> 64
    c0 = (z_lo * r_lo) >> 64
    t = z_lo * r_hi + c0
    u = z_hi * r_lo + t % 2 ** 64
    qhat = (z_hi * r_hi + (t >> 64) + (u >> 64)) % 2 ** 64
    r = (z_lo - qhat * q) % 2 ** 64
    assert r < 3 * q
    r = r - 2 * q if r >= 2 * q else r
    return r - q if r >= q else r


def _short_barrett(z: int, q: int) -> int:
    """ShortBarrett::reduce of ntt.cu on 64-bit words: one 64-bit quotient from z's bits above 2^(k-2)."""
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


@pytest.mark.parametrize("log_n", [11, 16, 17])
def test_tensor_epilogue_bounds_at_the_edges(log_n):
    """The rows kernel's epilogue with products, step by step on Python integers at the largest primes it takes
    and the extreme operands: y = Shoup(c + bound q - x) < 2q, y + a0 b1 + a1 b0 < 2^128, and the single Barrett
    reduction gives (y + d) mod q (canonical), what the unfused add_mod(y mod q, d) gives."""
    n = 1 << log_n
    k1 = log_n // 2
    lazy, trunc = 4 + 2 * log_n, 4 + 4 * k1 + 2 * (log_n - k1)
    for q, bound in [(_edge_primes(log_n)[0], lazy), (_edge_primes(log_n)[1], trunc),
                     (generate_primes([61], n)[0], 4)]:  # Harvey's bound 4 for primes above the lazy range
        assert (bound + 1) * q < 2 ** 64
        for w in (1, q - 1, q // 3):
            w_shoup = (w << 64) // q
            for c, x in ((q - 1, 0), (0, bound * q - 1), (q - 1, bound * q - 1)):
                y = _shoup_lazy(c + bound * q - x, w, w_shoup, q)
                assert y < 2 * q and y % q == (c - x) * w % q
                for a0, a1, b0, b1 in ((q - 1,) * 4, (q - 1, 0, q - 1, q - 1), (0, 0, 0, 0)):
                    z1 = y + a0 * b1 + a1 * b0
                    assert z1 < 2 ** 128
                    assert _reduce128(z1, q) == (y % q + (a0 * b1 + a1 * b0) % q) % q
                    assert _reduce128(y + a0 * b0, q) == (y % q + a0 * b0 % q) % q


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [11, 16, 17])
def test_intt_product_on_cuda_every_variant(log_n):
    """intt_product on every NTT variant (ntt variants < 5 and misaligned views: mul, then the inverse; >= 5: the
    products read by the inverse rows kernel) == the CPU build."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    primes = [*_edge_primes(log_n), *generate_primes([61, 50], n)]
    cpu, gpu = RNSBasis.get(primes, n), RNSBasis.get(primes, n, "cuda")
    a, b = _ciphertexts(rng, primes, n)
    expected = ops.intt_product(a[1], b[1], cpu.moduli, cpu.ntt_table)
    a1, b1 = a[1].cuda(), b[1].cuda()
    for variant in NTT_VARIANTS:
        with ops.use_kernel_variant("ntt", variant):
            got = ops.intt_product(a1, b1, gpu.moduli, gpu.ntt_table)
            got_shifted = ops.intt_product(_misaligned(a1), b1, gpu.moduli, gpu.ntt_table)
        for name, pair in (("aligned", got), ("misaligned", got_shifted)):
            assert torch.equal(pair[1].cpu(), expected[1]), (variant, name, "product")
            assert torch.equal(pair[0].cpu(), expected[0]), (variant, name)


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [11, 16, 17])
def test_mod_down_ntt_times_on_cuda_every_variant(log_n):
    """mod_down_ntt(add=a, times=b) on every NTT variant (ntt variants >= 3: the products in the rows kernel's
    store; below and for misaligned views: tensor_product first) == the CPU build, with the lazy forward's largest
    primes and q - 1 operands."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    primes = [*_edge_primes(log_n), *generate_primes([61, 50], n)]
    basis, x, c, consts = _mod_down_case(rng, n, primes)
    a, b = _ciphertexts(rng, primes, n)
    expected = ops.mod_down_ntt(x, c, 2, *consts, basis.moduli, basis.ntt_table, a, times=b)
    gpu = RNSBasis.get(primes, n, "cuda")
    gpu_args = (x.cuda(), c.cuda(), 2, *(t.cuda() for t in consts), gpu.moduli, gpu.ntt_table)
    a_gpu, b_gpu = a.cuda(), b.cuda()
    for variant in NTT_VARIANTS:
        with ops.use_kernel_variant("ntt", variant):
            got = ops.mod_down_ntt(*gpu_args, a_gpu, times=b_gpu).cpu()
            got_shifted = ops.mod_down_ntt(*gpu_args, a_gpu, times=_misaligned(b_gpu)).cpu()
        assert torch.equal(got, expected), variant
        assert torch.equal(got_shifted, expected), (variant, "misaligned")


@pytest.mark.parametrize("device", [pytest.param("cpu"), pytest.param("cuda", marks=pytest.mark.gpu)])
def test_opcheck_of_the_fused_ops(device):
    """Schemas and fake implementations of intt_product and mod_down_ntt with times (torch.library.opcheck)."""
    rng, _ = fresh_rng()
    n = 1 << 10
    primes = generate_primes([50, 40], n)
    basis, x, c, consts = _mod_down_case(rng, n, primes)
    basis = RNSBasis.get(primes, n, device)
    a, b = _ciphertexts(rng, primes, n, device)
    x, c, consts = x.to(device), c.to(device), tuple(t.to(device) for t in consts)
    cases = [(torch.ops.fhe_core.intt_product.default, (a[1], b[1], basis.moduli, basis.ntt_table)),
             (torch.ops.fhe_core.mod_down_ntt.default, (x, c, 2, *consts, basis.moduli, basis.ntt_table, a, 1, b))]
    for op, args in cases:
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))
