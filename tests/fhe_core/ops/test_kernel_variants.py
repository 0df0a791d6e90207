"""The alternative CUDA kernels (ops.kernel_variant) against the reference kernels, the CPU build and
Python integers, bit for bit; and the variant switch itself."""
import random

import numpy as np
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import BasisConverter, RNSBasis, generate_primes
from fhe_reference import fresh_rng, random_residues, to_ints


def test_kernel_variant_is_read_set_and_restored():
    before = ops.kernel_variant("conv")
    assert before in (0, 1)
    with ops.use_kernel_variant("conv", 1 - before):
        assert ops.kernel_variant("conv") == 1 - before
    assert ops.kernel_variant("conv") == before


def test_kernel_variant_rejects_unknown_names_and_values():
    with pytest.raises(RuntimeError, match="unknown kernel 'fft'"):
        ops.kernel_variant("fft", 0)
    with pytest.raises(RuntimeError, match="conv is 0 \\(reference\\) or 1, got 2"):
        ops.kernel_variant("conv", 2)


def _conv_expected(x, src, dst, exact):
    """out[b][r][i] from Python integers: sum_k [x_k (Q/q_k)^-1]_{q_k} (Q/q_k) mod p_r, minus v Q for
    the exact conversion (v = the rounding of sum_k y_k / q_k, computed in exact rationals here)."""
    big_q = src.modulus
    qhat = [big_q // q for q in src.primes]
    qhat_inv = [pow(h % q, -1, q) for h, q in zip(qhat, src.primes)]
    xs = to_ints(x)
    out = []
    for xb in xs:
        rows = [[0] * len(xb[0]) for _ in dst.primes]
        for i in range(len(xb[0])):
            y = [xb[k][i] * qhat_inv[k] % q for k, q in enumerate(src.primes)]
            total = sum(yk * h for yk, h in zip(y, qhat))
            if exact:  # floor(sum y_k / q_k + 1/2) = floor((2 total + Q) / 2Q)
                total -= ((2 * total + big_q) // (2 * big_q)) * big_q
            for r, p in enumerate(dst.primes):
                rows[r][i] = total % p
        out.append(rows)
    return out


def _convert_on(device, x, primes_in, primes_out, exact):
    """ops.bconv of x ([..., l_in, any length]) with the constants of a converter built at N = 1024."""
    src, dst = RNSBasis.get(primes_in, 1024, device), RNSBasis.get(primes_out, 1024, device)
    conv = BasisConverter.get(src, dst)
    return ops.bconv(x.to(device), src.moduli, dst.moduli, conv.qhat_inv, conv.qhat_inv_shoup, conv.qhat_mod_p,
                     conv.neg_q_mod_p if exact else None).cpu()


# (input limbs, output limbs, exact, N): slots = inputs (+1 exact) in 2..16 take the tensor cores
# (1, 2, 3 or 4 K tiles), 1 and 17 fall back to the reference kernel; output counts not a multiple
# of the 8-row block; an N that is no multiple of the 128-coefficient tile falls back too.
CONV_SHAPES = [(1, 3, False, 1024), (1, 4, True, 1024), (2, 3, False, 1024), (4, 9, True, 1024),
               (11, 31, False, 4096), (11, 31, True, 2048), (15, 20, True, 1024), (16, 8, False, 1024),
               (16, 5, True, 1024), (5, 27, False, 96)]


@pytest.mark.gpu
@pytest.mark.parametrize("l_in,l_out,exact,n", CONV_SHAPES)
def test_tensor_core_conv_is_bit_identical(l_in, l_out, exact, n):
    """Variant 1 (tensor cores) == variant 0 (mac128) == the CPU build on every coefficient, and ==
    Python integers on a sample of coefficients; 61-bit destination primes (every byte of the shifted
    constants in use) and inputs at q - 1 included."""
    rng, _ = fresh_rng()
    primes = generate_primes([60] * l_in + [61] * (l_out // 2) + [46] * (l_out - l_out // 2), 1024)
    primes_in, primes_out = primes[:l_in], primes[l_in:]
    x = random_residues(rng, primes_in, (2,), n)
    x[0, :, :16] = torch.tensor([q - 1 for q in primes_in]).unsqueeze(1)
    expected = _convert_on("cpu", x, primes_in, primes_out, exact)
    for variant in (0, 1):
        with ops.use_kernel_variant("conv", variant):
            got = _convert_on("cuda", x, primes_in, primes_out, exact)
        assert torch.equal(got, expected), f"variant {variant}: {(got != expected).nonzero()[:8].tolist()}"
    columns = np.unique(np.concatenate([np.arange(16), rng.integers(0, n, size=24)]))
    ints = _conv_expected(x[..., columns], RNSBasis.get(primes_in, 1024), RNSBasis.get(primes_out, 1024), exact)
    # (the exact conversion may round either way within ~2^-50 Q of Q/2: not hit by random inputs)
    assert to_ints(expected[..., columns]) == ints


@pytest.mark.gpu
@pytest.mark.parametrize("alpha,q_count", [(1, 7), (3, 8), (11, 31)])
def test_tensor_core_mod_up_conv_is_bit_identical(alpha, q_count):
    """ModUp's batched extension (dnum digits, the last one shorter) on both variants and the CPU, with
    and without the digits' own rows copied from a given tensor."""
    rng, _ = fresh_rng()
    n = 1024
    primes = generate_primes([58] * q_count + [61] * alpha, n)
    q_primes = primes[:q_count]
    dnum = -(-q_count // alpha)
    rows = alpha + q_count
    qp = RNSBasis.get(primes[q_count:] + q_primes, n, "cpu")
    inv, table = [], []
    for j in range(dnum):
        digit = q_primes[j * alpha:(j + 1) * alpha]
        big_q = 1
        for q in digit:
            big_q *= q
        inv += [pow(big_q // q % q, -1, q) for q in digit]
        block = [[(big_q // q) % p for p in qp.primes] for q in digit] + [[0] * rows] * (alpha - len(digit))
        table += block
    q_basis = RNSBasis.get(q_primes, n, "cpu")
    inv_t = torch.tensor(inv, dtype=torch.int64)
    inv_shoup = torch.tensor([((w << 64) // q) - (1 << 64 if ((w << 64) // q) >= 1 << 63 else 0)
                              for w, q in zip(inv, q_primes)], dtype=torch.int64)
    table_t = torch.tensor([[v - (1 << 64) if v >= 1 << 63 else v for v in row] for row in table],
                           dtype=torch.int64).reshape(dnum, alpha, rows)
    x = random_residues(rng, q_primes, (), n)
    own = random_residues(rng, q_primes, (), n)  # stands for the NTT-domain input
    args = (q_basis.moduli, inv_t, inv_shoup, qp.moduli, table_t)
    expected = ops.mod_up_conv(x, *args)
    expected_own = expected.clone()
    for j in range(dnum):  # digit j's own rows (after the alpha rows of P) come from `own`
        count = min(alpha, q_count - j * alpha)
        expected_own[j, alpha + j * alpha:alpha + j * alpha + count] = own[j * alpha:j * alpha + count]
    assert torch.equal(ops.mod_up_conv(x, *args, own), expected_own)
    for variant in (0, 1):
        with ops.use_kernel_variant("conv", variant):
            got = ops.mod_up_conv(x.cuda(), *(t.cuda() for t in args)).cpu()
            got_own = ops.mod_up_conv(x.cuda(), *(t.cuda() for t in args), own.cuda()).cpu()
        assert torch.equal(got, expected), f"variant {variant}"
        assert torch.equal(got_own, expected_own), f"variant {variant}, own rows copied"


# ---- NTT with the truncated Shoup quotient ----------------------------------------------------------

def _mulhi_approx(a, b):
    """ntt.cu's mulhi_approx in Python integers: the high word without the low partial products."""
    a0, a1, b0, b1 = a & 0xFFFFFFFF, a >> 32, b & 0xFFFFFFFF, b >> 32
    return a1 * b1 + ((a1 * b0) >> 32) + ((a0 * b1) >> 32)


def test_truncated_shoup_quotient_bounds():
    """The derivation behind kernel_variant('ntt') = 1: mulhi_approx undershoots floor(a b / 2^64) by
    at most 2, so a w - quotient q is in [0, 4q) for every a < 2^64 and w < q, and the forward
    butterfly keeps [0, 8q) and the inverse [0, 4q) (q < 2^61, so 8q < 2^64); on extremes and on
    random words."""
    _, seed = fresh_rng()
    rand = random.Random(seed)
    words = [0, 1, 2 ** 32 - 1, 2 ** 32, 2 ** 63, 2 ** 64 - 1] + [rand.getrandbits(64) for _ in range(200)]
    for a in words:
        for b in words[:40]:
            exact = (a * b) >> 64
            assert exact - 2 <= _mulhi_approx(a, b) <= exact
    worst = 0
    for q in generate_primes([61, 61, 60, 50, 40, 30], 1024):
        for w in [1, 2, q - 1, q // 2, q // 3] + [rand.randrange(1, q) for _ in range(50)]:
            w_shoup = (w << 64) // q
            for a in [0, q - 1, 4 * q - 1, 8 * q - 1, 2 ** 64 - 1] + [rand.randrange(8 * q) for _ in range(50)]:
                r = (a * w - _mulhi_approx(a, w_shoup) * q) % 2 ** 64
                assert r < 4 * q and r % q == a * w % q
                worst = max(worst, r // q)
            x, y = 8 * q - 1, 8 * q - 1  # forward butterfly from the top of [0, 8q)
            xr = x - 4 * q if x >= 4 * q else x
            t = (y * w - _mulhi_approx(y, w_shoup) * q) % 2 ** 64
            assert xr + t < 8 * q and 0 < xr + 4 * q - t < 8 * q
        assert 8 * q < 2 ** 64
    assert worst >= 2  # the bound is not vacuous: quotients two short do occur


def _ntt_bases(n, device):
    bits = [61, 61, 61, 60, 59, 50, 45, 36, 30]
    return RNSBasis.get(generate_primes(bits, n), n, device)


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [10, 11, 14, 16, 17])
def test_truncated_ntt_is_bit_identical(log_n):
    """Variant 1 (truncated Shoup quotient, wider lazy ranges) == variant 0 == the CPU build, forward
    and inverse, on random residues and on extremes (all q - 1, alternating 0 / q - 1), with the
    largest primes allowed (61 bits: 8q close to 2^64)."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    cpu, gpu = _ntt_bases(n, "cpu"), _ntt_bases(n, "cuda")
    q = cpu.moduli[:, 0].unsqueeze(1)
    x = random_residues(rng, cpu.primes, (3,), n)
    x[1] = (q - 1).expand(-1, n)
    x[2] = torch.where(torch.arange(n) % 2 == 0, q - 1, torch.zeros_like(q))
    expected_fwd, expected_inv = cpu.ntt(x), cpu.intt(x)
    for variant in (0, 1):
        with ops.use_kernel_variant("ntt", variant):
            fwd, inv = gpu.ntt(x.cuda()).cpu(), gpu.intt(x.cuda()).cpu()
            roundtrip = gpu.intt(gpu.ntt(x.cuda())).cpu()
        assert torch.equal(fwd, expected_fwd), f"variant {variant}, forward"
        assert torch.equal(inv, expected_inv), f"variant {variant}, inverse"
        assert torch.equal(roundtrip, x), f"variant {variant}, round trip"
