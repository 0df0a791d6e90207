"""The NTT in FP64 arithmetic (KernelPlan.fp64_butterflies; ntt_math.cuh's Fp64Twiddles): the butterflies run on the
FP64 pipe with signed, never reduced values, for primes below 2^46 in the forward transform's kernels and below 2^41 in
the inverse's. Both transforms in Python integers (every IEEE rounding emulated exactly, every bound the kernels
assume asserted) == the CPU build; the table's FP64 rows hold (w, w / q) correctly rounded; on CUDA the transforms
(intt_galois and intt_product too), ModUp's fused inner product, ModDown and the key switches of HMult + relin and
HRotate at N16QP1766L30D3 == the integer butterflies == the reference kernels == the CPU build, bit for bit, with
inputs at q - 1 (4q - 1 and 2q - 1 in the models) and primes on both sides of 2^46 and 2^41."""
import struct

import numpy as np
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import RNSBasis, generate_primes, modulus_table, primitive_root_2n, words_tensor
from fhe_reference import fresh_rng, ntt_prime_above, ntt_prime_below, random_residues
from keyswitch_cases import assert_same, key_switch_ops, n16_key_switch_case
from plan_cases import KERNEL_PLANS

FP64_LIMIT = 1 << 46  # fp64_forward_fits
FP64_INVERSE_LIMIT = 1 << 41  # fp64_inverse_fits
ROUNDING_SHIFT = 3 << 51  # 1.5 * 2^52


def _double(word: int) -> float:
    return struct.unpack("<d", struct.pack("<q", word))[0]


def _round_half_even(num: int, den: int) -> int:
    """num / den rounded to the nearest integer, ties to even (den > 0)."""
    q, r = divmod(num, den)
    if 2 * r > den or (2 * r == den and q % 2 == 1):
        q += 1
    return q


def _product_fp64(y: int, w: int, wq: float, q: int) -> int:
    """ct_butterfly_fp64's t = y w mod q, centred, as the kernel's IEEE operations compute it: hi = fl(y w),
    lo = fma(y, w, -hi), k = fl(y wq + 1.5 * 2^52) - 1.5 * 2^52, t = fl(fl(hi - k q) + lo); every step asserted
    exact (or in the range where the rounding is the one emulated)."""
    exact = y * w
    hi = int(float(exact))  # (Python's int -> float rounds to nearest, ties to even, like __dmul_rn)
    lo = exact - hi
    assert abs(lo) < 1 << 53  # fma's result exact
    num, den = wq.as_integer_ratio()
    assert abs(y * num) < den << 51  # |y wq| < 2^51: y wq + 1.5 * 2^52 lies where the doubles are the integers
    k = _round_half_even(y * num, den)  # (1.5 * 2^52 is even: the ties go the same way)
    r = hi - k * q
    assert abs(r) < 1 << 53 and abs(r + lo) < 1 << 53  # both exact
    t = r + lo
    assert t == exact - k * q and 8 * abs(t) < 5 * q  # |t| < 5q/8
    return t


def _table(primes: list[int], log_n: int) -> torch.Tensor:
    """The CUDA layout of the NTT table (built on the CPU): [limbs, 12, N]."""
    roots = words_tensor([primitive_root_2n(q, 1 << log_n) for q in primes])
    return ops.ntt_table(modulus_table(primes), roots, log_n, pairs=True)


def _butterflies(stage: int, log_n: int, pairs: list[float], words: list[int]):
    """The butterflies of a stage (m = 2^stage groups, common/ntt.h's order): (j, j + t, w, w / q), w the table row's
    word (words), checked against the FP64 row's double (pairs)."""
    m, t = 1 << stage, (1 << log_n) >> (stage + 1)
    for i in range(m):
        w, wq = words[m + i], pairs[2 * (m + i) + 1]
        assert pairs[2 * (m + i)] == w
        for j in range(2 * i * t, 2 * i * t + t):
            yield j, j + t, w, wq


def _stages_fp64(x: list[int], pairs: list[float], fwd: list[int], q: int, log_n: int, stages: range) -> None:
    """Forward stages (Cooley-Tukey, stage s: m = 2^s groups) in place on centred integers, in ct_butterfly_fp64's
    arithmetic: every operand below 2^50, every value's magnitude grown by less than 5q/8 per stage."""
    bound = max(abs(v) for v in x)
    for s in stages:
        for j, k, w, wq in _butterflies(s, log_n, pairs, fwd):
            a, b = x[j], x[k]
            assert abs(b) < 1 << 50
            p = _product_fp64(b, w, wq, q)
            x[j], x[k] = a + p, a - p
        bound += 5 * q / 8
        assert max(abs(v) for v in x) < bound


def _forward_model(words: list[int], table: torch.Tensor, q: int, log_n: int) -> list[int]:
    """fp64 2's forward transform of words below 4q: the columns kernel's k1 = log_n / 2 stages (in as u - 2q, out as
    x + (2 + k1) q, the words between the kernels asserted in [0, (4 + 2 k1) q)), the rows kernel's k2 stages (in as
    u - (2 + k1) q, out as x + (2 + log_n) q, in [0, (4 + 2 log_n) q): its integer epilogue's lazy range)."""
    k1 = log_n // 2
    pairs = [_double(int(v)) for v in table[8:10].reshape(-1).tolist()]  # kFwdFp64: (w, w / q) per twiddle
    fwd = [int(v) % (1 << 64) for v in table[0].tolist()]
    x = [u - 2 * q for u in words]
    _stages_fp64(x, pairs, fwd, q, log_n, range(k1))
    between = [v + (2 + k1) * q for v in x]
    assert all(0 <= v < (4 + 2 * k1) * q and v < 1 << 52 for v in between)
    x = [u - (2 + k1) * q for u in between]
    _stages_fp64(x, pairs, fwd, q, log_n, range(k1, log_n))
    out = [v + (2 + log_n) * q for v in x]
    assert all(0 <= v < (4 + 2 * log_n) * q and v < 1 << 52 for v in out)
    return out


def _canonical_fp64(x: int, q: int) -> int:
    """ntt_math.cuh's leaving() for the inverse: x - k q with k = fl(x fl(1/q) + 1.5 * 2^52) - 1.5 * 2^52, plus q, then
    one conditional subtraction of q."""
    assert abs(x) < 1 << 50
    num, den = (1.0 / q).as_integer_ratio()  # (the division of two exact doubles is correctly rounded, as __drcp_rn)
    r = x - _round_half_even(x * num, den) * q
    assert abs(r) < q
    word = r + q
    return word - q if word >= q else word


def _inverse_model(words: list[int], table: torch.Tensor, q: int, log_n: int) -> list[int]:
    """fp64 3's inverse of words below 2q: the rows kernel's first k2 Gentleman-Sande stages (m = N/2 .. 2^k1) from
    u - q, canonical words out; the columns kernel's k1 stages from u - q, N^-1 folded into the last (m = 1: the sum
    times inv[0], the difference times inv[1]), canonical words out. Every operand of a product below 2^50, every
    value at most doubling per stage."""
    k1 = log_n // 2
    pairs = [_double(int(v)) for v in table[10:12].reshape(-1).tolist()]  # kInvFp64: (w, w / q) per twiddle
    inv = [int(v) % (1 << 64) for v in table[2].tolist()]
    x = list(words)
    for stages in (range(log_n - 1, k1 - 1, -1), range(k1 - 1, -1, -1)):  # (rows, then columns; stage s: m = 2^s)
        x = [u - q for u in x]
        bound = max(abs(v) for v in x)
        for s in stages:
            for j, k, w, wq in _butterflies(s, log_n, pairs, inv):
                a, b = x[j], x[k]
                assert abs(a + b) < 1 << 50 and abs(a - b) < 1 << 50
                if s == 0:  # the folded last stage (m = 1)
                    x[j] = _product_fp64(a + b, inv[0], pairs[1], q)
                    x[k] = _product_fp64(a - b, inv[1], pairs[3], q)
                else:
                    x[j], x[k] = a + b, _product_fp64(a - b, w, wq, q)
            bound *= 2
            assert max(abs(v) for v in x) <= bound
        x = [_canonical_fp64(v, q) for v in x]
        assert all(0 <= v < q for v in x)
    return x


@pytest.mark.parametrize("direction", ["forward", "inverse"])
@pytest.mark.parametrize("log_n", [10, 16])
def test_fp64_transforms_in_python_integers_at_the_prime_limit(log_n, direction):
    """The largest prime each FP64 direction takes (forward below 2^46, inverse below 2^41), inputs at the top of the
    lazy range the kernels take (4q - 1 forward, 2q - 1 inverse), q - 1 and random below that top: every rounding
    emulated, every bound asserted, the words congruent to the CPU build's transform."""
    limit, top, model = (FP64_LIMIT, 4, _forward_model) if direction == "forward" else (FP64_INVERSE_LIMIT, 2,
                                                                                            _inverse_model)
    rng, _ = fresh_rng()
    n = 1 << log_n
    q = ntt_prime_below(limit, n)
    basis = RNSBasis.get([q], n)
    table = _table([q], log_n)[0]
    transform = basis.ntt if direction == "forward" else basis.intt
    cases = {"top": [top * q - 1] * n, "q - 1": [q - 1] * n,
             "random": [int(v) for v in rng.integers(0, top * q, n, dtype=np.int64)]}
    for name, words in cases.items():
        expected = transform(torch.tensor([[u % q for u in words]], dtype=torch.int64))[0].tolist()
        got = model(words, table, q, log_n)
        assert [v % q for v in got] == expected, name


def test_fp64_table_rows_hold_w_and_w_over_q():
    n = 2048
    primes = generate_primes([40, 46, 60], n)
    table = _table(primes, 11)
    assert table.shape == (3, 12, n)
    for limb, q in enumerate(primes):
        for row, plain in ((8, 0), (10, 2)):
            words = table[limb, row:row + 2].reshape(-1).tolist()
            w = [int(v) % (1 << 64) for v in table[limb, plain].tolist()]
            assert [_double(v) for v in words[0::2]] == [float(v) for v in w]
            assert [_double(v) for v in words[1::2]] == [float(v) / float(q) for v in w]


def _primes(limbs: int, n: int) -> list[int]:
    """Primes on both sides of 2^46 (forward FP64 below, the integer rounds above) and of 2^41 (the same for the
    inverse), a 60-bit one, then 40- and 46-bit primes (N16QP1766L30D3's Q and P)."""
    edges = [ntt_prime_below(FP64_LIMIT, n), ntt_prime_above(FP64_LIMIT, n), ntt_prime_below(FP64_INVERSE_LIMIT, n),
             ntt_prime_above(FP64_INVERSE_LIMIT, n), ntt_prime_below(1 << 60, n)]
    rest = limbs - len(edges)
    sizes = [40] * (rest // 2) + [46] * (rest - rest // 2 + 1)  # (one more: the first 46-bit prime is an edge)
    return edges + [q for q in generate_primes(sizes, n) if q not in edges][:rest]


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [15, 16, 17])
@pytest.mark.parametrize("prefix,limbs", [((), 31), ((3,), 11)])
def test_fp64_ntt_matches_the_cpu(log_n, prefix, limbs):
    rng, _ = fresh_rng()
    n = 1 << log_n
    primes = _primes(limbs, n)
    cpu, gpu = RNSBasis.get(primes, n), RNSBasis.get(primes, n, "cuda")
    a = random_residues(rng, primes, prefix, n)
    a.view(-1, limbs, n)[0, :, : n // 2] = cpu.moduli[:, :1] - 1
    expected = cpu.ntt(a)
    for name, plan in KERNEL_PLANS.items():
        assert torch.equal(gpu.with_plan(plan).ntt(a.cuda()).cpu(), expected), name
        skipped = ops.ntt(a.cuda(), gpu.moduli, gpu.ntt_table, skip=(1, 0, 1), plan=plan).cpu()
        assert torch.equal(skipped, ops.ntt(a, cpu.moduli, cpu.ntt_table, skip=(1, 0, 1))), (name, "skip")


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [15, 16, 17])
@pytest.mark.parametrize("prefix,limbs", [((), 31), ((2,), 11)])
def test_fp64_intt_matches_the_cpu(log_n, prefix, limbs):
    """intt, intt_galois (a rotation's ModUp) and intt_product (HMult's), the rows read in place from a wider tensor
    too (ModDown's P rows of [2, P + Q, N])."""
    rng, _ = fresh_rng()
    n = 1 << log_n
    primes = _primes(limbs, n)
    cpu, gpu = RNSBasis.get(primes, n), RNSBasis.get(primes, n, "cuda")
    a, b = random_residues(rng, primes, prefix, n), random_residues(rng, primes, prefix, n)
    a.view(-1, limbs, n)[0, :, : n // 2] = cpu.moduli[:, :1] - 1
    k = 5 ** 3 % (2 * n)
    expected = [cpu.intt(a), *ops.intt_galois(a, cpu.moduli, cpu.ntt_table, k),
                *ops.intt_product(a, b, cpu.moduli, cpu.ntt_table)]
    wide = torch.cat([a.view(-1, limbs, n), a.view(-1, limbs, n).flip(-1)], dim=-2).cuda()
    for name, plan in KERNEL_PLANS.items():
        got = [gpu.with_plan(plan).intt(a.cuda()), *ops.intt_galois(a.cuda(), gpu.moduli, gpu.ntt_table, k, plan=plan),
               *ops.intt_product(a.cuda(), b.cuda(), gpu.moduli, gpu.ntt_table, plan=plan)]
        strided = ops.intt(wide[:, :limbs], gpu.moduli, gpu.ntt_table, plan=plan).cpu()
        assert_same(got, expected, ("fp64", name))
        assert torch.equal(strided, expected[0].view(-1, limbs, n)), (name, "strided")


@pytest.mark.gpu
def test_fp64_key_switches_match_the_cpu(monkeypatch):
    """HMult + relin and HRotate at N16QP1766L30D3 (ModUp's transform before and in the fused inner product, ModDown's
    before its epilogue: 40- and 46-bit primes in FP64, q_0's 60 bits in the integer rounds) == the CPU, every
    plan (the default resolves FP64 butterflies for this preset)."""
    monkeypatch.setenv("FHE_CORE_TEST_SEEDS", "1")  # fixed-seed keys on a 128-bit preset: the same on both devices
    evaluators, inputs_gpu, expected = n16_key_switch_case("fp64")
    assert evaluators["tuned"].plan == ops.KernelPlan.resolve("cuda", 1 << 16, evaluators["tuned"].params.q_primes)
    for name, ev in evaluators.items():
        assert_same(key_switch_ops(ev, inputs_gpu), expected, ("fp64", name))
