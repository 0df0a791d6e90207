"""Encryption and exact decryption, the invariant noise budget against a Python-integer
reference, and DecryptionError once the noise is exhausted."""
import math

import numpy as np
import pytest
import torch

from fhe_core import bfv, rlwe
from fhe_core.errors import DecryptionError, ParameterError, ParamsMismatchError
from fhe_reference import crt, fresh_rng
from bfv_helpers import SMALL, TEST_PRESETS, WIDE, random_values, session


@pytest.mark.parametrize("name", TEST_PRESETS)
@pytest.mark.parametrize("secret", [False, True], ids=["pk", "sk"])
def test_encrypt_decrypt_at_every_level(name, secret):
    rng, _ = fresh_rng()
    s = session(name)
    for level in range(s.ctx.max_level, -1, -1):
        values = random_values(rng, s)
        ct = s.encrypt(values, level=level, secret=secret)
        assert ct.data.shape == (2, level + 1, s.n) and ct.level == level and ct.is_ntt
        np.testing.assert_array_equal(s.decrypt(ct), values)


def _reference_budget(s, ct) -> float:
    """-log2(2 |v|) from Python integers: the phase by CRT (fhe_reference.crt), then [t x]_Q."""
    basis = s.ctx.rlwe.q_at(ct.level)
    phase = basis.intt(rlwe.decrypt(s.ctx.rlwe, s.decryptor._sk, ct)).tolist()
    big_q = math.prod(basis.primes)
    norm = 0
    for i in range(s.n):
        x = crt([row[i] for row in phase], list(basis.primes))
        w = x * s.t % big_q
        norm = max(norm, min(w, big_q - w))
    return math.log2(big_q) - 1 - math.log2(norm)


def test_noise_budget_matches_the_integer_reference_and_theory():
    """Fresh: [t x]_Q = t e + (t round(Q m/t) - Q m) with |e| < 2^6 sqrt(N) (public-key noise) and
    the rounding term at most t/2, so the budget is at least log2(Q) - log2(t (2^6 sqrt(N) + 1)) - 1
    and at most log2(Q) - log2(t/2) - 1 (|e| >= 1 somewhere)."""
    rng, _ = fresh_rng()
    s = session(SMALL)
    ct = s.encrypt(random_values(rng, s))
    budget = s.budget(ct)
    assert budget == pytest.approx(_reference_budget(s, ct), abs=1e-9)
    log_q = math.log2(s.ctx.q_modulus(s.ctx.max_level))
    assert log_q - math.log2(s.t * (64 * math.sqrt(s.n) + 1)) - 1 <= budget <= log_q - math.log2(s.t / 2) - 1
    product = s.evaluator.multiply(ct, ct)  # degree 2: the reference handles it too
    assert s.budget(product) == pytest.approx(_reference_budget(s, product), abs=1e-9)


def _square_until_exhausted(s, ct):
    values = [s.budget(ct)]
    while values[-1] >= bfv.MIN_BUDGET_BITS:
        ct = s.evaluator.multiply_relin(ct, ct)
        values.append(s.budget(ct))
        assert len(values) < 20
    return ct, values


def test_exhausted_noise_raises_decryption_error():
    """Repeated squaring on the smallest set (~25 bits per multiplication out of ~124) must end in
    DecryptionError, while every earlier ciphertext decrypts exactly."""
    rng, _ = fresh_rng()
    s = session(SMALL)
    values = random_values(rng, s)
    ct = s.encrypt(values)
    expected = values.astype(object)
    while s.budget(ct) >= 40:  # a product costs ~25 bits here: 40 leaves room for a bad draw
        ct = s.evaluator.multiply_relin(ct, ct)
        expected = expected * expected % s.t
        np.testing.assert_array_equal(s.decrypt(ct), expected.astype(np.int64))
    dead, budgets = _square_until_exhausted(s, ct)
    assert budgets[-1] < bfv.MIN_BUDGET_BITS
    with pytest.raises(DecryptionError, match="noise budget is exhausted"):
        s.decryptor.decrypt(dead)
    assert s.decryptor.decrypt(dead, check=False).data.shape == (s.n,)  # explicit opt-out


def test_a_uniform_ciphertext_is_refused():
    s = session(SMALL)
    ct = s.encrypt([1, 2, 3])
    noise = rlwe.encrypt_sk(s.ctx.rlwe, s.decryptor._sk, torch.zeros_like(ct.data[0]), ct.level).data[1]
    garbage = ct.replace(data=torch.stack((noise, ct.data[1])))  # c0 uniform: phase uniform mod Q
    assert s.budget(garbage) < bfv.MIN_BUDGET_BITS
    with pytest.raises(DecryptionError):
        s.decryptor.decrypt(garbage)


def test_encryption_and_decryption_errors_are_typed():
    s, other = session(SMALL), session(WIDE)
    pt = s.encoder.encode([1])
    with pytest.raises(ParamsMismatchError):
        other.encryptor.encrypt(pt)
    with pytest.raises(ParamsMismatchError):
        bfv.Decryptor(s.ctx, other.decryptor._sk)
    with pytest.raises(ParameterError):
        bfv.Encryptor(s.ctx, "not a key")
    with pytest.raises(ParamsMismatchError):
        s.decryptor.decrypt(other.encrypt([1]))
    with pytest.raises(ParameterError):
        s.encryptor.encrypt([1, 2, 3])
