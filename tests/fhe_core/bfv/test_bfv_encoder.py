"""Batch encoding: slots are evaluations at psi^(+-5^j) (checked with Python integers), the
encoding is a ring isomorphism, round trips signed and unsigned, typed errors."""
import numpy as np
import pytest
import torch

from fhe_core import bfv
from fhe_core.errors import EncodingError
from fhe_reference import bit_reverse, evaluate, fresh_rng, negacyclic_product
from bfv_helpers import SMALL, TEST_PRESETS, WIDE, random_values, session


def _root(t: int, n: int) -> int:
    """The primitive 2N-th root the ops' tables use: psi = x^((t-1)/2N) for the least x >= 2 with
    psi^N = -1 (the documented rule of ring.primitive_root_2n, recomputed here)."""
    for x in range(2, t):
        psi = pow(x, (t - 1) // (2 * n), t)
        if pow(psi, n, t) == t - 1:
            return psi
    raise AssertionError("no root")


@pytest.mark.parametrize("name", TEST_PRESETS)
def test_slots_are_evaluations_at_plus_minus_powers_of_five(name):
    """Decoding a random plaintext gives row 0, column j = m(psi^(5^j)) and row 1 = m(psi^(-5^j))."""
    rng, _ = fresh_rng()
    s = session(name)
    t, n = s.t, s.n
    coefficients = [int(c) for c in rng.integers(0, t, size=n)]
    pt = bfv.Plaintext(torch.tensor(coefficients, dtype=torch.int64), s.ctx.params_id)
    got = s.encoder.decode_matrix(pt)
    psi = _root(t, n)
    columns = range(n // 2) if n <= 1024 else rng.choice(n // 2, size=128, replace=False)
    for j in columns:
        e = pow(5, int(j), 2 * n)
        assert got[0, j] == evaluate(coefficients, pow(psi, e, t), t)
        assert got[1, j] == evaluate(coefficients, pow(psi, 2 * n - e, t), t)


def test_the_slot_permutation_is_a_permutation_of_bit_reversed_exponents():
    """Matrix entry (r, j) sits in the NTT slot k whose evaluation point psi^(2 brv(k) + 1) is
    psi^(5^j) for row 0 and psi^(-5^j) for row 1 (mod 2N), and no slot is used twice."""
    for n in (1 << 10, 1 << 13):
        perm = bfv.slot_permutation(n)
        assert sorted(perm.tolist()) == list(range(n))
        log_n, half = n.bit_length() - 1, n // 2
        for j in range(half):
            e = pow(5, j, 2 * n)
            assert perm[j] == bit_reverse((e - 1) // 2, log_n), f"row 0, column {j}"
            assert perm[half + j] == bit_reverse((2 * n - e - 1) // 2, log_n), f"row 1, column {j}"


def test_encoding_is_a_ring_isomorphism():
    """encode(a) * encode(b) (negacyclic product mod t, schoolbook) encodes a * b slot-wise."""
    rng, _ = fresh_rng()
    s = session(SMALL)
    a, b = random_values(rng, s), random_values(rng, s)
    pa, pb = s.encoder.encode(a), s.encoder.encode(b)
    product = negacyclic_product(pa.data.tolist(), pb.data.tolist(), s.t)
    got = s.encoder.decode(bfv.Plaintext(torch.tensor(product, dtype=torch.int64), s.ctx.params_id))
    np.testing.assert_array_equal(got, a * b % s.t)
    summed = (pa.data + pb.data) % s.t
    np.testing.assert_array_equal(s.encoder.decode(bfv.Plaintext(summed, s.ctx.params_id)), (a + b) % s.t)


@pytest.mark.parametrize("name", TEST_PRESETS)
def test_round_trips_unsigned_signed_matrix_and_padded(name):
    rng, _ = fresh_rng()
    s = session(name)
    enc, t, n = s.encoder, s.t, s.n
    values = random_values(rng, s)
    pt = enc.encode(values)
    assert pt.data.shape == (n,) and int(pt.data.min()) >= 0 and int(pt.data.max()) < t
    np.testing.assert_array_equal(enc.decode(pt), values)
    signed = random_values(rng, s, signed=True)
    np.testing.assert_array_equal(enc.decode(enc.encode(signed), signed=True), signed)
    np.testing.assert_array_equal(enc.decode(enc.encode(signed)), signed % t)
    matrix = values.reshape(2, n // 2)
    np.testing.assert_array_equal(enc.decode_matrix(enc.encode(matrix)), matrix)
    short = values[:5]
    np.testing.assert_array_equal(enc.decode(enc.encode(short)), np.concatenate([short, np.zeros(n - 5, int)]))
    extremes = [-(t - 1) // 2, t - 1, 0, 1, (t - 1) // 2]
    np.testing.assert_array_equal(enc.decode(enc.encode(extremes))[:5], np.mod(extremes, t))
    constant = enc.encode([7] * n)  # the constant polynomial 7
    assert constant.data[0] == 7 and not constant.data[1:].any()


def test_encoding_errors_are_typed():
    s = session(SMALL)
    enc, t, n = s.encoder, s.t, s.n
    for bad in ([t], [-(t - 1) // 2 - 1], [0] * (n + 1), np.zeros((2, n)), [0.5], ["a"], [1 << 70]):
        with pytest.raises(EncodingError):
            enc.encode(bad)
    other = session(WIDE)
    with pytest.raises(EncodingError, match="params_id"):
        enc.decode(other.encoder.encode([1, 2]))
    with pytest.raises(EncodingError, match="Plaintext"):
        bfv.Plaintext(torch.zeros((2, n), dtype=torch.int64), s.ctx.params_id)
