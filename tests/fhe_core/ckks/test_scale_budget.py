"""The CKKS evaluator refuses a result whose scale leaves no room for its message below the
modulus of its level (ScaleOverflowError naming the operation) instead of returning a ciphertext
that decrypts to garbage; results that fit still decrypt to their plaintext twin."""
import math

import numpy as np
import pytest

from fhe_core import ckks, rlwe
from fhe_core.ckks.evaluator import MESSAGE_BITS
from fhe_core.errors import ScaleMismatchError, ScaleOverflowError
from fhe_core.params import preset


@pytest.fixture(scope="module")
def world():
    params = preset("N10QP241L3D4Insecure", allow_insecure=True)  # log2 Q_l = 60, 100, 140, 180
    ctx = ckks.rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx)
    encoder = ckks.Encoder(params)
    z = np.linspace(-1, 1, params.slots)
    ct = ckks.Encryptor(params, sk).encrypt(encoder.encode(z))
    ev = ckks.Evaluator(params, rlwe.gen_eval_keys(ctx, sk))
    decode = lambda c: encoder.decode(ckks.Decryptor(params, sk).decrypt(c)).real  # noqa: E731
    return params, ev, ct, z, decode


def test_squarings_without_rescale_are_refused_at_the_one_that_overflows(world):
    params, ev, ct, z, decode = world
    square = ev.mul_relin(ct, ct)
    fourth = ev.mul_relin(square, square)  # scale 2^160 below Q_3 ~ 2^180: fits, and decrypts
    assert np.max(np.abs(decode(fourth) - z ** 4)) < 2.0 ** -20
    with pytest.raises(ScaleOverflowError, match=r"^mul_relin: the result's scale 2\^320\.00 .* Q_3 ~ 2\^180"):
        ev.mul_relin(fourth, fourth)
    with pytest.raises(ScaleOverflowError, match="^mul: "):
        ev.mul(fourth, fourth)
    with pytest.raises(ScaleOverflowError, match="^tensor: "):
        ev.tensor(fourth, fourth)


def test_a_product_at_level_zero_is_refused(world):
    params, ev, ct, z, decode = world
    bottom = ev.drop_level(ct, 0)  # scale 2^40 below Q_0 ~ 2^60: fits
    assert np.max(np.abs(decode(bottom) - z)) < 2.0 ** -25
    with pytest.raises(ScaleOverflowError, match=r"^mul_relin: .* at level 0"):
        ev.mul_relin(bottom, bottom)
    with pytest.raises(ScaleOverflowError, match="^mul: "):
        ev.mul(bottom, 0.5, constant_scale=2.0 ** 30)
    pt = ckks.Encoder(params).encode(z, level=0)
    with pytest.raises(ScaleOverflowError, match="^mul: "):
        ev.mul(bottom, pt)
    assert np.max(np.abs(decode(ev.mul(bottom, 3)) - 3 * z)) < 2.0 ** -20  # an integer keeps the scale


def test_an_overflowing_scale_names_the_operation_even_when_infinite(world):
    params, ev, ct, z, decode = world
    with pytest.raises(ScaleOverflowError, match=r"^mul: the result's scale 2\^inf"):
        ev.mul(ct, 0.5, constant_scale=1e300)  # finite, but 2^40 * 1e300 is not


def test_level_drops_keep_room_for_the_message(world):
    params, ev, ct, z, decode = world
    square = ev.mul_relin(ct, ct)  # scale 2^80 at level 3
    assert np.max(np.abs(decode(ev.drop_level(square, 1)) - z ** 2)) < 2.0 ** -20  # Q_1 ~ 2^100: fits
    with pytest.raises(ScaleOverflowError, match="^drop_level: .* at level 0"):
        ev.drop_level(square, 0)  # Q_0 ~ 2^60 < 2^80


def test_the_budget_bound_is_log2_scale_plus_message_bits_plus_sign(world):
    params, ev, ct, z, decode = world
    log_q0 = math.log2(params.q_primes[0])
    fits = 2.0 ** (log_q0 - MESSAGE_BITS - 1.01)
    too_big = 2.0 ** (log_q0 - MESSAGE_BITS - 0.99)
    bottom = ev.drop_level(ct, 0)
    assert ev.mul(bottom, 1.0, constant_scale=fits / bottom.scale).level == 0
    with pytest.raises(ScaleOverflowError):
        ev.mul(bottom, 1.0, constant_scale=too_big / bottom.scale)


def test_differing_scales_print_enough_digits_to_see_why(world):
    params, ev, ct, z, decode = world
    square = ev.rescale(ev.mul_relin(ct, ct))  # scale 2^80 / q_3, about 5e-8 away from 2^40
    x = ev.drop_level(ct, square.level)
    with pytest.raises(ScaleMismatchError) as info:
        ev.add(square, x)
    message = str(info.value)
    assert message.startswith("add: scales differ: ")
    assert repr(square.scale) in message and repr(x.scale) in message
    assert f"2^{math.log2(square.scale):.12f}" in message and "set_scale" in message
    aligned = ev.set_scale(square, x.scale)
    assert np.max(np.abs(decode(ev.add(aligned, ev.drop_level(x, aligned.level))) - (z ** 2 + z))) < 2.0 ** -18
