"""ops.mod_down_fused (ModDown with the inverse's columns pass, the exact Conv and the forward's columns pass in
one CUDA kernel, ops.kernel_variant "col_fuse") == intt, bconv (exact, lazy) and mod_down_ntt in turn, on the CPU
and on every CUDA variant, bit for bit."""
import numpy as np
import pytest
import torch

from fhe_core import ops
from fhe_core.ring import BasisConverter, RNSBasis, generate_primes, shoup_constants, words_tensor
from fhe_reference import fresh_rng, random_residues

# 0: the composed ops; 1: the fused kernel with the CUDA-core Conv; 2-7: with the tensor-core Conv (4, 6, 8 teams
# of 4 warps, one Q row per step; 4, 6 teams with two; 4 teams, two rows, unpadded tiles)
COL_FUSE_VARIANTS = (0, 1, 2, 3, 4, 5, 6, 7)


class Case:
    """ModDown's operands at N = 2^log_n: c [batch, alpha + l, N] over (P, Q) with extreme residues, the
    P -> Q conversion, P^-1 mod q_i (Shoup) and an addend for the first add_batches components."""

    def __init__(self, rng, log_n, p_bits, q_bits, batch, add_batches, device="cpu"):
        self.n = n = 1 << log_n
        primes = generate_primes(list(p_bits) + list(q_bits), n)
        self.alpha = alpha = len(p_bits)
        self.p = RNSBasis.get(primes[:alpha], n, device)
        self.q = RNSBasis.get(primes[alpha:], n, device)
        self.conv = BasisConverter.get(self.p, self.q)
        big_p = self.p.modulus
        # The P part's coefficients (what the inverse NTT returns): p - 1, 0, and the exact conversion's
        # rounding edge (P - 1) / 2, (P + 1) / 2 (the centred representative flips between them).
        x = random_residues(rng, self.p.primes, (batch,), n)
        p_col = torch.tensor(self.p.primes, dtype=torch.int64).unsqueeze(-1)
        x[..., :64] = p_col - 1
        x[..., 64:128] = 0
        for offset, value in ((128, (big_p - 1) // 2), (129, (big_p + 1) // 2), (130, big_p - 1)):
            x[..., offset::n // 4] = words_tensor([value % p for p in self.p.primes]).unsqueeze(-1)
        cpu_p = RNSBasis.get(self.p.primes, n, "cpu")
        c_q = random_residues(rng, self.q.primes, (batch,), n)
        c_q[..., 256:320] = torch.tensor(self.q.primes, dtype=torch.int64).unsqueeze(-1) - 1
        self.c = torch.cat([cpu_p.ntt(x), c_q], dim=1).to(device)
        p_inv = [pow(big_p, -1, q) for q in self.q.primes]
        self.p_inv = shoup_constants(p_inv, self.q.primes, device)
        self.add = random_residues(rng, self.q.primes, (add_batches,), n).to(device) if add_batches else None

    def fused(self, c=None, *, add_galois=1, fragments=True):
        conv = self.conv
        return ops.mod_down_fused(self.c if c is None else c, self.p.moduli, self.p.ntt_table, conv.qhat_inv,
                                  conv.qhat_inv_shoup, conv.qhat_mod_p, conv.neg_q_mod_p, *self.p_inv, self.q.moduli,
                                  self.q.ntt_table, self.add, add_galois=add_galois,
                                  fragments=conv.mma_fragments.get(True) if fragments else None)

    def composed(self, *, add_galois=1):
        coeffs = self.p.intt(self.c[:, :self.alpha])
        x = self.conv(coeffs, exact=True, lazy=True)
        return ops.mod_down_ntt(x, self.c, self.alpha, *self.p_inv, self.q.moduli, self.q.ntt_table, self.add,
                                add_galois=add_galois)


def test_mod_down_fused_is_the_composed_ops_on_cpu():
    rng, _ = fresh_rng()
    case = Case(rng, 11, (61, 60, 59), (59, 50, 40, 30), batch=3, add_batches=2)
    for add_galois in (1, 5):
        got = case.fused(add_galois=add_galois)
        assert got.shape == (3, 4, case.n)
        assert torch.equal(got, case.composed(add_galois=add_galois)), add_galois


def test_mod_down_fused_rejects_bad_operands():
    rng, _ = fresh_rng()
    case = Case(rng, 10, (61, 60), (50, 40), batch=2, add_batches=0)
    conv = case.conv
    args = [case.p.moduli, case.p.ntt_table, conv.qhat_inv, conv.qhat_inv_shoup, conv.qhat_mod_p, conv.neg_q_mod_p,
            *case.p_inv, case.q.moduli, case.q.ntt_table]
    with pytest.raises(RuntimeError, match="c must be \\[batch, 2 \\+ 2, N\\]"):
        ops.mod_down_fused(case.c[:, :3], *args)
    with pytest.raises(RuntimeError, match="qhat_mod_p must be \\[2, 2\\]"):
        bad = list(args)
        bad[4] = conv.qhat_mod_p.t().contiguous()[:1]
        ops.mod_down_fused(case.c, *bad)
    with pytest.raises(RuntimeError, match="add_galois"):
        ops.mod_down_fused(case.c, *args, add_galois=2)
    with pytest.raises(RuntimeError, match="col_fuse is 0 \\(reference\\) to 7, got 8"):
        ops.kernel_variant("col_fuse", 8)


# (log_n, P bits, Q bits, batch, add_batches): ModDown of N16QP1766L30D3 at the top level (alpha 11, 31 Q primes,
# the compiled-in column length), a level below it with short P primes, 1 to 4 K tiles of the tensor-core Conv
# (alpha 3, 5, 11, 15), the smallest and largest N. The bit sizes put Q primes on every side of the forward
# columns' lazy (~2^59.3 at N = 2^16) and truncated (~2^58.3) limits and below 2^32, P primes on both sides of
# the lazy inverse's 2^60.
SHAPES = [
    (16, (61, 60) + (59,) * 9, (60, 59, 58) + (50,) * 27 + (30,), 2, 1),
    (16, (60,) * 11, (58,) * 20, 2, 2),
    (11, (61, 60, 59), (59, 50, 40, 30, 58, 45, 60), 3, 1),
    (12, (61, 59, 50, 60, 58), (59, 58, 50, 40, 30, 60), 2, 2),
    (10, (61, 60) + (59,) * 9, (59, 50, 40), 2, 1),
    (17, (61,) + (59,) * 14, (59, 58, 30, 50), 1, 1),
]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"N2^{s[0]}-alpha{len(s[1])}-l{len(s[2])}")
def test_mod_down_fused_variants_are_bit_identical(shape):
    """Every col_fuse variant (0: the composed ops) under the NTT variants that change the butterflies the
    columns must match (0 Harvey, 3 lazy, 5 lazy inverse, 6 truncated), with and without the tensor-core
    operands, with sigma_k(add): == the CPU build."""
    log_n, p_bits, q_bits, batch, add_batches = shape
    _, seed = fresh_rng()
    cpu = Case(np.random.default_rng(seed), log_n, p_bits, q_bits, batch, add_batches)
    gpu = Case(np.random.default_rng(seed), log_n, p_bits, q_bits, batch, add_batches, "cuda")
    assert torch.equal(gpu.c.cpu(), cpu.c)
    expected = {k: cpu.fused(add_galois=k) for k in (1, 2 * cpu.n - 1)}
    for ntt_variant in (6, 5, 3, 0):
        for variant in COL_FUSE_VARIANTS:
            with ops.use_kernel_variant("ntt", ntt_variant), ops.use_kernel_variant("col_fuse", variant):
                for k, want in expected.items():
                    got = gpu.fused(add_galois=k).cpu()
                    assert torch.equal(got, want), (ntt_variant, variant, k)
                if variant >= 2:  # no tensor-core operands: the CUDA-core Conv
                    assert torch.equal(gpu.fused(fragments=False).cpu(), expected[1]), (ntt_variant, variant)


@pytest.mark.gpu
def test_mod_down_fused_reads_a_strided_batch():
    """c as a batch of [alpha + l, N] blocks inside a larger tensor (ModDown's c is a view of the inner product's
    output in places): the same words as from a contiguous copy."""
    rng, _ = fresh_rng()
    gpu = Case(rng, 16, (61,) + (59,) * 10, (59, 58, 50, 30), 3, 3, "cuda")
    big = torch.cat([gpu.c, gpu.c[:, :5]], dim=1)  # [3, alpha + l + 5, N]
    expected = gpu.fused().cpu()
    for variant in COL_FUSE_VARIANTS:
        with ops.use_kernel_variant("col_fuse", variant):
            assert torch.equal(gpu.fused(big[:, :gpu.c.shape[1]]).cpu(), expected), variant
