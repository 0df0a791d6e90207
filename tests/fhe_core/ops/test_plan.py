"""The kernel plan (fhe_core.ops.KernelPlan): how a context resolves it, what the extension receives, and that a
context's plan reaches its bases without copying their tables. That every plan gives the same words is what the
other tests of each kernel and composition check (test_plan_kernels, test_keyswitch_paths, ...)."""
import dataclasses

import pytest
import torch

from fhe_core import ckks, ops, rlwe
from fhe_core.errors import ParameterError
from fhe_core.ops import TUNED, KernelPlan
from fhe_core.params import preset
from fhe_core.ring import RNSBasis, generate_primes
from fhe_reference import fresh_rng, random_residues
from plan_cases import INTEGER, REFERENCE

PRIMES_40 = generate_primes([40, 40, 46], 1 << 11)
PRIMES_50 = generate_primes([50, 50, 60], 1 << 11)


def test_a_cpu_context_resolves_the_compositions_that_pay_there():
    """On the CPU only the fused circuit; no kernel choice (the CPU build has one implementation of each op)."""
    plan = KernelPlan.resolve("cpu", 1 << 16, PRIMES_40)
    assert plan == REFERENCE.replace(fused_circuit=True)
    assert plan.kernel_flags == 0 and not plan.tensor_in_inner_product(1)


def test_flags_reference_and_on():
    assert (TUNED.kernel_flags, INTEGER.kernel_flags, REFERENCE.kernel_flags) == (7, 5, 0)
    assert all(not getattr(REFERENCE, f.name) for f in dataclasses.fields(KernelPlan))
    assert TUNED.on("cpu") == REFERENCE.replace(mod_up_in_one_launch=True, inner_product_in_mod_up=True,
                                                fused_circuit=True)
    assert TUNED.on(torch.device("cpu")).kernel_flags == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        TUNED.fused_circuit = False  # immutable: a plan is shared by contexts and threads


def test_tensor_terms_go_into_the_inner_product_up_to_four_digits():
    assert [TUNED.tensor_in_inner_product(d) for d in (1, 3, 4, 5, 7)] == [True, True, True, False, False]
    assert not TUNED.replace(inner_product_in_mod_up=False).tensor_in_inner_product(3)
    assert not TUNED.replace(tuned_ntt=False).tensor_in_inner_product(3)


def test_the_extension_refuses_flags_it_does_not_know():
    rng, _ = fresh_rng()
    basis = RNSBasis.get(PRIMES_40, 1 << 11)
    a = random_residues(rng, PRIMES_40, (), 1 << 11)
    for flags in (8, -1):
        with pytest.raises(RuntimeError, match=r"ntt: plan must be KernelPlan.kernel_flags \(0 to 7\)"):
            torch.ops.fhe_core.ntt(a, basis.moduli, basis.ntt_table, flags)
    assert torch.equal(ops.ntt(a, basis.moduli, basis.ntt_table, plan=REFERENCE), basis.ntt(a))


def test_a_context_carries_its_plan_to_views_of_shared_tables():
    params = preset("N12QP483L6D3Insecure", allow_insecure=True)
    default, reference = ckks.rlwe_context(params), ckks.rlwe_context(params, REFERENCE)
    assert default.plan == KernelPlan.resolve("cpu", params.n, params.q_primes + params.p_primes)
    assert reference.plan == REFERENCE and reference is ckks.rlwe_context(params, REFERENCE)  # (cached)
    for level in (params.max_level, 2):
        for basis in (default.q_at(level), default.qp_at(level), default.tables(level).p_to_q.src):
            assert basis.plan == default.plan
        for mine, theirs in ((reference.q_at(level), default.q_at(level)), (reference.qp_at(level),
                                                                            default.qp_at(level))):
            assert mine.plan == REFERENCE and mine.ntt_table.data_ptr() == theirs.ntt_table.data_ptr()
    assert ckks.Evaluator(params, plan=REFERENCE).plan == REFERENCE
    assert rlwe.RLWEContext.from_params(params, plan=TUNED).plan == TUNED.on("cpu")
    with pytest.raises(ParameterError, match="expected a KernelPlan"):
        ckks.rlwe_context(params, "reference")


def test_with_plan_shares_the_tables():
    basis = RNSBasis.get(PRIMES_50, 1 << 11)
    other = basis.with_plan(REFERENCE)
    assert other.plan == REFERENCE and basis.with_plan(basis.plan) is basis
    assert other.moduli.data_ptr() == basis.moduli.data_ptr() and other.prefix(2).plan == REFERENCE


@pytest.mark.gpu
def test_a_cuda_context_resolves_every_tuned_path_that_gains():
    """FP64 butterflies only where a prime is below 2^46, the fused inner product from N = 2^15 on, the tensor-core
    Conv on sm_80 and later."""
    major = torch.cuda.get_device_capability()[0]
    plan = KernelPlan.resolve("cuda", 1 << 16, PRIMES_40)
    assert plan == TUNED.replace(tensor_core_conv=major >= 8)
    assert not KernelPlan.resolve("cuda", 1 << 16, PRIMES_50).fp64_butterflies  # (50 and 60 bits)
    assert not KernelPlan.resolve("cuda", 1 << 14, PRIMES_40).inner_product_in_mod_up
