"""The CUDA kernels of every kernel plan (fhe_core.ops.KernelPlan: the reference kernels, the tuned ones with
integer and with FP64 butterflies) against the CPU build and Python integers, bit for bit."""
from fractions import Fraction

import numpy as np
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import (BasisConverter, RNSBasis, generate_primes, is_prime, modulus_table, shoup_constants,
                           words_tensor)
from fhe_reference import fresh_rng, random_residues, to_ints
from plan_cases import KERNEL_PLANS, assert_forward_ntt_matches_cpu


def _assert_lazy_result(got, expected, primes, name):
    """got == expected from the reference kernel (canonical outputs); from the tensor-core kernel (tuned plans) got
    in [0, 3p) and got = expected mod p, row by row (the last-but-one axis runs over primes)."""
    if not KERNEL_PLANS[name].tensor_core_conv:
        assert torch.equal(got, expected), f"{name} plan (lazy)"
        return
    p = torch.tensor(primes, dtype=torch.int64).unsqueeze(-1)
    assert bool(((got >= 0) & (got < 3 * p)).all()), f"{name} plan: lazy output outside [0, 3p)"
    assert torch.equal(got % p, expected), f"{name} plan: lazy output not congruent"


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


def _convert_on(device, x, primes_in, primes_out, exact, lazy=False, plan=ops.TUNED):
    """ops.bconv of x ([..., l_in, any length]) with the constants of a converter built at N = 1024."""
    src, dst = RNSBasis.get(primes_in, 1024, device), RNSBasis.get(primes_out, 1024, device)
    conv = BasisConverter.get(src, dst)
    return ops.bconv(x.to(device), src.moduli, dst.moduli, conv.qhat_inv, conv.qhat_inv_shoup, conv.qhat_mod_p,
                     conv.neg_q_mod_p if exact else None, lazy=lazy, plan=plan).cpu()


# (input limbs, output limbs, exact, N): slots = inputs (+1 exact) in 2..16 take the tensor cores
# (1, 2, 3 or 4 K tiles), 1 and 17 fall back to the reference kernel; output counts not a multiple
# of the 8-row block; an N that is no multiple of the 128-coefficient tile falls back too. At
# N = 2^16 (ModUp's and ModDown's shapes) every block loops over several tiles (the shared memory
# reused).
CONV_SHAPES = [(1, 3, False, 1024), (1, 4, True, 1024), (2, 3, False, 1024), (4, 9, True, 1024),
               (11, 31, False, 4096), (11, 31, True, 2048), (15, 20, True, 1024), (16, 8, False, 1024),
               (16, 5, True, 1024), (5, 27, False, 96), (10, 42, False, 65536), (11, 31, True, 65536)]


@pytest.mark.gpu
@pytest.mark.parametrize("l_in,l_out,exact,n", CONV_SHAPES)
def test_tensor_core_conv_is_bit_identical(l_in, l_out, exact, n):
    """The tensor-core Conv (tuned plans) == the 128-bit MAC kernel (reference) == the CPU build on every
    coefficient, and == Python integers on a sample of coefficients; 61-bit destination primes (every byte of the
    shifted constants in use) and inputs at q - 1 included."""
    rng, _ = fresh_rng()
    primes = generate_primes([60] * l_in + [61] * (l_out // 2) + [46] * (l_out - l_out // 2), 1024)
    primes_in, primes_out = primes[:l_in], primes[l_in:]
    x = random_residues(rng, primes_in, (2,), n)
    x[0, :, :16] = torch.tensor([q - 1 for q in primes_in]).unsqueeze(1)
    expected = _convert_on("cpu", x, primes_in, primes_out, exact)
    assert torch.equal(_convert_on("cpu", x, primes_in, primes_out, exact, lazy=True), expected)  # CPU: canonical
    for name, plan in KERNEL_PLANS.items():
        got = _convert_on("cuda", x, primes_in, primes_out, exact, plan=plan)
        lazy = _convert_on("cuda", x, primes_in, primes_out, exact, lazy=True, plan=plan)
        assert torch.equal(got, expected), f"{name} plan: {(got != expected).nonzero()[:8].tolist()}"
        _assert_lazy_result(lazy, expected, primes_out, name)
    columns = np.unique(np.concatenate([np.arange(16), rng.integers(0, n, size=24)]))
    ints = _conv_expected(x[..., columns], RNSBasis.get(primes_in, 1024), RNSBasis.get(primes_out, 1024), exact)
    # (the exact conversion may round either way within ~2^-50 Q of Q/2: not hit by random inputs)
    assert to_ints(expected[..., columns]) == ints


@pytest.mark.gpu
@pytest.mark.parametrize("exact", [False, True])
def test_tensor_core_conv_small_destination_primes(exact):
    """The tensor-core Conv's final reduction takes a shortcut for primes above 2^16 and falls back
    to the general one below; both sides of that edge (12289, 40961, 65537 = 2^16 + 1, 65521) and a
    61-bit prime, against the CPU build and Python integers (the ring's primes start at 20 bits, but
    bconv takes any moduli)."""
    rng, _ = fresh_rng()
    n = 1024
    src_primes = generate_primes([50] * 5, n)
    dst_primes = [12289, 40961, 65537, 65521, generate_primes([61], n)[0]]
    big_q = 1
    for q in src_primes:
        big_q *= q
    qhat_inv, qhat_inv_shoup = shoup_constants([pow(big_q // q % q, -1, q) for q in src_primes], src_primes)
    qhat_mod_p = words_tensor([(big_q // q) % p for q in src_primes for p in dst_primes]).reshape(5, 5)
    neg_q = words_tensor([-big_q % p for p in dst_primes]) if exact else None
    args = (modulus_table(src_primes), modulus_table(dst_primes), qhat_inv, qhat_inv_shoup, qhat_mod_p)
    x = random_residues(rng, src_primes, (2,), n)
    expected = ops.bconv(x, *args, neg_q)
    _assert_every_plan(x, args, neg_q, expected, dst_primes)
    src, dst = RNSBasis.get(src_primes, n), _Primes(dst_primes)
    assert to_ints(expected[..., :32]) == _conv_expected(x[..., :32], src, dst, exact)


@pytest.mark.gpu
@pytest.mark.parametrize("exact", [False, True])
def test_tensor_core_conv_at_the_reduction_edges(exact):
    """The largest sums the tensor-core Conv can form (V near 2^80: 61-bit y_k = q_k - 1 and constants
    p - 1, so nearly every byte is 0xFF) and random ones, into destination primes on both sides of
    the lean kernel's edges (2^32: its 32-bit Barrett quotient below, the general reduction above;
    2^48; 2^50, where it folds V), 61-bit primes and 2^16 + 1: every plan against the CPU build and
    Python integers, lazy outputs in [0, 3p). The constants are made up (y_k = x_k: qhat_inv = 1):
    bconv takes any."""
    rng, _ = fresh_rng()
    n = 1024
    src_primes = generate_primes([61] * 11, n)
    edges = []
    for bits in (32, 48, 50):  # the largest prime below 2^bits and the smallest above
        edges.append(next(q for q in range(2 ** bits - 1, 2 ** bits - 10 ** 4, -2) if is_prime(q)))
        edges.append(next(q for q in range(2 ** bits + 1, 2 ** bits + 10 ** 4, 2) if is_prime(q)))
    dst_primes = edges + [65537] + generate_primes([61] * 3 + [60, 40], n, exclude=src_primes)
    ones, ones_shoup = shoup_constants([1] * len(src_primes), src_primes)
    consts = [[p - 1 if (k + r) % 3 else int(rng.integers(1, p)) for r, p in enumerate(dst_primes)]
              for k in range(len(src_primes))]
    neg = [p - 1 for p in dst_primes]
    args = (modulus_table(src_primes), modulus_table(dst_primes), ones, ones_shoup,
            words_tensor([c for row in consts for c in row]).reshape(len(src_primes), len(dst_primes)))
    neg_q = words_tensor(neg) if exact else None
    x = random_residues(rng, src_primes, (2,), n)
    x[0, :, : n // 2] = torch.tensor([q - 1 for q in src_primes]).unsqueeze(1)  # V near its maximum
    expected = ops.bconv(x, *args, neg_q)
    _assert_every_plan(x, args, neg_q, expected, dst_primes)
    columns = np.unique(np.concatenate([np.arange(8), n // 2 + np.arange(4), rng.integers(0, n, size=12)]))
    xs = to_ints(x[..., columns])
    for b in range(2):
        for i, column in enumerate(columns):
            y = [xs[b][k][i] for k in range(len(src_primes))]
            u = 0
            if exact:  # floor(sum y_k / q_k + 1/2), exact rationals (not near a half here)
                u = int(sum(Fraction(yk, q) for yk, q in zip(y, src_primes)) + Fraction(1, 2))
            for r, p in enumerate(dst_primes):
                total = sum(yk * consts[k][r] for k, yk in enumerate(y)) + u * neg[r]
                assert int(expected[b, r, column]) == total % p


def _assert_every_plan(x, args, neg_q, expected, dst_primes):
    """ops.bconv(x, *args, neg_q) on CUDA == expected for every plan's Conv, with and without the
    precomputed B fragments (the tensor-core kernel reads them), canonical and lazy."""
    fragments = ops.conv_mma_fragments(args[4], args[1], neg_q).cuda()
    on_cuda = tuple(t.cuda() for t in args)
    neg = None if neg_q is None else neg_q.cuda()
    for name, plan in KERNEL_PLANS.items():
        got = ops.bconv(x.cuda(), *on_cuda, neg, plan=plan).cpu()
        with_table = ops.bconv(x.cuda(), *on_cuda, neg, fragments=fragments, plan=plan).cpu()
        lazy = ops.bconv(x.cuda(), *on_cuda, neg, lazy=True, fragments=fragments, plan=plan).cpu()
        assert torch.equal(got, expected), f"{name} plan"
        assert torch.equal(with_table, expected), f"{name} plan, fragments given"
        _assert_lazy_result(lazy, expected, dst_primes, name)


class _Primes:
    """Just the ``primes`` attribute _conv_expected reads (no NTT basis for primes this small)."""

    def __init__(self, primes):
        self.primes = primes


def _mod_up_case(alpha, q_count):
    """ModUp's constants for q_count primes of Q in digits of alpha over (P, Q), a random input and
    a random stand-in for its NTT-domain copy; returns (x, args, own, expected, expected_own)."""
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
    return x, args, own, expected, expected_own


@pytest.mark.parametrize("alpha,q_count", [(1, 7), (3, 8)])
def test_mod_up_conv_copies_own_rows_on_cpu(alpha, q_count):
    """With ``own`` the CPU build copies exactly the digits' own rows and converts the others; a
    wrongly shaped ``own`` is refused."""
    x, args, own, expected, expected_own = _mod_up_case(alpha, q_count)
    assert not torch.equal(expected, expected_own)  # the copied rows differ from the converted ones
    for j in range(-(-q_count // alpha)):  # converted, a digit's own rows are its input rows (exact there)
        count = min(alpha, q_count - j * alpha)
        assert torch.equal(expected[j, alpha + j * alpha:alpha + j * alpha + count], x[j * alpha:j * alpha + count])
    assert torch.equal(ops.mod_up_conv(x, *args, own), expected_own)
    with pytest.raises(RuntimeError, match="mod_up_conv: own must be"):
        ops.mod_up_conv(x, *args, own[1:].contiguous())


@pytest.mark.gpu
@pytest.mark.parametrize("alpha,q_count", [(1, 7), (3, 8), (11, 31)])
def test_tensor_core_mod_up_conv_is_bit_identical(alpha, q_count):
    """ModUp's batched extension (dnum digits, the last one shorter) on every plan and the CPU, with
    and without the digits' own rows copied from a given tensor."""
    x, args, own, expected, expected_own = _mod_up_case(alpha, q_count)
    assert torch.equal(ops.mod_up_conv(x, *args, own), expected_own)
    primes = to_ints(args[3][:, 0])
    fragments = ops.conv_mma_fragments(args[4], args[3]).cuda()
    on_cuda = tuple(t.cuda() for t in args)
    for name, plan in KERNEL_PLANS.items():
        got = ops.mod_up_conv(x.cuda(), *on_cuda, plan=plan).cpu()
        got_own = ops.mod_up_conv(x.cuda(), *on_cuda, own.cuda(), fragments=fragments, plan=plan).cpu()
        lazy_own = ops.mod_up_conv(x.cuda(), *on_cuda, own.cuda(), lazy=True, fragments=fragments, plan=plan).cpu()
        assert torch.equal(got, expected), f"{name} plan"
        assert torch.equal(got_own, expected_own), f"{name} plan, own rows copied"
        _assert_lazy_result(lazy_own, expected_own, primes, name)


@pytest.mark.parametrize("exact", [False, True])
def test_conv_mma_fragments_hold_the_shifted_constants(exact):
    """ops.conv_mma_fragments against Python integers: the byte of word (K tile k / 4, lane
    4 b + 2 (k & 1) + h, register (k & 3) / 2) at position e is byte b of 2^(8 (4 h + e)) C mod p for
    slot k's constant C (qhat_mod_p, (-Q) mod p at the exact conversion's extra slot, zero past it);
    and the shapes it refuses."""
    rng, _ = fresh_rng()
    src = RNSBasis.get(generate_primes([50] * 5, 1024), 1024)
    dst = RNSBasis.get(generate_primes([61, 40, 46, 33], 1024, exclude=src.primes), 1024)
    conv = BasisConverter.get(src, dst)
    table = ops.conv_mma_fragments(conv.qhat_mod_p, dst.moduli, conv.neg_q_mod_p if exact else None)
    slots = 5 + exact
    assert table.dtype == torch.int32 and list(table.shape) == [1, 4, 2, 64]
    words = table.numpy().view(np.uint32)
    constants = to_ints(conv.qhat_mod_p)
    for r, p in enumerate(dst.primes):
        for k in range(8):
            c = constants[k][r] if k < 5 else (int(-src.modulus % p) if exact and k == slots - 1 else 0)
            for h in range(2):
                for b in range(8):
                    word = int(words[0, r, k // 4, (4 * b + 2 * (k & 1) + h) * 2 + (k & 3) // 2])
                    for e in range(4):
                        assert (word >> (8 * e)) & 0xFF == ((c << (8 * (4 * h + e))) % p >> (8 * b)) & 0xFF
    x = random_residues(rng, src.primes, (2,), 1024)
    with pytest.raises(RuntimeError, match="fragments must be"):  # built for another slot count
        ops.bconv(x, src.moduli, dst.moduli, conv.qhat_inv, conv.qhat_inv_shoup, conv.qhat_mod_p,
                  fragments=ops.conv_mma_fragments(conv.qhat_mod_p[:4].contiguous(), dst.moduli))
    with pytest.raises(RuntimeError, match="reduced mod their prime"):
        ops.conv_mma_fragments(conv.qhat_mod_p + int(dst.primes[-1]), dst.moduli)
    with pytest.raises(RuntimeError, match="1 to 16 slots"):
        ops.conv_mma_fragments(torch.zeros(17, 4, dtype=torch.int64), dst.moduli)


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", range(10, 18))
def test_ntt_plans_are_bit_identical(log_n):
    """ntt and intt on every plan == the CPU build, at every supported N (row lengths 2^5 .. 2^9 of
    the rows kernel: one, two or three stages in its contiguous round), batched [3, l, N] with residues
    0 and q - 1; 61-bit primes (the widest lazy ranges) and a 30-bit one (FP64 butterflies) included."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    primes = generate_primes([61, 59, 50, 30], n)
    cpu, gpu = RNSBasis.get(primes, n, "cpu"), RNSBasis.get(primes, n, "cuda")
    a = random_residues(rng, primes, (3,), n)
    a[0, :, :64] = 0
    a[1, :, :64] = cpu.moduli[:, :1] - 1
    expected_fwd, expected_inv = cpu.ntt(a), cpu.intt(a)
    assert torch.equal(cpu.intt(expected_fwd), a)
    for name, plan in KERNEL_PLANS.items():
        basis = gpu.with_plan(plan)
        got_fwd, got_inv = basis.ntt(a.cuda()).cpu(), basis.intt(a.cuda()).cpu()
        assert torch.equal(got_fwd, expected_fwd), f"ntt, {name} plan"
        assert torch.equal(got_inv, expected_inv), f"intt, {name} plan"


def _mod_down_ntt_case(rng, n, batches, p_rows, device):
    """ModDown's shape at N: x [batches, l, N], c [batches, p_rows + l, N] with c's Q rows at 0 and q - 1
    in places, Shoup constants, one addend for the first batch."""
    primes = generate_primes([61] * p_rows + [59, 50, 45], n)
    basis = RNSBasis.get(primes[p_rows:], n, device)
    x = random_residues(rng, basis.primes, (batches,), n)
    c = random_residues(rng, primes, (batches,), n)
    q_col = basis.moduli[:, :1].cpu()
    c[0, p_rows:, :32] = 0
    c[1, p_rows:, :32] = q_col - 1
    consts = shoup_constants([int(rng.integers(1, q)) for q in basis.primes], basis.primes, device)
    addend = random_residues(rng, basis.primes, (1,), n)
    return basis, x.to(device), c.to(device), consts, addend.to(device)


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [11, 16, 17])
def test_ntt_plans_mod_down_epilogue_is_bit_identical(log_n):
    """ops.mod_down_ntt ((c - NTT(x)) * consts (+ add) in the rows kernel's store) on every plan ==
    the CPU build, with and without an addend, in place; == Python integers on a sample of
    coefficients (the tuned kernels feed c + bound q - x, x lazy, to the Shoup product unreduced)."""
    rng, _ = fresh_rng()
    n, p_rows = 1 << log_n, 2
    cpu_case = _mod_down_ntt_case(rng, n, 3, p_rows, "cpu")
    basis, x, c, consts, addend = cpu_case
    gpu_basis = RNSBasis.get(basis.primes, n, "cuda")
    gpu_consts = tuple(t.cuda() for t in consts)
    expected = ops.mod_down_ntt(x, c, p_rows, *consts, basis.moduli, basis.ntt_table)
    expected_add = ops.mod_down_ntt(x, c, p_rows, *consts, basis.moduli, basis.ntt_table, addend)
    args = (c.cuda(), p_rows, *gpu_consts, gpu_basis.moduli, gpu_basis.ntt_table)
    for name, plan in KERNEL_PLANS.items():
        got = ops.mod_down_ntt(x.cuda(), *args, plan=plan).cpu()
        in_place = x.cuda()
        ops.mod_down_ntt(in_place, *args, addend.cuda(), plan=plan, out=in_place)
        assert torch.equal(got, expected), f"{name} plan"
        assert torch.equal(in_place.cpu(), expected_add), f"{name} plan, with the addend, in place"
    ntt_x = to_ints(basis.ntt(x)[..., :48])
    cs, adds, ks = to_ints(c[:, p_rows:, :48]), to_ints(addend[..., :48]), to_ints(consts[0])
    for b in range(3):
        for i, q in enumerate(basis.primes):
            want = [((cv - xv) * ks[i] + (adds[0][i][j] if b == 0 else 0)) % q
                    for j, (cv, xv) in enumerate(zip(cs[b][i], ntt_x[b][i]))]
            assert to_ints(expected_add[b, i, :48]) == want, (b, i)


@pytest.mark.gpu
@pytest.mark.parametrize("forward", [True, False])
def test_ntt_plans_strided_skipped_and_misaligned(forward):
    """Every plan on a strided batch (ModDown's P rows read in place), with skipped rows (ModUp's own
    primes), and on views 8 bytes off 16-byte alignment (the tuned plans then fall back to the reference
    kernels): == the CPU build."""
    rng, _ = fresh_rng()
    n = 1 << 16
    primes = generate_primes([61, 58, 50], n)
    cpu, gpu = RNSBasis.get(primes, n, "cpu"), RNSBasis.get(primes, n, "cuda")
    fn = ops.ntt if forward else ops.intt
    big = random_residues(rng, primes * 2, (3,), n)  # [3, 6, N]: rows 0-2 of each batch are the view
    x = big[:, :3].contiguous()
    expected = fn(x, cpu.moduli, cpu.ntt_table)
    skip = (1, 1, 1)  # batch b leaves row 1 + b alone
    expected_skip = fn(x, cpu.moduli, cpu.ntt_table, skip=skip)
    flat = torch.empty(1 + x.numel(), dtype=torch.int64, device="cuda")
    for name, plan in KERNEL_PLANS.items():
        strided = fn(big.cuda()[:, :3], gpu.moduli, gpu.ntt_table, plan=plan).cpu()
        skipped = fn(x.cuda(), gpu.moduli, gpu.ntt_table, skip=skip, plan=plan).cpu()
        shifted = flat[1:].view(x.shape)  # data 8 bytes past an aligned address
        shifted.copy_(x)
        fn(shifted, gpu.moduli, gpu.ntt_table, plan=plan, out=shifted)
        assert torch.equal(strided, expected), f"{name} plan, strided"
        assert torch.equal(skipped, expected_skip), f"{name} plan, skip"
        assert torch.equal(shifted.cpu(), expected), f"{name} plan, misaligned"


def _prime_near(limit: int, n: int, above: bool) -> int:
    """The prime q = 1 mod 2N nearest below (or above) limit."""
    q = limit - (limit - 1) % (2 * n) + (2 * n if above else 0)
    while not is_prime(q):
        q += 2 * n if above else -2 * n
    return q


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [16, 17])
def test_ntt_lazy_forward_at_its_prime_limit(log_n):
    """The tuned kernels run the forward transform without reductions for primes with (5 + 2 log N) q < 2^64:
    the largest such prime (values up to (4 + 2 log N) q, just below 2^64, and the epilogue's c + bound q)
    and the smallest prime above the limit (Harvey's butterflies), with inputs at q - 1 and 4q - 1 (the
    forward transform accepts [0, 4q)), plain and through ModDown's epilogue: == the CPU build on every
    plan."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    limit = (2 ** 64 - 1) // (5 + 2 * log_n)
    primes = [_prime_near(limit, n, above=False), _prime_near(limit + 1, n, above=True),
              _prime_near(2 ** 61 - 1, n, above=False)]
    assert_forward_ntt_matches_cpu(rng, primes, n)
