"""Every evaluator operation against numpy arithmetic mod t on fresh random inputs; rotations
against np.roll on each matrix row; noise budgets as theory says; depth; typed errors."""
import math

import numpy as np
import pytest

from fhe_core import bfv, rlwe
from fhe_core.bfv.encryption import PLAIN_FORMS, lifted_message, plain_operand, scaled_message
from fhe_core.errors import (
    DomainMismatchError, LevelMismatchError, MissingKeyError, ParameterError, ParamsMismatchError,
)
from fhe_reference import fresh_rng
from bfv_helpers import METHODS, ROTATIONS, SMALL, TEST_PRESETS, WIDE, mul_mod_t, random_values, session


def _pair(name, secret=False, method="hybrid"):
    rng, _ = fresh_rng()
    s = session(name, key_switching=method)
    a, b = random_values(rng, s), random_values(rng, s)
    return s, rng, a, b, s.encrypt(a, secret=secret), s.encrypt(b)


@pytest.mark.parametrize("name", TEST_PRESETS)
def test_additive_operations(name):
    s, rng, a, b, ca, cb = _pair(name)
    ev, t = s.evaluator, s.t
    np.testing.assert_array_equal(s.decrypt(ev.add(ca, cb)), (a + b) % t)
    np.testing.assert_array_equal(s.decrypt(ev.sub(ca, cb)), (a - b) % t)
    np.testing.assert_array_equal(s.decrypt(ev.negate(ca)), (-a) % t)
    p = random_values(rng, s, signed=True)
    pt = s.encoder.encode(p)
    np.testing.assert_array_equal(s.decrypt(ev.add_plain(ca, pt)), (a + p) % t)
    np.testing.assert_array_equal(s.decrypt(ev.sub_plain(ca, pt)), (a - p) % t)


@pytest.mark.parametrize("name", TEST_PRESETS)
def test_plaintext_and_scalar_products(name):
    s, rng, a, b, ca, cb = _pair(name)
    ev, t = s.evaluator, s.t
    p = random_values(rng, s)
    np.testing.assert_array_equal(s.decrypt(ev.multiply_plain(ca, s.encoder.encode(p))), mul_mod_t(a, p, t))
    for scalar in (0, 1, 2, -1, -12345, t - 1, t + 5, 3 * t * t + 2):
        got = s.decrypt(ev.multiply_scalar(ca, scalar))
        np.testing.assert_array_equal(got, mul_mod_t(a, np.full_like(a, scalar % t), t), err_msg=str(scalar))


def test_plaintext_operands_are_kept_per_level_and_equal_the_fresh_forms():
    """add_plain / multiply_plain keep a plaintext's scaled and lifted forms per level (plain_operand): the kept
    tensors are the forms computed afresh, reused on the next call, and each level and kind has its own; the results
    stay right at both levels."""
    s, rng, a, _, ca, _ = _pair(SMALL)
    ev, t, ctx = s.evaluator, s.t, s.ctx
    p = random_values(rng, s)
    pt = s.encoder.encode(p)
    low = ev.mod_switch_to_next(ca)
    for c in (ca, low, ca):  # the third call reuses the first's forms
        np.testing.assert_array_equal(s.decrypt(ev.multiply_plain(c, pt)), mul_mod_t(a, p, t))
        np.testing.assert_array_equal(s.decrypt(ev.add_plain(c, pt)), (a + p) % t)
    forms = pt.__dict__[PLAIN_FORMS]
    assert len(forms) == 4  # (level, scaled) for two levels
    for level in (ca.level, low.level):
        lifted = plain_operand(ctx, pt, level, scaled=False)
        assert lifted is forms[ctx.params_id, level, False]
        assert lifted.equal(lifted_message(ctx, pt, level))
        assert plain_operand(ctx, pt, level, scaled=True).equal(scaled_message(ctx, pt, level))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", TEST_PRESETS)
def test_ciphertext_product_relinearization_and_mixed_degrees(name, method):
    s, rng, a, b, ca, cb = _pair(name, secret=True, method=method)
    ev, t = s.evaluator, s.t
    ab = mul_mod_t(a, b, t)
    product = ev.multiply(ca, cb)
    assert product.degree == 2 and product.level == ca.level
    np.testing.assert_array_equal(s.decrypt(product), ab)            # degree 2 decrypts under (1, s, s^2)
    relin = ev.relinearize(product)
    assert relin.degree == 1
    np.testing.assert_array_equal(s.decrypt(relin), ab)
    np.testing.assert_array_equal(s.decrypt(ev.multiply_relin(ca, ca)), mul_mod_t(a, a, t))
    np.testing.assert_array_equal(s.decrypt(ev.add(product, ca)), (ab + a) % t)   # degree 2 + degree 1
    np.testing.assert_array_equal(s.decrypt(ev.sub(ca, product)), (a - ab) % t)
    np.testing.assert_array_equal(s.decrypt(ev.multiply_plain(product, s.encoder.encode(b))), mul_mod_t(ab, b, t))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", TEST_PRESETS)
def test_products_of_extreme_values(name, method):
    """All-(t-1), all-(t-1)/2 and all-zero slots (the largest plaintext coefficients and the zero
    polynomial) multiply correctly, with public- and secret-key encryptions mixed."""
    s = session(name, key_switching=method)
    ev, t, n = s.evaluator, s.t, s.n
    cases = [np.full(n, t - 1), np.full(n, (t - 1) // 2), np.zeros(n, dtype=np.int64),
             np.arange(n, dtype=np.int64) % 2 * (t - 1)]
    for x in cases:
        for y in cases:
            got = s.decrypt(ev.multiply_relin(s.encrypt(x), s.encrypt(y, secret=True)))
            np.testing.assert_array_equal(got, mul_mod_t(x, y, t))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", TEST_PRESETS)
def test_row_rotations_and_column_swap_match_numpy(name, method):
    s, rng, a, b, ca, cb = _pair(name, method=method)
    rows = a.reshape(2, s.n // 2)
    for steps in ROTATIONS + (0, s.n // 2 + 1):  # N/2 + 1 is the rotation by 1 (5 has order N/2)
        got = s.encoder.decode_matrix(s.decryptor.decrypt(s.evaluator.rotate_rows(ca, steps)))
        for r in range(2):
            np.testing.assert_array_equal(got[r], np.roll(rows[r], -steps), err_msg=f"steps={steps}, row {r}")
    swapped = s.encoder.decode_matrix(s.decryptor.decrypt(s.evaluator.swap_columns(ca)))
    np.testing.assert_array_equal(swapped, rows[::-1])
    product = s.evaluator.rotate_rows(s.evaluator.multiply_relin(ca, cb), 3)  # after a product too
    np.testing.assert_array_equal(s.encoder.decode_matrix(s.decryptor.decrypt(product)),
                                  np.roll(mul_mod_t(a, b, s.t).reshape(2, -1), -3, axis=1))


@pytest.mark.parametrize("method", METHODS)
def test_hoisted_row_rotations_match_numpy(method):
    s, rng, a, b, ca, cb = _pair(WIDE, method=method)
    rows = a.reshape(2, s.n // 2)
    steps = list(ROTATIONS) + [0]
    rotated = s.evaluator.rotate_rows_hoisted(ca, steps)
    assert list(rotated) == steps
    for r, ct in rotated.items():
        np.testing.assert_array_equal(s.encoder.decode_matrix(s.decryptor.decrypt(ct)), np.roll(rows, -r, axis=1))
    with pytest.raises(MissingKeyError, match="rotate_rows_hoisted"):
        s.evaluator.rotate_rows_hoisted(ca, [1, 2])
    for bad in (3, None, "12"):  # one int is not a list of steps: a typed error, not Python's TypeError
        with pytest.raises(ParameterError, match="^rotate_rows_hoisted: steps must be an iterable"):
            s.evaluator.rotate_rows_hoisted(ca, bad)


@pytest.mark.parametrize("name", TEST_PRESETS)
def test_modulus_switching_keeps_the_message(name):
    s, rng, a, b, ca, cb = _pair(name)
    ev, t = s.evaluator, s.t
    product = ev.multiply(ca, cb)  # degree 2 switches too
    for level in range(ca.level - 1, -1, -1):
        ca, product = ev.mod_switch_to_next(ca), ev.mod_switch_to_next(product)
        assert ca.level == level and ca.data.shape == (2, level + 1, s.n)
        np.testing.assert_array_equal(s.decrypt(ca), a)
        np.testing.assert_array_equal(s.decrypt(product), mul_mod_t(a, b, t))
    top = s.encrypt(b)
    np.testing.assert_array_equal(s.decrypt(ev.mod_switch_to(top, 0)), b)
    # arithmetic still works at the lower level
    low = ev.mod_switch_to(top, 1)
    np.testing.assert_array_equal(s.decrypt(ev.multiply_relin(ev.mod_switch_to(s.encrypt(a), 1), low)),
                                  mul_mod_t(a, b, t))



def test_modulus_switching_gives_the_same_words_with_either_plan():
    """The fused pass (the transform and (c - r) q_l^-1 in ops.mod_down_ntt, the limbs read in place) and the
    reference composition (a transform, then ops.sub_mul_const) of mod_switch_to_next: the same words, for a
    degree-2 product and a strided (hand-made) view."""
    s, _, _, _, ca, cb = _pair(SMALL)
    reference = bfv.Evaluator(bfv.BFVContext(s.ctx.params, plan=s.ctx.plan.replace(fused_circuit=False)))
    assert s.ctx.plan.fused_circuit
    product = s.evaluator.multiply(ca, cb)
    strided = rlwe.Ciphertext(data=product.data.transpose(0, 1).contiguous().transpose(0, 1), level=product.level,
                              params_id=product.params_id)
    for ct in (ca, product, strided):
        assert s.evaluator.mod_switch_to(ct, 0).data.equal(reference.mod_switch_to(ct, 0).data)

def test_noise_budget_decreases_as_theory_says():
    """An addition loses at most 1 bit (|v_a + v_b| <= 2 max; it may lose none: the noises can
    partly cancel), a product between log2(t) and log2(t N) + 4 bits (|v| ~ t N |v_a| up to
    small factors)."""
    s, rng, a, b, ca, cb = _pair(WIDE)
    ev = s.evaluator
    fresh = min(s.budget(ca), s.budget(cb))
    added = s.budget(ev.add(ca, cb))
    product = ev.multiply_relin(ca, cb)
    multiplied = s.budget(product)
    assert added >= fresh - 1 > multiplied
    assert math.log2(s.t) < fresh - multiplied < math.log2(s.t * s.n) + 4
    assert abs(s.budget(ev.multiply(ca, cb)) - multiplied) < 0.5   # relinearization costs ~nothing
    assert s.budget(ev.multiply_plain(ca, s.encoder.encode(b))) < fresh - math.log2(s.t) + 4
    # dropping q_l adds the rounding t/Q_{l-1} (eps0 + eps1 s), |eps_i| <= 1/2: the budget lands
    # between the worst case (|s|_1 = N) and the rounding of c0 alone
    switched = s.budget(ev.mod_switch_to_next(ca))
    log_q = math.log2(s.ctx.q_modulus(ca.level - 1))
    assert log_q - math.log2(s.t * (s.n + 1) / 2) - 1 < switched < log_q - math.log2(s.t) - 1


def _tree_product(ev, cts):
    while len(cts) > 1:
        cts = [ev.multiply_relin(cts[i], cts[i + 1]) for i in range(0, len(cts), 2)]
    return cts[0]


def _depth_check(s, rng, count):
    values = [random_values(rng, s) for _ in range(count)]
    result = _tree_product(s.evaluator, [s.encrypt(v) for v in values])
    expected = values[0].astype(object)
    for v in values[1:]:
        expected = expected * v.astype(object) % s.t
    np.testing.assert_array_equal(s.decrypt(result), expected.astype(np.int64))
    return s.budget(result)


def test_product_of_eight_ciphertexts_small_ring():
    """Depth 3 (a tree of 7 multiplications) on N = 2^11, t 20 bits."""
    rng, _ = fresh_rng()
    assert _depth_check(session(WIDE), rng, 8) >= bfv.MIN_BUDGET_BITS


def test_product_of_eight_ciphertexts_at_n_2_14():
    """The issue's depth test on the secure N = 2^14 preset (SEAL's 438-bit default); a few
    seconds on one CPU core, so not marked slow."""
    rng, _ = fresh_rng()
    s = session("BFVN14QP438L7D8T17")
    assert _depth_check(s, rng, 8) > 200  # ~356 bits fresh, ~30 per level


def test_evaluator_errors_are_typed():
    s, rng, a, b, ca, cb = _pair(SMALL)
    ev, other = s.evaluator, session(WIDE)
    with pytest.raises(LevelMismatchError):
        ev.add(ca, ev.mod_switch_to_next(cb))
    with pytest.raises(LevelMismatchError):
        ev.multiply(ca, ev.mod_switch_to_next(cb))
    with pytest.raises(LevelMismatchError, match="level 0"):
        ev.mod_switch_to_next(ev.mod_switch_to(ca, 0))
    with pytest.raises(LevelMismatchError):
        ev.mod_switch_to(ev.mod_switch_to(ca, 0), 1)
    with pytest.raises(ParamsMismatchError):
        ev.add(ca, other.encrypt([1]))
    with pytest.raises(ParamsMismatchError):
        ev.add_plain(ca, other.encoder.encode([1]))
    with pytest.raises(ParameterError, match="degree"):
        ev.rotate_rows(ev.multiply(ca, cb), 1)
    with pytest.raises(ParameterError, match="degree"):
        ev.multiply(ev.multiply(ca, cb), cb)
    with pytest.raises(ParameterError, match="degree"):
        ev.relinearize(ca)
    with pytest.raises(MissingKeyError, match="rotate_rows"):
        ev.rotate_rows(ca, 2)  # no key for 5^2
    keyless = bfv.Evaluator(s.ctx)
    with pytest.raises(MissingKeyError, match="no evaluation keys"):
        keyless.relinearize(ev.multiply(ca, cb))
    with pytest.raises(MissingKeyError):
        keyless.swap_columns(ca)
    with pytest.raises(ParameterError):
        ev.multiply_scalar(ca, 1.5)
    with pytest.raises(DomainMismatchError):
        ev.add(ca.replace(is_ntt=False), cb)
    with pytest.raises(ParameterError):
        ev.add(ca, a)
    with pytest.raises(ParamsMismatchError):
        bfv.Evaluator(s.ctx, other.evaluator.keys)
    assert not hasattr(ev, "sk") and all(not isinstance(v, rlwe.SecretKey) for v in vars(ev).values())


def test_galois_elements_for_keys():
    n = 1 << 10
    assert bfv.galois_elements(n, [1, 2, 1], column_swap=True) == [5, 25, 2 * n - 1]
    assert bfv.galois_elements(n, [-1]) == [pow(5, n // 2 - 1, 2 * n)]
