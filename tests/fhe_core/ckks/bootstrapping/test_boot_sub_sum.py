"""SubSum (L3) against its plaintext definition with a secret-key reference, N = 2^10, h = 32.

* Coefficients: for a mod-raised sparse ciphertext (decrypting to m'(X^g) + q_0 I(X), I outside
  the subring), the output decrypts to g * p_k at multiples k of g and 0 elsewhere, p the input's
  exact decryption (Python integers), up to the key-switching noise: |error| <= 2^16 coefficient
  units [measured max 2^7.5 over 9 runs] against coefficients of size ~2^64.
* Slots: a fresh sparse ciphertext of n slots decodes after SubSum to g * z, within 2^-25
  absolute [measured at worst 2^-32.8 over 9 runs] at scale 2^45.
"""
import numpy as np
import pytest

from fhe_core.ckks.bootstrapping import mod_raise, sub_sum, sub_sum_galois_elements, sub_sum_steps
from fhe_core.errors import MissingKeyError, ParameterError

from boot_common import RAISE, SecretKeySetup

N = 1 << RAISE.log_n
SLOTS = (32, 128)


@pytest.fixture(scope="module")
def s() -> SecretKeySetup:
    elements = {k for n in SLOTS for k in sub_sum_galois_elements(N, n)}
    return SecretKeySetup(RAISE, sorted(elements))


def test_sub_sum_steps():
    assert sub_sum_steps(1024, 32) == [32, 64, 128, 256]       # log2(N / (2n)) = 4 steps
    assert sub_sum_steps(1024, 512) == []
    assert sub_sum_steps(1024, 256) == [256]
    with pytest.raises(ParameterError):
        sub_sum_steps(1024, 48)


@pytest.mark.parametrize("slots", SLOTS)
def test_sub_sum_is_the_trace_on_coefficients(s, slots):
    params = s.params
    g = params.n // (2 * slots)
    z = s.rng.uniform(-1, 1, slots) + 1j * s.rng.uniform(-1, 1, slots)
    raised = mod_raise(params, s.encrypt(z, level=0, slots=slots))
    p = s.decrypt_integers(raised)
    assert any(p[k] for k in range(params.n) if k % g)            # the input is not in the subring
    out = sub_sum(s.evaluator, raised)
    assert (out.level, out.scale, out.slots) == (raised.level, raised.scale, slots)
    o = s.decrypt_integers(out)
    expected = [g * p[k] if k % g == 0 else 0 for k in range(params.n)]
    error = max(abs(a - b) for a, b in zip(o, expected))
    print(f"slots {slots}: max coefficient error 2^{np.log2(max(error, 1)):.1f}")
    assert error <= 2 ** 16


@pytest.mark.parametrize("slots", SLOTS)
def test_sub_sum_multiplies_sparse_slots_by_g(s, slots):
    g = s.params.n // (2 * slots)
    z = s.rng.uniform(-1, 1, slots) + 1j * s.rng.uniform(-1, 1, slots)
    out = sub_sum(s.evaluator, s.encrypt(z, level=2, slots=slots))
    error = np.max(np.abs(s.decrypt(out) - g * z))
    print(f"slots {slots}: max slot error 2^{np.log2(error):.1f}")
    assert error <= 2.0 ** -25


def test_sub_sum_full_packing_is_a_copy_and_missing_keys_are_named(s):
    ct = s.encrypt([0.25], level=1)
    out = sub_sum(s.evaluator, ct)
    assert out.data.equal(ct.data) and out.data is not ct.data
    with pytest.raises(MissingKeyError, match="^sub_sum: "):
        sub_sum(s.evaluator, s.encrypt([0.25], level=1, slots=16))
