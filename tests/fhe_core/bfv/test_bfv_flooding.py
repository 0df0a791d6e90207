"""Noise flooding (bfv.flood): decryption stays exact, c1 is re-randomized, and the result's noise
sits at the flooding level whatever noise the input had; the flooding polynomial is exactly uniform
on its stated range (checked through an exact CRT lift with Python integers)."""
import math

import numpy as np
import pytest
import torch

from fhe_core import bfv, rlwe
from fhe_core.bfv.encryption import crt_lift
from fhe_core.bfv.privacy import _radices, flood_bits, flood_polynomial
from fhe_core.errors import FHEError
from fhe_core.params import preset

from bfv_helpers import WIDE, fixed_seed


@pytest.fixture(scope="module")
def parts():
    ctx = bfv.BFVContext(preset(WIDE, allow_insecure=True))
    sk = rlwe.gen_secret_key(ctx.rlwe, seed=fixed_seed("flood/sk"))
    pk = rlwe.gen_public_key(ctx.rlwe, sk, seed=fixed_seed("flood/pk"))
    keys = rlwe.gen_eval_keys(ctx.rlwe, sk, relin=True, seed=fixed_seed("flood/evk"))
    encoder = bfv.BatchEncoder(ctx)
    return ctx, pk, encoder, bfv.Encryptor(ctx, pk), bfv.Decryptor(ctx, sk), bfv.Evaluator(ctx, keys)


def test_flooding_hides_how_much_noise_the_input_had(parts):
    ctx, pk, encoder, encryptor, decryptor, ev = parts
    rng = np.random.default_rng(0)
    values = rng.integers(0, ctx.t, size=ctx.n, dtype=np.int64)
    fresh = encryptor.encrypt(encoder.encode(values))
    ones = encryptor.encrypt(encoder.encode(np.ones(ctx.n, dtype=np.int64)))
    deep = fresh
    for _ in range(3):
        deep = ev.multiply_relin(deep, ones)  # the same message, about 90 bits less budget
    before = [decryptor.invariant_noise_budget(ct) for ct in (fresh, deep)]
    assert before[0] - before[1] > 60 and min(before) > bfv.flood_requirement(ctx.n)
    after = []
    for ct in (fresh, deep):
        flooded = bfv.flood(ctx, ct, pk)
        assert not flooded.data[1].equal(ct.data[1])  # c1 re-randomized
        np.testing.assert_array_equal(encoder.decode(decryptor.decrypt(flooded)), values)
        after.append(decryptor.invariant_noise_budget(flooded))
        low = ev.mod_switch_to(flooded, 0)  # what the server returns: the smallest modulus
        np.testing.assert_array_equal(encoder.decode(decryptor.decrypt(low)), values)
        assert abs(decryptor.invariant_noise_budget(low) - after[-1]) < 0.5
    # the flooding level: |v| <= 2^-(noise_bits + 1), and the maximum of N uniform draws is near it
    for budget in after:
        assert bfv.FLOOD_NOISE_BITS <= budget < bfv.FLOOD_NOISE_BITS + 1.5
    assert abs(after[0] - after[1]) < 0.5


def test_flooding_polynomial_is_uniform_on_its_range(parts):
    ctx, *_ = parts
    level = 2
    bits = flood_bits(ctx, level)
    assert bits == math.floor(math.log2(ctx.q_modulus(level) / ctx.t)) - bfv.FLOOD_NOISE_BITS
    radices = _radices(ctx.n, bits, tuple(sorted(set(ctx.params.q_primes) | set(ctx.params.p_primes) | {ctx.t})))
    big_p = math.prod(radices)
    assert bits - 0.01 < math.log2(big_p) <= bits and all(30 <= r.bit_length() <= 60 for r in radices)
    basis = ctx.rlwe.q_at(level)
    draws = []
    for label in ("a", "b"):
        e = flood_polynomial(ctx, level, fixed_seed(f"flood/{label}"))
        assert e.equal(flood_polynomial(ctx, level, fixed_seed(f"flood/{label}")))  # one stream per seed
        x, big_q = crt_lift(basis, basis.intt(e))
        centred = np.array([int(v) - big_q if v > big_q // 2 else int(v) for v in x], dtype=object)
        assert max(abs(int(v)) for v in centred) <= (big_p - 1) // 2
        draws.append(np.array([float(v) / big_p for v in centred]))  # uniform on (-1/2, 1/2)
    assert not np.array_equal(draws[0], draws[1])
    both = np.concatenate(draws)
    assert abs(both.mean()) < 4 / math.sqrt(12 * len(both))        # mean 0, sd 1/sqrt(12)
    assert abs(both.var() - 1 / 12) < 0.01
    assert both.max() > 0.495 and both.min() < -0.495                # reaches both ends
    counts = np.histogram(both, bins=8, range=(-0.5, 0.5))[0]
    assert counts.min() > 0.8 * len(both) / 8                       # flat


def test_flood_requirement_and_refusals(parts):
    ctx, pk, encoder, encryptor, _, ev = parts
    assert bfv.flood_requirement(2**14) == 40 + 14 + bfv.FLOOD_NOISE_BITS + 1
    ct = encryptor.encrypt(encoder.encode([1, 2, 3]))
    with pytest.raises(FHEError):
        bfv.flood(ctx, ev.multiply(ct, ct), pk)  # degree 2: relinearize first
    with pytest.raises(FHEError):
        bfv.flood(ctx, ct, rlwe.gen_secret_key(ctx.rlwe))
    with pytest.raises(FHEError, match="bits for the flooding noise"):
        bfv.flood(ctx, ct, pk, noise_bits=230)
    assert ct.data.device == torch.device("cpu")
