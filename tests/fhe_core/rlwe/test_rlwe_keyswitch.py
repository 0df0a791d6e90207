"""Hybrid key switching against exact integers: ModUp digits by CRT, ModDown against round(x/P),
key switching / relinearization / Galois automorphisms against the exact plaintext result with a
rigorous noise bound, hoisted against non-hoisted rotations, and the typed errors."""
import math
from math import prod

import numpy as np
import pytest
import torch

from fhe_core import ops, rlwe
from fhe_core.ring import generate_primes, words_tensor
from fhe_core.errors import LevelMismatchError, MissingKeyError, ParameterError, ParamsMismatchError
from fhe_reference import crt, fresh_rng, negacyclic_product, random_residues, substitute
from rlwe_helpers import SHAPES, context, decode, encode, fixed_seed, max_diff, q_modulus, random_poly


def _levels(ctx):
    """Top level, one with a truncated last digit where alpha > 1, and level 0."""
    return sorted({ctx.max_level, max(ctx.max_level - 1, 0), ctx.alpha, 0} & set(range(ctx.max_level + 1)),
                  reverse=True)


def ks_noise_bound(ctx, sk, level: int) -> float:
    """Worst case of the key-switching noise sum_j d~_j e_j / P + (eps0 - u0) + (eps1 - u1) s:
    hybrid |d~_j| < alpha Q_j, |eps - u| <= alpha - 1/2; linear (one prime per digit, lifted exactly,
    fhe_core.rlwe.linear_switching) |d~_i| < q_i, ModDown's exact rounding |eps| <= 1/2; |e_j|_1 <= eta N,
    |s|_1 = h (or <= N)."""
    big_p = prod(ctx.p_primes)
    s_l1 = sk.hamming_weight or ctx.n
    if ctx.key_switching == "linear":
        return sum(ctx.q_primes[:level + 1]) * ctx.error_eta * ctx.n / big_p + 0.5 * (1 + s_l1)
    digits = ctx.tables(level).digits
    gadget = sum(ctx.alpha * prod(ctx.q_primes[d.start:d.stop]) * ctx.error_eta * ctx.n for d in digits) / big_p
    return gadget + (ctx.alpha - 0.5) * (1 + s_l1)


METHODS = ("hybrid", "linear")


def _report(label, noise, bound):
    print(f"{label}: noise {noise} = 2^{math.log2(max(noise, 1)):.1f} (bound 2^{math.log2(bound):.1f})")


# ---- ModUp / ModDown ---------------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.id)
def test_mod_up_digits_reconstruct_the_input(shape):
    """Extended digit j, read by CRT over QP_l, is [d]_{Q_j} + u Q_j with 0 <= u < |D_j|."""
    rng, _ = fresh_rng()
    ctx = context(shape)
    for level in _levels(ctx):
        t = ctx.tables(level)
        d = random_residues(rng, t.q.primes, n=ctx.n)
        d[:, 0] = t.q.moduli[:, 0] - 1  # the coefficient -1: the largest u
        digits = rlwe.decompose_mod_up(ctx, t.q.ntt(d), level)
        assert digits.shape == (ctx.digit_count(level), ctx.alpha + level + 1, ctx.n)
        ext = t.qp.intt(digits).tolist()
        d_rows = d.tolist()
        for j, digit in enumerate(t.digits):
            primes = list(ctx.q_primes[digit.start:digit.stop])
            q_j = prod(primes)
            for i in [0, *rng.integers(1, ctx.n, size=60).tolist()]:
                x = crt([d_rows[r][i] for r in range(digit.start, digit.stop)], primes)
                value = crt([row[i] for row in ext[j]], list(t.qp.primes))
                u, rest = divmod(value - x, q_j)
                assert rest == 0 and 0 <= u < len(primes), f"level {level}, digit {j}, coefficient {i}: u = {u}"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.id)
def test_mod_down_is_rounded_division_by_p(shape):
    """mod_down(x) = round(x/P) mod Q_l exactly (the centred exact conversion of [x]_P). Within
    ~2^-50 P of a tie (x = P/2 +- 1/2 mod P, coefficients 0, 1 and 3 here) both roundings are
    correct; elsewhere, and at x = -1, the result is the exact rounding."""
    rng, _ = fresh_rng()
    ctx = context(shape)
    big_p = prod(ctx.p_primes)
    for level in _levels(ctx):
        t = ctx.tables(level)
        x = random_residues(rng, t.qp.primes, shape_prefix=(2,), n=ctx.n)
        for i, value in enumerate((big_p // 2, big_p // 2 + 1, -1, big_p * 12345 + big_p // 2)):
            x[0, :, i] = words_tensor([value % r for r in t.qp.primes])  # edges of the rounding
        got = t.q.intt(rlwe.mod_down(ctx, t.qp.ntt(x), level))
        assert got.shape == (2, level + 1, ctx.n)
        big_q = t.q.modulus
        xs, gs = x.tolist(), got.tolist()
        for b in range(2):
            for i in [0, 1, 2, 3, *rng.integers(4, ctx.n, size=80).tolist()]:
                value = crt([row[i] for row in xs[b]], list(t.qp.primes))
                rounded = (value + big_p // 2) // big_p
                y = crt([row[i] for row in gs[b]], list(t.q.primes))
                allowed = {rounded % big_q}
                if b == 0 and i in (0, 1, 3):
                    allowed |= {(rounded - 1) % big_q, (rounded + 1) % big_q}
                assert y in allowed, f"level {level}, batch {b}, coefficient {i}: {y} vs round(x/P) = {rounded}"


# ---- key switching -------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.id)
@pytest.mark.parametrize("method", METHODS)
def test_key_switch_moves_a_ciphertext_to_another_key(shape, method):
    """ct under s' -> (c0 + u0, u1) under s decrypts to m + e + e_ks with e_ks within the bound."""
    rng, _ = fresh_rng()
    ctx = context(shape, key_switching=method)
    s_from, s_to = rlwe.gen_secret_key(ctx), rlwe.gen_secret_key(ctx)
    key = rlwe.gen_switching_key(ctx, s_from, s_to)
    for level in _levels(ctx):
        big_q = q_modulus(ctx, level)
        m = random_poly(rng, ctx.n, big_q // 2 - 1)
        ct = rlwe.encrypt_sk(ctx, s_from, encode(ctx, m, level), level)
        u = rlwe.key_switch(ctx, ct.data[1], key, level)
        assert u.shape == (2, level + 1, ctx.n)
        moved = ct.replace(data=torch.stack((ops.add(ct.data[0], u[0], ctx.q_at(level).moduli), u[1])))
        noise = max_diff(decode(ctx, rlwe.decrypt(ctx, s_to, moved), level), m, big_q)
        bound = ks_noise_bound(ctx, s_to, level) + ctx.error_eta
        _report(f"{shape.id} key_switch level {level}", noise, bound)
        assert noise <= bound
        wrong = max_diff(decode(ctx, rlwe.decrypt(ctx, s_from, moved), level), m, big_q)
        assert wrong > big_q >> 8  # under the old key it is garbage: the check can fail


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.id)
@pytest.mark.parametrize("method", METHODS)
def test_relinearize_tensor_product(shape, method):
    """(d0, d1, d2) = (c0 c0', c0 c1' + c1 c0', c1 c1') relinearized decrypts to m1 * m2 (negacyclic)."""
    rng, _ = fresh_rng()
    ctx = context(shape, key_switching=method)
    sk = rlwe.gen_secret_key(ctx)
    keys = rlwe.gen_eval_keys(ctx, sk)
    bound_m = 1 << 4
    for level in _levels(ctx)[:2]:
        q = ctx.q_at(level)
        # m1 sparse (every 16th coefficient) keeps the schoolbook reference cheap
        m1 = [v if i % 16 == 0 else 0 for i, v in enumerate(random_poly(rng, ctx.n, bound_m))]
        m2 = random_poly(rng, ctx.n, bound_m)
        a = rlwe.encrypt_sk(ctx, sk, encode(ctx, m1, level), level)
        b = rlwe.encrypt_sk(ctx, sk, encode(ctx, m2, level), level)
        (c0, c1), (e0, e1) = a.data, b.data
        d = torch.stack((ops.mul(c0, e0, q.moduli), ops.mul_add(c0, e1, ops.mul(c1, e0, q.moduli), q.moduli),
                         ops.mul(c1, e1, q.moduli)))
        relin = rlwe.relinearize(ctx, a.replace(data=d), keys)
        assert relin.degree == 1 and relin.level == level
        big_q = q_modulus(ctx, level)
        expected = negacyclic_product(m1, m2, big_q)
        nonzero = sum(1 for v in m1 if v)
        tensor = bound_m * ctx.error_eta * (ctx.n + nonzero) + ctx.error_eta ** 2 * ctx.n  # |m1 e2 + m2 e1 + e1 e2|
        degree2 = decode(ctx, rlwe.decrypt(ctx, sk, a.replace(data=d)), level)  # d0 + d1 s + d2 s^2
        assert max_diff(degree2, expected, big_q) <= tensor
        noise = max_diff(decode(ctx, rlwe.decrypt(ctx, sk, relin), level), expected, big_q)
        bound = tensor + ks_noise_bound(ctx, sk, level)
        _report(f"{shape.id} relinearize level {level}", noise, bound)
        assert noise <= bound


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.id)
@pytest.mark.parametrize("method", METHODS)
def test_apply_galois_is_substitution(shape, method):
    """dec(apply_galois(enc(m), k)) = m(X^k) mod X^N + 1 (direct substitution) + bounded noise."""
    rng, _ = fresh_rng()
    ctx = context(shape, key_switching=method)
    n = ctx.n
    sk = rlwe.gen_secret_key(ctx)
    elements = [rlwe.galois_element_for_rotation(r, n) for r in (1, 5, -1)]
    elements += [rlwe.galois_element_for_conjugation(n), int(rng.integers(1, n)) * 2 + 1]
    keys = rlwe.gen_eval_keys(ctx, sk, elements, relin=False)
    assert keys.galois_elements == frozenset(elements)
    for level in _levels(ctx)[:2]:
        big_q = q_modulus(ctx, level)
        m = random_poly(rng, n, big_q // 2 - 1)
        ct = rlwe.encrypt_sk(ctx, sk, encode(ctx, m, level), level)
        bound = ks_noise_bound(ctx, sk, level) + ctx.error_eta
        for k in elements:
            rotated = rlwe.apply_galois(ctx, ct, k, keys)
            noise = max_diff(decode(ctx, rlwe.decrypt(ctx, sk, rotated), level), substitute(m, k, big_q), big_q)
            _report(f"{shape.id} apply_galois k={k} level {level}", noise, bound)
            assert noise <= bound, f"k = {k}"


@pytest.mark.parametrize("shape", SHAPES[::2], ids=lambda s: s.id)
@pytest.mark.parametrize("method", METHODS)
def test_hoisted_rotations_decrypt_like_single_ones(shape, method):
    """One ModUp for many k: each result decrypts to sigma_k(m) within the bound and within
    twice the bound of the non-hoisted result (the extended digits differ by multiples of Q_j)."""
    rng, _ = fresh_rng()
    ctx = context(shape, key_switching=method)
    n = ctx.n
    sk = rlwe.gen_secret_key(ctx)
    elements = [rlwe.galois_element_for_rotation(r, n) for r in (1, 2, 3, 7, n // 2 - 1)]
    elements.append(rlwe.galois_element_for_conjugation(n))
    keys = rlwe.gen_eval_keys(ctx, sk, elements, relin=False)
    for level in _levels(ctx)[::2]:
        big_q = q_modulus(ctx, level)
        m = random_poly(rng, n, big_q // 2 - 1)
        ct = rlwe.encrypt_sk(ctx, sk, encode(ctx, m, level), level)
        hoisted = rlwe.apply_galois_hoisted(ctx, ct, elements, keys)
        assert list(hoisted) == elements
        bound = ks_noise_bound(ctx, sk, level) + ctx.error_eta
        for k in elements:
            plain = decode(ctx, rlwe.decrypt(ctx, sk, rlwe.apply_galois(ctx, ct, k, keys)), level)
            fast = decode(ctx, rlwe.decrypt(ctx, sk, hoisted[k]), level)
            noise = max_diff(fast, substitute(m, k, big_q), big_q)
            _report(f"{shape.id} hoisted k={k} level {level}", noise, bound)
            assert noise <= bound and max_diff(fast, plain, big_q) <= 2 * bound


def test_key_switching_is_deterministic_for_fixed_seeds():
    ctx = context(SHAPES[0])
    level = ctx.max_level - 1
    outputs = []
    for _ in range(2):
        sk = rlwe.gen_secret_key(ctx, seed=fixed_seed("sk"))
        keys = rlwe.gen_eval_keys(ctx, sk, [5], seed=fixed_seed("evk"))
        ct = rlwe.encrypt_sk(ctx, sk, encode(ctx, list(range(ctx.n)), level), level, seed=fixed_seed("ct"))
        outputs.append((keys.relin_key("t").data, rlwe.apply_galois(ctx, ct, 5, keys).data))
    assert all(torch.equal(x, y) for x, y in zip(*outputs))
    assert not torch.equal(outputs[0][0], rlwe.gen_eval_keys(ctx, sk, seed=fixed_seed("other")).relin_key("t").data)


# ---- entry checks ------------------------------------------------------------------------------

def test_key_switching_entry_checks():
    ctx, other = context(SHAPES[0]), context(SHAPES[1])
    sk = rlwe.gen_secret_key(ctx)
    keys = rlwe.gen_eval_keys(ctx, sk, [5])
    level = 2
    ct = rlwe.encrypt_sk(ctx, sk, encode(ctx, [0] * ctx.n, level), level)
    missing = r"apply_galois: no Galois key for element 25 \(the key set holds \[5\]\)"
    with pytest.raises(MissingKeyError, match=missing):
        rlwe.apply_galois(ctx, ct, 25, keys)
    with pytest.raises(MissingKeyError, match="apply_galois_hoisted: no Galois key for element 25"):
        rlwe.apply_galois_hoisted(ctx, ct, [5, 25], keys)
    with pytest.raises(MissingKeyError, match="relinearize: the key set holds no relinearization key"):
        rlwe.relinearize(ctx, ct.replace(data=torch.cat((ct.data, ct.data[:1]))), rlwe.EvalKeySet(ctx.params_id))
    with pytest.raises(ParameterError, match="relinearize: expected a degree-2 ciphertext"):
        rlwe.relinearize(ctx, ct, keys)
    with pytest.raises(ParameterError, match="apply_galois: .*Galois element"):
        rlwe.apply_galois(ctx, ct, 4, keys)
    with pytest.raises(LevelMismatchError, match="decompose_mod_up: d has 3 limbs, expected 2"):
        rlwe.decompose_mod_up(ctx, ct.data[1], level - 1)
    with pytest.raises(LevelMismatchError, match="mod_down: c has"):
        rlwe.mod_down(ctx, ct.data, level)
    other_keys = rlwe.gen_eval_keys(other, rlwe.gen_secret_key(other), [5])
    with pytest.raises(ParamsMismatchError, match="apply_galois: the key set belongs to params"):
        rlwe.apply_galois(ctx, ct, 5, other_keys)
    with pytest.raises(ParamsMismatchError, match="key_switch: the switching key belongs"):
        rlwe.key_switch(ctx, ct.data[1], other_keys.galois_key(5, "t"), level)
    with pytest.raises(ParamsMismatchError, match="EvalKeySet.add"):
        keys.add(other_keys.galois_key(5, "t"))
    assert keys.rotation_steps(ctx.n) == ([1], False) and 5 in keys and 25 not in keys


def test_batched_and_per_digit_mod_up_agree_bit_for_bit(monkeypatch):
    """The small-digit path (one ops.mod_up_conv + one NTT, own rows recomputed), the per-digit path
    (own rows copied, the rest converted and transformed) and the large-digit path (one Conv, own
    rows copied, one NTT that skips them) compute the same exact digit extensions."""
    import fhe_core.rlwe.context as context_module

    primes = generate_primes([50] * 6 + [61] * 2, 1 << 11)
    ctx = rlwe.RLWEContext(1 << 11, primes[:6], primes[6:])
    one_launch = rlwe.RLWEContext(1 << 11, primes[:6], primes[6:], plan=ctx.plan.replace(mod_up_in_one_launch=True))
    assert not ctx.plan.mod_up_in_one_launch  # (the CPU's resolved plan)
    rng = np.random.default_rng()
    for level in (5, 2):
        d = random_residues(rng, primes[:level + 1], (), 1 << 11)
        d_ntt = ctx.q_at(level).ntt(d)
        batched = rlwe.decompose_mod_up(ctx, d_ntt, level)
        all_digits = rlwe.decompose_mod_up(one_launch, d_ntt, level)
        with monkeypatch.context() as patch:  # alpha = 2 taken as a large digit
            patch.setattr(context_module, "BATCHED_MODUP_MAX_ALPHA", 0)
            per_digit = rlwe.decompose_mod_up(ctx, d_ntt, level)
        assert torch.equal(batched, per_digit), f"level {level}"
        assert torch.equal(batched, all_digits), f"level {level}"
