"""ModUp's forward NTT with the key-switching inner product in one op (ops.ntt_inner_product): equal to ops.ntt
(skipping the digits' own rows) then ops.ks_inner_product, on the CPU and, bit for bit, on every CUDA kernel plan
(the tuned ones fuse: one thread group per digit up to 4 digits, the digits in turn beyond; the reference runs the
two ops); at the shapes of the key switch (alpha own rows per digit, a short last digit, more than 8 digits), with
q - 1 residues, lazy [0, 3q) Conv outputs and primes on both sides of the NTT's lazy bounds."""
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import RNSBasis, generate_primes, shoup_constants
from fhe_reference import fresh_rng, random_residues
from plan_cases import KERNEL_PLANS


def _case(rng, log_n, p_bits, q_bits, alpha, spare_key_rows=2):
    """ModUp's layout at one level: digits ``[dnum, P + Q, N]`` over (P, Q_l), coefficients outside digit j's own
    rows P + j alpha .. (fewer in the last digit) and NTT-domain words on them, q - 1 in a few columns; a key over
    (P, Q_l, spare rows) with one spare digit (the level's rows are its first ones, as in rlwe.keyswitch)."""
    n = 1 << log_n
    primes = generate_primes(list(p_bits) + list(q_bits), n)
    basis = RNSBasis.get(primes, n)
    dnum = -(-len(q_bits) // alpha)
    digits = random_residues(rng, primes, (dnum,), n)
    q = basis.moduli[:, 0]
    digits[:, :, :40] = (q - 1).unsqueeze(-1)
    key_primes = primes + generate_primes([50] * spare_key_rows, n)[:spare_key_rows]
    key = random_residues(rng, key_primes, (dnum + 1, 2), n)
    key[:, :, :len(primes), 8:48] = (q - 1).unsqueeze(-1)
    skip = (len(p_bits), alpha, alpha)
    return basis, digits, key, skip


def _expected(basis, digits, key, skip):
    """The composition on the CPU: the skipping NTT, then the inner product (row map: the identity)."""
    rows = len(basis)
    transformed = ops.ntt(digits, basis.moduli, basis.ntt_table, skip=skip)
    return ops.ks_inner_product(transformed, key, rows, rows, basis.moduli)


def _lazy(digits, basis, skip, rng):
    """digits with every word outside the own rows moved to a random representative in [0, 3q) (what a lazy Conv
    leaves), q - 1 + 2q in the first columns: the NTT's inputs at their bound."""
    q = basis.moduli[:, 0]
    lifted = digits + q.view(1, -1, 1) * torch.from_numpy(rng.integers(0, 3, size=digits.shape))
    lifted[:, :, :8] = (3 * q - 1).view(1, -1, 1)
    begin, stride, length = skip
    for j in range(digits.shape[0]):  # own rows: the NTT-domain input, canonical
        own = slice(begin + j * stride, begin + j * stride + length)
        lifted[j, own] = digits[j, own]
    return lifted


# (log N, P bits, Q bits, alpha): the key-switching layout of N16QP1766L30D3 (alpha 11, dnum 3, a last digit of 9)
# at small N; a short last digit with 58-61-bit primes (around the truncated and lazy bounds: Harvey's butterflies
# for the widest); more than 8 digits (each word reduced before its products); a row length of 2^5 and of 2^7;
# 2, 4 and 1 digits (the digit-group kernel: that many thread groups per block).
CASES = [
    (12, (46,) * 11, (60,) + (40,) * 30, 11),
    (11, (61, 60), (58, 59, 60, 61, 50), 2),
    (10, (50,), (45,) * 10, 1),
    (13, (55,) * 3, (50,) * 7, 3),
    (11, (50,), (45,) * 4, 2),
    (12, (50,) * 2, (61,) + (45,) * 6, 2),
    (10, (50,) * 3, (45,) * 3, 3),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"N2^{c[0]}-alpha{c[3]}")
def test_ntt_inner_product_on_cpu_is_ntt_then_inner_product(case):
    rng, _ = fresh_rng()
    basis, digits, key, skip = _case(rng, *case)
    expected = _expected(basis, digits, key, skip)
    rows = len(basis)
    got = ops.ntt_inner_product(digits.clone(), basis.moduli, basis.ntt_table, key, rows, rows, skip=skip)
    assert torch.equal(got, expected)
    # the skipped rows matter: without the skip, the own rows would be transformed again
    unskipped = ops.ntt_inner_product(digits.clone(), basis.moduli, basis.ntt_table, key, rows, rows)
    assert not torch.equal(unskipped, expected)


def _with_own_rows(digits, skip, rows):
    """digits with the skipped rows replaced by rows[i - skip[0]] (what ``own`` stands for)."""
    out = digits.clone()
    begin, stride, length = skip
    for j in range(digits.shape[0]):
        lo, hi = begin + j * stride, min(digits.shape[1], begin + j * stride + length)
        out[j, lo:hi] = rows[lo - begin:hi - begin]
    return out


def _own_case(rng, case):
    """(basis, digits with junk in the own rows, key, skip, own: NTT-domain rows of Q with q - 1 in a few columns)."""
    basis, digits, key, skip = _case(rng, *case)
    own = random_residues(rng, basis.primes[skip[0]:], (), basis.n)
    own[:, -24:] = basis.moduli[skip[0]:, :1] - 1
    return basis, digits, key, skip, own


@pytest.mark.parametrize("case", CASES[:3], ids=lambda c: f"N2^{c[0]}-alpha{c[3]}")
def test_ntt_inner_product_reads_own_rows_from_own(case):
    """With ``own`` the skipped rows come from own (through sigma_k for own_galois k), not from the digits."""
    rng, _ = fresh_rng()
    basis, digits, key, skip, own = _own_case(rng, case)
    rows = len(basis)
    q_moduli = basis.moduli[skip[0]:]
    for k in (1, 5, 2 * basis.n - 1):
        sigma = ops.automorphism_ntt(own, q_moduli, k)
        expected = _expected(basis, _with_own_rows(digits, skip, sigma), key, skip)
        got = ops.ntt_inner_product(digits.clone(), basis.moduli, basis.ntt_table, key, rows, rows, skip=skip,
                                    own=own, own_galois=k)
        assert torch.equal(got, expected), k


def test_ntt_inner_product_rejects_bad_arguments():
    rng, _ = fresh_rng()
    basis, digits, key, skip = _case(rng, 10, (50,), (45,) * 4, 2)
    rows = len(basis)
    with pytest.raises(RuntimeError, match="skip must be"):
        ops.ntt_inner_product(digits, basis.moduli, basis.ntt_table, key, rows, rows, skip=(1, 2))
    with pytest.raises(RuntimeError, match="key must be"):
        ops.ntt_inner_product(digits, basis.moduli, basis.ntt_table, key[:1], rows, rows, skip=skip)
    with pytest.raises(RuntimeError, match="within the key's"):
        ops.ntt_inner_product(digits, basis.moduli, basis.ntt_table, key, rows, rows + 3, skip=skip)
    with pytest.raises(RuntimeError, match="table must be"):
        ops.ntt_inner_product(digits, basis.moduli, basis.ntt_table[:, :, :8], key, rows, rows, skip=skip)
    own = digits[0, 1:]
    with pytest.raises(RuntimeError, match="own needs skip"):
        ops.ntt_inner_product(digits, basis.moduli, basis.ntt_table, key, rows, rows, own=own.clone())
    with pytest.raises(RuntimeError, match="own must be"):
        ops.ntt_inner_product(digits, basis.moduli, basis.ntt_table, key, rows, rows, skip=skip, own=own[1:].clone())
    with pytest.raises(RuntimeError, match="own_galois needs own"):
        ops.ntt_inner_product(digits, basis.moduli, basis.ntt_table, key, rows, rows, skip=skip, own_galois=5)
    with pytest.raises(RuntimeError, match="odd Galois element"):
        ops.ntt_inner_product(digits, basis.moduli, basis.ntt_table, key, rows, rows, skip=skip, own=own.clone(),
                              own_galois=4)


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES + [(16, (46,) * 11, (60,) + (40,) * 30, 11), (16, (58, 59), (61, 60, 58), 2),
                                  (16, (50,) * 4, (45,) * 8, 2), (16, (46,) * 11, (60,) + (40,) * 8, 11)],
                         ids=lambda c: f"N2^{c[0]}-alpha{c[3]}-{c[2][0]}")
def test_ntt_inner_product_plans_are_bit_identical(case):
    """Every kernel plan (N = 2^16: the compile-time row length) == the CPU, from canonical and from lazy [0, 3q)
    inputs."""
    rng, _ = fresh_rng()
    basis, digits, key, skip = _case(rng, *case)
    expected = _expected(basis, digits, key, skip)
    rows = len(basis)
    gpu = RNSBasis.get(basis.primes, basis.n, "cuda")
    lazy = _lazy(digits, basis, skip, rng).cuda()
    key_gpu = key.cuda()
    for plan_name, plan in KERNEL_PLANS.items():
        for name, x in (("canonical", digits.cuda()), ("lazy", lazy.clone())):
            got = ops.ntt_inner_product(x, gpu.moduli, gpu.ntt_table, key_gpu, rows, rows, skip=skip, plan=plan)
            assert torch.equal(got.cpu(), expected), (plan_name, name)


@pytest.mark.gpu
@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[5], CASES[6], (16, (46,) * 11, (60,) + (40,) * 30, 11)],
                         ids=lambda c: f"N2^{c[0]}-alpha{c[3]}-{len(c[1])}")
def test_ntt_inner_product_own_rows_are_bit_identical(case):
    """``own`` / ``own_galois`` (read in place by the fused kernels, copied into the digits by the reference) on
    every kernel plan == the CPU."""
    rng, _ = fresh_rng()
    basis, digits, key, skip, own = _own_case(rng, case)
    rows = len(basis)
    gpu = RNSBasis.get(basis.primes, basis.n, "cuda")
    key_gpu, own_gpu = key.cuda(), own.cuda()
    for k in (1, 5, 2 * basis.n - 1):
        expected = ops.ntt_inner_product(digits.clone(), basis.moduli, basis.ntt_table, key, rows, rows, skip=skip,
                                         own=own, own_galois=k)
        for name, plan in KERNEL_PLANS.items():
            got = ops.ntt_inner_product(digits.cuda(), gpu.moduli, gpu.ntt_table, key_gpu, rows, rows, skip=skip,
                                        own=own_gpu, own_galois=k, plan=plan)
            assert torch.equal(got.cpu(), expected), (k, name)


def _tensor_case(rng, case):
    """_own_case plus HMult's operands a, b ([2, Q_l, N], q - 1 in their first columns: the largest terms) and
    P mod q_i taken as q_i - 1 (the largest factor)."""
    basis, digits, key, skip, own = _own_case(rng, case)
    q_primes = basis.primes[skip[0]:]
    q_moduli = basis.moduli[skip[0]:]
    a, b = (random_residues(rng, q_primes, (2,), basis.n) for _ in range(2))
    for x in (a, b):
        x[:, :, :48] = q_moduli[:, :1] - 1
    p_mod_q = shoup_constants([q - 1 for q in q_primes], q_primes)
    return basis, digits, key, skip, own, a, b, p_mod_q


def _expected_with_tensor(basis, digits, key, skip, own, a, b, p_mod_q):
    """The CPU composition: the inner product, then (P mod q_i) (a0 b0, a0 b1 + a1 b0) added to its Q rows."""
    rows = len(basis)
    q_moduli = basis.moduli[skip[0]:]
    out = ops.ntt_inner_product(digits.clone(), basis.moduli, basis.ntt_table, key, rows, rows, skip=skip, own=own)
    terms = ops.mul_const(ops.tensor_product(a, b, q_moduli)[:2].contiguous(), *p_mod_q, q_moduli)
    out[:, skip[0]:] = ops.add(out[:, skip[0]:].contiguous(), terms, q_moduli)
    return out


def test_ntt_inner_product_tensor_terms_rejected_off_the_digits_kernel():
    """Only CUDA's digit-group kernel adds the tensor terms: on the CPU (and with partial or misshapen arguments) a
    clear error, never a result without them."""
    rng, _ = fresh_rng()
    basis, digits, key, skip, own, a, b, p_mod_q = _tensor_case(rng, CASES[4])
    rows = len(basis)
    args = (digits, basis.moduli, basis.ntt_table, key, rows, rows)
    with pytest.raises(RuntimeError, match="tensor_a/tensor_b need the CUDA digit-group kernel"):
        ops.ntt_inner_product(*args, skip=skip, own=own, tensor=(a, b), p_mod_q=p_mod_q[0])
    with pytest.raises(RuntimeError, match="go together"):
        ops.ntt_inner_product(*args, skip=skip, own=own, tensor=(a, b))
    with pytest.raises(RuntimeError, match="tensor_a needs own"):
        ops.ntt_inner_product(*args, skip=skip, tensor=(a, b), p_mod_q=p_mod_q[0])
    with pytest.raises(RuntimeError, match=r"tensor_b must be \[2, 4, 2048\]"):
        ops.ntt_inner_product(*args, skip=skip, own=own, tensor=(a, b[:, 1:].contiguous()), p_mod_q=p_mod_q[0])
    with pytest.raises(RuntimeError, match=r"p_mod_q must be \[4\]"):
        ops.ntt_inner_product(*args, skip=skip, own=own, tensor=(a, b), p_mod_q=p_mod_q[0][1:].contiguous())


# dnum 3 with alpha 11 (N16QP1766L30D3's layout at 2^12 and 2^16), 3 digits of 61-60-bit primes with a short last
# one, 4 digits (the most thread groups: 5 products in a word's sum)
TENSOR_CASES = [CASES[0], CASES[1], CASES[5], (16, (46,) * 11, (60,) + (40,) * 30, 11),
                (16, (46,) * 11, (60,) + (40,) * 19, 11)]


@pytest.mark.gpu
@pytest.mark.parametrize("case", TENSOR_CASES, ids=lambda c: f"N2^{c[0]}-alpha{c[3]}-{len(c[2])}")
def test_ntt_inner_product_tensor_terms_are_bit_identical(case):
    """tensor=(a, b), p_mod_q on the tuned plans (the digit-group kernel's own-row group adds (P mod q_i) t_c) == the
    CPU's inner product plus the scaled terms on the Q rows; refused where that kernel does not run (the
    reference plan)."""
    rng, _ = fresh_rng()
    basis, digits, key, skip, own, a, b, p_mod_q = _tensor_case(rng, case)
    expected = _expected_with_tensor(basis, digits, key, skip, own, a, b, p_mod_q)
    rows = len(basis)
    gpu = RNSBasis.get(basis.primes, basis.n, "cuda")
    args = (gpu.moduli, gpu.ntt_table, key.cuda(), rows, rows)
    extra = dict(skip=skip, own=own.cuda(), tensor=(a.cuda(), b.cuda()), p_mod_q=p_mod_q[0].cuda())
    for name, plan in KERNEL_PLANS.items():
        if not plan.tuned_ntt:
            with pytest.raises(RuntimeError, match="need the CUDA digit-group kernel"):
                ops.ntt_inner_product(digits.cuda(), *args, **extra, plan=plan)
            continue
        got = ops.ntt_inner_product(digits.cuda(), *args, **extra, plan=plan)
        assert torch.equal(got.cpu(), expected), name
