"""Linear key switching (fhe_core.rlwe.linear_switching): the auxiliary base covers the products' bound (and a set
it cannot cover is refused), the aux-base products and CRT are exact at the bound's extremes against products
computed mod each target prime, linear equals hybrid with one-prime digits bit for bit and stays within both noise
bounds of hybrid with larger digits, and keys of one method are refused by the other.

(The noise of every linear operation against the exact result: test_rlwe_keyswitch.py, parametrised by method.)
"""
from math import prod

import numpy as np
import pytest
import torch

from fhe_core import ops, rlwe
from fhe_core.errors import ParameterError, ParamsMismatchError, UnsupportedMethodError
from fhe_core.ring import shoup_constants
from fhe_core.rlwe import context as rlwe_context
from fhe_core.rlwe import linear_switching
from fhe_core.rlwe.keys import linear_preprocess
from fhe_reference import fresh_rng, random_residues
from rlwe_helpers import SHAPES, Shape, context, decode, encode, fixed_seed, max_diff, q_modulus, random_poly
from test_rlwe_keyswitch import ks_noise_bound

WIDE_Q0 = Shape(10, (60, 40, 40, 40), (50, 50))  # a CKKS-like chain: the 60-bit q_0 needs three aux primes
ONE_PRIME_DIGITS = SHAPES[1]                     # alpha = 1: hybrid's digits are single primes too


def test_aux_base_covers_the_bound_with_two_or_three_primes():
    for shape, count in ((WIDE_Q0, 3), (Shape(10, (30,) * 4, (35,)), 2)):
        ctx = context(shape, key_switching="linear")
        aux = ctx.linear.aux.primes
        qp = ctx.p_primes + ctx.q_primes
        assert len(aux) == count and not set(aux) & set(qp)
        assert all(m.bit_length() == 61 and (m - 1) % (2 * ctx.n) == 0 for m in aux)
        assert prod(aux) > 4 * ctx.n * max(qp) * sum(ctx.q_primes)
        if count == 3:  # two would not do: the bound is what decides
            assert prod(aux[:2]) <= 4 * ctx.n * max(qp) * sum(ctx.q_primes)


def test_a_set_whose_bound_the_aux_base_cannot_cover_is_refused(monkeypatch):
    monkeypatch.setattr(rlwe_context, "LINEAR_MAX_AUX_PRIMES", 2)
    n = 1 << WIDE_Q0.log_n
    q = rlwe.RLWEContext(n, *_primes(WIDE_Q0)).q_primes  # hybrid: no aux base, accepted
    with pytest.raises(ParameterError, match="2 auxiliary primes of 61 bits .* cannot hold"):
        rlwe.RLWEContext(n, *_primes(WIDE_Q0), key_switching="linear")
    assert len(rlwe_context.linear_aux_primes(n, q[1:], q[1:])) == 2  # without the 60-bit prime two suffice
    with pytest.raises(ParameterError, match="key_switching must be 'hybrid' or 'linear'"):
        rlwe.RLWEContext(n, *_primes(WIDE_Q0), key_switching="double")


def _primes(shape):
    ctx = context(shape)
    return ctx.q_primes, ctx.p_primes


@pytest.mark.parametrize("shape", [WIDE_Q0, ONE_PRIME_DIGITS], ids=lambda s: s.id)
def test_aux_products_and_crt_are_exact_at_the_bound(shape):
    """extend() = sum_i [d]_{q_i} * k_i computed mod every target prime directly (ops in QP_l), for the extreme
    inputs (every digit coefficient q_i - 1, every key coefficient t - 1: the negacyclic sums reach +-N t sum q_i)
    and for random ones."""
    rng, _ = fresh_rng()
    ctx = context(shape, key_switching="linear")
    qp, rows, level = ctx.qp_basis, len(ctx.qp_basis), ctx.max_level
    top = qp.moduli[:, 0][:, None]
    extreme = (top - 1).expand(rows, ctx.n)
    for raw_coeffs, d_coeffs in ((extreme, extreme[ctx.alpha:]),
                                 (random_residues(rng, qp.primes, n=ctx.n), random_residues(rng, ctx.q_primes,
                                                                                            n=ctx.n))):
        raw = torch.stack([qp.ntt(raw_coeffs.contiguous()) for _ in range(2)])       # (b, a) of every digit
        raw = torch.stack([ops.mul_const(raw, *_digit_scale(ctx, i)) for i in range(level + 1)])
        key = rlwe.SwitchingKey(data=torch.stack([linear_preprocess(ctx, r) for r in raw]), params_id=ctx.params_id,
                                uniform_seed=bytes(32), method="linear")
        d = ctx.q_basis.ntt(d_coeffs.contiguous())
        got = linear_switching.extend(ctx, linear_switching.lift(ctx, d, level), key, level)
        expected = torch.zeros((2, rows, ctx.n), dtype=torch.int64)
        for i in range(level + 1):  # digit i, read mod every target prime, times the key's rows there
            digit = qp.ntt(torch.remainder(d_coeffs[i].expand(rows, -1), top).contiguous())
            expected = ops.mul_add(raw[i], digit, expected, qp.moduli)
        assert torch.equal(got, qp.intt(expected))


def _digit_scale(ctx, i):
    """A per-digit factor (i + 1) on every row, so that the digits' keys differ (a swapped digit would show)."""
    c, w = shoup_constants([i + 1] * len(ctx.qp_basis), ctx.qp_basis.primes)
    return c, w, ctx.qp_basis.moduli


def _pair(shape):
    """(hybrid, linear) contexts of one shape (the same primes) with the same secret, keys and ciphertext seeds."""
    out = []
    for method in ("hybrid", "linear"):
        ctx = context(shape, key_switching=method)
        sk = rlwe.gen_secret_key(ctx, seed=fixed_seed("linear/sk"))
        elements = [rlwe.galois_element_for_rotation(r, ctx.n) for r in (1, -3)]
        elements.append(rlwe.galois_element_for_conjugation(ctx.n))
        out.append((ctx, sk, rlwe.gen_eval_keys(ctx, sk, elements, seed=fixed_seed("linear/evk")), elements))
    return out


def _operations(ctx, sk, keys, elements, level):
    """relinearize(ct x ct), each rotation / the conjugation, and the hoisted rotations, on fixed-seed inputs."""
    rng = np.random.default_rng(7)
    m1 = [v if i % 16 == 0 else 0 for i, v in enumerate(random_poly(rng, ctx.n, 16))]
    m2 = random_poly(rng, ctx.n, 16)
    a = rlwe.encrypt_sk(ctx, sk, encode(ctx, m1, level), level, seed=fixed_seed("linear/a"))
    b = rlwe.encrypt_sk(ctx, sk, encode(ctx, m2, level), level, seed=fixed_seed("linear/b"))
    q = ctx.q_at(level)
    (c0, c1), (e0, e1) = a.data, b.data
    d = torch.stack((ops.mul(c0, e0, q.moduli), ops.mul_add(c0, e1, ops.mul(c1, e0, q.moduli), q.moduli),
                     ops.mul(c1, e1, q.moduli)))
    out = {"relin": rlwe.relinearize(ctx, a.replace(data=d), keys)}
    out |= {f"galois {k}": rlwe.apply_galois(ctx, b, k, keys) for k in elements}
    out |= {f"hoisted {k}": ct for k, ct in rlwe.apply_galois_hoisted(ctx, b, elements, keys).items()}
    return out


def test_linear_equals_hybrid_with_one_prime_digits_bit_for_bit():
    """With alpha = 1 hybrid's ModUp of a one-prime digit is exact too, and both ModDowns round the same integer:
    the same seeds give the same words (relinearization, rotations, conjugation, hoisted rotations)."""
    (h_ctx, h_sk, h_keys, elements), (l_ctx, l_sk, l_keys, _) = _pair(ONE_PRIME_DIGITS)
    for level in (h_ctx.max_level, 1):
        hybrid = _operations(h_ctx, h_sk, h_keys, elements, level)
        linear = _operations(l_ctx, l_sk, l_keys, elements, level)
        for name, ct in hybrid.items():
            assert torch.equal(ct.data, linear[name].data), f"{name}, level {level}"


@pytest.mark.parametrize("shape", [WIDE_Q0, SHAPES[0]], ids=lambda s: s.id)
def test_linear_equals_hybrid_within_both_noise_bounds(shape):
    """With alpha > 1 the two methods' switching noises differ; the decryptions differ by at most the sum of the two
    bounds (ks_noise_bound: hybrid's digits alpha Q_j, linear's q_i), and linear's is the smaller (printed)."""
    (h_ctx, h_sk, h_keys, elements), (l_ctx, l_sk, l_keys, _) = _pair(shape)
    level = h_ctx.max_level
    big_q = q_modulus(h_ctx, level)
    hybrid = _operations(h_ctx, h_sk, h_keys, elements, level)
    linear = _operations(l_ctx, l_sk, l_keys, elements, level)
    bound = ks_noise_bound(h_ctx, h_sk, level) + ks_noise_bound(l_ctx, l_sk, level)
    for name, ct in hybrid.items():
        diff = max_diff(decode(h_ctx, rlwe.decrypt(h_ctx, h_sk, ct), level),
                        decode(l_ctx, rlwe.decrypt(l_ctx, l_sk, linear[name]), level), big_q)
        print(f"{shape.id} {name}: |linear - hybrid| = {diff} (bound {bound:.0f})")
        assert diff <= bound, name


def test_keys_of_one_method_are_refused_by_the_other():
    (h_ctx, _, h_keys, elements), (l_ctx, _, l_keys, _) = _pair(ONE_PRIME_DIGITS)
    ct = rlwe.encrypt_sk(l_ctx, rlwe.gen_secret_key(l_ctx), encode(l_ctx, [0] * l_ctx.n, 1), 1)
    with pytest.raises(ParamsMismatchError, match="made for hybrid key switching, the context switches keys by the "
                                                  "linear method"):
        rlwe.key_switch(l_ctx, ct.data[1], h_keys.relin_key("test"), 1)
    with pytest.raises(ParamsMismatchError, match="made for linear key switching, the context switches keys by the "
                                                  "hybrid method"):
        rlwe.key_switch(h_ctx, ct.data[1], l_keys.galois_key(elements[0], "test"), 1)


def test_hybrid_only_steps_are_refused_on_a_linear_context():
    ctx = context(ONE_PRIME_DIGITS, key_switching="linear")
    d = encode(ctx, [1] * ctx.n, 1)
    with pytest.raises(UnsupportedMethodError, match="decompose_mod_up: a step of hybrid key switching"):
        rlwe.decompose_mod_up(ctx, d, 1)
    assert isinstance(UnsupportedMethodError("x"), NotImplementedError)
