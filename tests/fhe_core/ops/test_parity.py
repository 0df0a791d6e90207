"""CPU and CUDA builds give bit-identical results for every op on fresh random inputs and for
every sampler on the same (seed, nonce). Also runs torch.library.opcheck on the ops."""
import os

import pytest
import torch

from fhe_core import ops
from fhe_core.ring import BasisConverter, RNSBasis, generate_primes, shoup_constants
from fhe_reference import fresh_rng, random_residues

LOG_NS = [10, 14, 16, 17]


def _bases(n, bits, device):
    return RNSBasis.get(generate_primes(bits, n), n, device)


def _op_cases(n):
    """(name, fn(basis, inputs...) -> tensor) for every residue op."""
    return {
        "ntt": lambda B, a, b, c: B.ntt(a),
        "intt": lambda B, a, b, c: B.intt(a),
        "add": lambda B, a, b, c: ops.add(a, b, B.moduli),
        "sub": lambda B, a, b, c: ops.sub(a, b[0], B.moduli),
        "neg": lambda B, a, b, c: ops.neg(a, B.moduli),
        "mul": lambda B, a, b, c: ops.mul(a, b, B.moduli),
        "mul_add": lambda B, a, b, c: ops.mul_add(a, b, c, B.moduli),
        "automorphism_ntt": lambda B, a, b, c: ops.automorphism_ntt(a, B.moduli, pow(5, 17, 2 * n)),
        "automorphism_coeff": lambda B, a, b, c: ops.automorphism_coeff(a, B.moduli, 2 * n - 1),
    }


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", LOG_NS)
def test_residue_ops_bit_identical(log_n):
    rng, _ = fresh_rng()
    n = 1 << log_n
    bits = [61, 59, 50, 45, 36, 30]
    cpu, gpu = _bases(n, bits, "cpu"), _bases(n, bits, "cuda")
    a, b, c = (random_residues(rng, cpu.primes, (2,), n) for _ in range(3))
    for name, fn in _op_cases(n).items():
        expected = fn(cpu, a, b, c)
        got = fn(gpu, a.cuda(), b.cuda(), c.cuda()).cpu()
        assert torch.equal(got, expected), f"{name} differs at N=2^{log_n}"
    constants = [int(rng.integers(0, q)) for q in cpu.primes]
    k_cpu = shoup_constants(constants, cpu.primes)
    k_gpu = shoup_constants(constants, cpu.primes, "cuda")
    assert torch.equal(ops.mul_const(a.cuda(), *k_gpu, gpu.moduli).cpu(), ops.mul_const(a, *k_cpu, cpu.moduli))
    assert torch.equal(ops.sub_mul_const(a.cuda(), b.cuda(), *k_gpu, gpu.moduli).cpu(),
                       ops.sub_mul_const(a, b, *k_cpu, cpu.moduli))
    last = a[:, :1].contiguous()
    assert torch.equal(ops.center_lift(last.cuda(), cpu.primes[0], gpu.moduli[1:]).cpu(),
                       ops.center_lift(last, cpu.primes[0], cpu.moduli[1:]))


@pytest.mark.gpu
@pytest.mark.parametrize("l_in,l_out", [(3, 2), (10, 30), (30, 10)])
def test_bconv_bit_identical(l_in, l_out):
    rng, _ = fresh_rng()
    n = 1 << 16
    primes = generate_primes([55] * l_in + [60] * l_out, n)
    conv = {d: BasisConverter.get(RNSBasis.get(primes[:l_in], n, d), RNSBasis.get(primes[l_in:], n, d))
            for d in ("cpu", "cuda")}
    x = random_residues(rng, primes[:l_in], (2,), n)
    assert torch.equal(conv["cuda"](x.cuda()).cpu(), conv["cpu"](x))
    assert torch.equal(conv["cuda"](x.cuda(), exact=True).cpu(), conv["cpu"](x, exact=True))


@pytest.mark.gpu
def test_ks_inner_product_bit_identical():
    """dnum = 3 digits over Q_l u P (30 + 10 limbs) against a key over Q_L u P (36 + 10)."""
    rng, _ = fresh_rng()
    n = 1 << 16
    primes = generate_primes([50] * 36 + [60] * 10, n)
    level = primes[:30] + primes[36:]
    digits = random_residues(rng, level, (3,), n)
    key = random_residues(rng, primes, (3, 2), n)
    m_cpu = RNSBasis.get(level, n).moduli
    expected = ops.ks_inner_product(digits, key, 30, 36, m_cpu)
    got = ops.ks_inner_product(digits.cuda(), key.cuda(), 30, 36, m_cpu.cuda())
    assert torch.equal(got.cpu(), expected)


@pytest.mark.gpu
def test_mod_up_conv_bit_identical():
    """dnum = 8 digits of one prime (BFV-style) extended to 9 rows at N = 2^14."""
    from fhe_core import rlwe
    rng, _ = fresh_rng()
    n = 1 << 14
    primes = generate_primes([55] * 8 + [60], n)
    results = []
    for device in ("cpu", "cuda"):
        ctx = rlwe.RLWEContext(n, primes[:8], primes[8:], device)
        t, b = ctx.tables(7), ctx.tables(7).batched_mod_up
        x = random_residues(rng, primes[:8], (), n, device) if not results else results[0][0].to(device)
        results.append((x, ops.mod_up_conv(x, t.q.moduli, b.qhat_inv, b.qhat_inv_shoup, t.qp.moduli, b.qhat_mod_p)))
    assert torch.equal(results[1][1].cpu(), results[0][1])


@pytest.mark.gpu
@pytest.mark.parametrize("log_n", [10, 16])
def test_samplers_bit_identical(log_n):
    n = 1 << log_n
    cpu, gpu = _bases(n, [61, 50, 40], "cpu"), _bases(n, [61, 50, 40], "cuda")
    seed = os.urandom(32)
    for name, fn in {
        "uniform": lambda B: ops.sample_uniform(B.moduli, n, seed, 5),
        "cbd": lambda B: ops.sample_cbd(B.moduli, n, seed, 6, 21),
        "ternary": lambda B: ops.sample_ternary(B.moduli, n, seed, 7, 0),
        "ternary_h192": lambda B: ops.sample_ternary(B.moduli, n, seed, 8, 192),
        "ternary_dense": lambda B: ops.sample_ternary(B.moduli, n, seed, 9, 2 * n // 3),
    }.items():
        assert torch.equal(fn(gpu).cpu(), fn(cpu)), f"{name} differs at N=2^{log_n}"


@pytest.mark.parametrize("device", [pytest.param("cpu"), pytest.param("cuda", marks=pytest.mark.gpu)])
def test_opcheck(device):
    """Schemas, fake (meta) implementations and dispatch agree (torch.library.opcheck)."""
    rng, _ = fresh_rng()
    n = 1 << 10
    basis = _bases(n, [50, 40], device)
    other = RNSBasis.get(generate_primes([50, 40, 45], n)[2:], n, device)
    conv = BasisConverter.get(basis, other)
    a, b, c = (random_residues(rng, basis.primes, (2,), n, device) for _ in range(3))
    m, t = basis.moduli, basis.ntt_table
    plan = ops.TUNED.kernel_flags
    cases = [
        (torch.ops.fhe_core.ntt.default, (a, m, t, plan)),
        (torch.ops.fhe_core.intt.default, (a, m, t, plan)),
        (torch.ops.fhe_core.add.default, (a, b, m)),
        (torch.ops.fhe_core.mul_add.default, (a, b, c, m)),
        (torch.ops.fhe_core.bconv.default,
         (a, m, other.moduli, conv.qhat_inv, conv.qhat_inv_shoup, conv.qhat_mod_p, plan)),
        (torch.ops.fhe_core.bconv.default,
         (a, m, other.moduli, conv.qhat_inv, conv.qhat_inv_shoup, conv.qhat_mod_p, plan, conv.neg_q_mod_p)),
        (torch.ops.fhe_core.automorphism_ntt.default, (a, m, 5)),
        (torch.ops.fhe_core.ks_inner_product.default, (a, torch.stack([a, b]).transpose(0, 1).contiguous(), 2, 2, m)),
        (torch.ops.fhe_core.sample_cbd.default, (m, n, ops.seed_words(os.urandom(32)), 1, 21)),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))
