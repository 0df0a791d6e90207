"""Sparse-secret encapsulation keys against exact integers: dense s -> sparse s' at level 0, then
ModRaise under s' and back to s at the top level, each step's noise under a rigorous bound; the
overflow I bounded by the ephemeral weight; the refusals (a mixed pair, a swapped key, a dense
"ephemeral" secret)."""
import math

import pytest
import torch

from fhe_core import rlwe
from fhe_core.errors import MissingKeyError, ParameterError, ParamsMismatchError
from fhe_core.rlwe import encapsulation
from rlwe_helpers import SHAPES, context, decode, fixed_seed

DENSE_SHAPES = [s for s in SHAPES if s.hamming_weight == 0]
EPHEMERAL_WEIGHT = 32


def _setup(shape, label: str = "a"):
    ctx = context(shape)
    sk = rlwe.gen_secret_key(ctx, seed=fixed_seed(f"main {label}"))
    eph = rlwe.gen_ephemeral_secret(ctx, EPHEMERAL_WEIGHT, seed=fixed_seed(f"ephemeral {label}"))
    return ctx, sk, eph, rlwe.gen_encapsulation_keys(ctx, sk, eph, seed=fixed_seed(f"keys {label}"))


def _encrypt_level0(ctx, sk):
    m = torch.zeros(1, ctx.n, dtype=torch.int64)
    m[0, :16] = torch.arange(16) * 1000 + 7
    return rlwe.encrypt_sk(ctx, sk, ctx.q_at(0).ntt(m), 0, seed=fixed_seed("message"))


def _switch_bound(ctx, modulus_p: int, s_l1: int) -> float:
    """Worst case of a one-digit switch of d (|d| <= q_0 / 2): |d e|_inf / P' + (1 + |s_to|_1) / 2 (exact
    rounding in ModDown)."""
    return ctx.q_primes[0] / 2 * ctx.error_eta * ctx.n / modulus_p + (1 + s_l1) / 2


@pytest.mark.parametrize("shape", DENSE_SHAPES, ids=lambda s: s.id)
def test_dense_to_sparse_and_back(shape):
    ctx, sk, eph, (to_sparse, to_dense) = _setup(shape)
    q0, top = ctx.q_primes[0], ctx.max_level
    ct = _encrypt_level0(ctx, sk)
    before = decode(ctx, rlwe.decrypt(ctx, sk, ct), 0)                       # m + e under s

    sparse = encapsulation.switch_to_sparse(ctx, ct.data.contiguous(), to_sparse)
    under_eph = decode(ctx, rlwe.decrypt(ctx, eph, ct.replace(data=sparse)), 0)
    noise = max(abs(a - b) for a, b in zip(under_eph, before))
    bound = _switch_bound(ctx, ctx.p_primes[0], EPHEMERAL_WEIGHT)
    print(f"dense -> sparse: noise {noise} (bound 2^{math.log2(bound):.1f})")
    assert noise <= bound

    raised = encapsulation.raise_to_dense(ctx, sparse, to_dense, top)
    value = decode(ctx, rlwe.decrypt(ctx, sk, ct.replace(data=raised, level=top)), top)   # c0 + c1 s' + e_ks
    overflow = [round(v / q0) for v in value]
    assert max(map(abs, overflow)) <= (EPHEMERAL_WEIGHT + 1) // 2 + 1            # I of the sparse secret
    back = max(abs(v - q0 * i - u) for v, i, u in zip(value, overflow, under_eph))
    bound = _switch_bound(ctx, ctx.big_p, ctx.n)
    print(f"sparse -> dense at level {top}: noise {back} (bound 2^{math.log2(bound):.1f}), max |I| "
          f"{max(map(abs, overflow))}")
    assert back <= bound


def test_same_seed_same_keys_os_seed_fresh_keys():
    shape = DENSE_SHAPES[0]
    _, _, _, (a1, b1) = _setup(shape)
    _, _, _, (a2, b2) = _setup(shape)
    assert torch.equal(a1.data, a2.data) and torch.equal(b1.data, b2.data) and a1.ephemeral_id == b1.ephemeral_id
    ctx, sk, eph, _ = _setup(shape)
    c, d = rlwe.gen_encapsulation_keys(ctx, sk, eph)
    assert c.uniform_seed != a1.uniform_seed and d.uniform_seed != b1.uniform_seed


def test_compressed_halves_regenerate():
    ctx, _, _, keys = _setup(DENSE_SHAPES[0])
    for key in keys:
        assert torch.equal(rlwe.encapsulation_key_uniform(ctx, key.direction, key.uniform_seed), key.data[:, 1])


def test_key_set_refuses_a_mixed_or_missing_pair():
    ctx, _, _, (to_sparse, to_dense) = _setup(DENSE_SHAPES[0])
    *_, (other_sparse, _) = _setup(DENSE_SHAPES[0], "b")
    keys = rlwe.EvalKeySet(ctx.params_id, encapsulation=[to_sparse, to_dense])
    assert keys.encapsulation_keys("test") == (to_sparse, to_dense)
    keys.add(other_sparse)
    with pytest.raises(ParameterError, match="different ephemeral secrets"):
        keys.encapsulation_keys("test")
    with pytest.raises(MissingKeyError, match="no sparse_to_dense"):
        rlwe.EvalKeySet(ctx.params_id, encapsulation=[to_sparse]).encapsulation_keys("test")


def test_checks_name_the_problem():
    ctx, sk, eph, (to_sparse, to_dense) = _setup(DENSE_SHAPES[0])
    with pytest.raises(ParameterError, match="expected the dense_to_sparse"):
        rlwe.check_encapsulation_key(ctx, to_dense, rlwe.DENSE_TO_SPARSE, "test")
    with pytest.raises(ParameterError, match="must be sparse"):
        rlwe.gen_encapsulation_keys(ctx, sk, sk)
    with pytest.raises(ParameterError, match="is the main secret"):
        rlwe.gen_encapsulation_keys(ctx, eph, eph)
    with pytest.raises(ParameterError, match="ephemeral Hamming weight"):
        rlwe.gen_ephemeral_secret(ctx, 0)
    other = context(DENSE_SHAPES[1])
    with pytest.raises(ParamsMismatchError):
        rlwe.check_encapsulation_key(other, to_sparse, rlwe.DENSE_TO_SPARSE, "test")
    rlwe.check_encapsulation_key(ctx, to_sparse, rlwe.DENSE_TO_SPARSE, "test")
