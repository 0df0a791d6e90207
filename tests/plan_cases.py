"""The kernel plans the tests compare (fhe_core.ops.KernelPlan): every choice gives the reference's words.

KERNEL_PLANS are the kernel choices an op can run with on CUDA: the reference kernels, the tuned ones with integer
butterflies (a context whose primes are all above 2^46 runs these), and the tuned ones with FP64 butterflies (the
default where a context has smaller primes). The CPU build has one implementation and ignores them.
"""
import torch

from fhe_core import ops
from fhe_core.ops import TUNED, KernelPlan
from fhe_core.ring import RNSBasis, shoup_constants
from fhe_reference import random_residues

REFERENCE = KernelPlan.reference()
INTEGER = TUNED.replace(fp64_butterflies=False)
KERNEL_PLANS = {"reference": REFERENCE, "integer": INTEGER, "tuned": TUNED}


def assert_forward_ntt_matches_cpu(rng, primes: list[int], n: int) -> None:
    """The forward NTT on CUDA, plain and through ModDown's epilogue, == the CPU build on every kernel plan, for
    inputs at q - 1 and 4q - 1 (the forward transform accepts [0, 4q); 4q < 2^63 for the primes given) and an
    epilogue operand c at q - 1: the extremes a prime limit of the lazy kernels must survive."""
    cpu, gpu = RNSBasis.get(primes, n, "cpu"), RNSBasis.get(primes, n, "cuda")
    a = random_residues(rng, primes, (2,), n)
    q_col = cpu.moduli[:, :1]
    a[0, :, : n // 2] = q_col - 1
    a[1, :, : n // 2] = 4 * q_col - 1
    expected = cpu.ntt(a)
    assert torch.equal(expected, cpu.ntt(a % q_col))
    c = random_residues(rng, [3] + primes, (2,), n)  # one P row (not read), then Q's
    c[0, 1:, :64] = q_col - 1
    consts = [int(rng.integers(1, q)) for q in primes]
    k_cpu, k_gpu = shoup_constants(consts, primes), shoup_constants(consts, primes, "cuda")
    expected_down = ops.mod_down_ntt(a, c, 1, *k_cpu, cpu.moduli, cpu.ntt_table)
    for name, plan in KERNEL_PLANS.items():
        got = gpu.with_plan(plan).ntt(a.cuda()).cpu()
        got_down = ops.mod_down_ntt(a.cuda(), c.cuda(), 1, *k_gpu, gpu.moduli, gpu.ntt_table, plan=plan).cpu()
        assert torch.equal(got, expected), f"{name} plan"
        assert torch.equal(got_down, expected_down), f"{name} plan, ModDown's epilogue"
