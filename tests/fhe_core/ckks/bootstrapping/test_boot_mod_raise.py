"""ModRaise (L3) against an exact secret-key reference in Python integers: for fresh random
messages at level 0, the raised ciphertext decrypts over Q_L to exactly c_0 + c_1 s computed
in Python integers from the centred level-0 components, that is m + q_0 I with m the level-0
decryption and I integral with |I| <= (h + 1) / 2 (h = 32). Exact: no tolerance."""
import numpy as np
import pytest

from fhe_core.ckks.bootstrapping import mod_raise
from fhe_core.errors import LevelMismatchError, ParameterError

from boot_common import RAISE, SecretKeySetup, centred


@pytest.fixture(scope="module")
def s() -> SecretKeySetup:
    return SecretKeySetup(RAISE)


def negacyclic_with_sparse(c0: list[int], c1: list[int], secret: list[int]) -> list[int]:
    """c0 + c1 * s mod X^N + 1 over the integers (s ternary and sparse)."""
    n = len(c0)
    out = np.array(c0, dtype=object)
    c1 = np.array(c1, dtype=object)
    for i, si in enumerate(secret):
        if si:
            shifted = np.concatenate([-c1[n - i:], c1[:n - i]])  # X^i * c1
            out = out + si * shifted
    return [int(v) for v in out]


@pytest.mark.parametrize("slots", [512, 32])
def test_mod_raise_decrypts_to_message_plus_q0_multiple(s, slots):
    params, q0 = s.params, s.params.q_primes[0]
    z = s.rng.uniform(-1, 1, slots) + 1j * s.rng.uniform(-1, 1, slots)
    ct = s.encrypt(z, level=0, slots=slots)
    raised = mod_raise(params, ct)
    assert (raised.level, raised.scale, raised.slots, raised.degree) == (params.max_level, ct.scale, slots, 1)
    assert tuple(raised.data.shape) == (2, params.max_level + 1, params.n)
    # reference: centred level-0 components and the secret, multiplied in Python integers
    c0, c1 = (s.integers(ct.data[i], 0) for i in range(2))
    expected = negacyclic_with_sparse(c0, c1, s.secret_integers())
    assert s.decrypt_integers(raised) == expected                 # exact, over Q_L
    m = s.decrypt_integers(ct)                                    # centred mod q_0
    assert all(centred(e, q0) == mi for e, mi in zip(expected, m))
    integer_part = [(e - mi) // q0 for e, mi in zip(expected, m)]
    assert all(e - mi == q0 * i for e, mi, i in zip(expected, m, integer_part))
    h = params.hamming_weight
    print(f"{slots} slots: max |I| = {max(abs(i) for i in integer_part)} (bound (h + 1) / 2 = {(h + 1) / 2})")
    assert max(abs(i) for i in integer_part) <= (h + 1) / 2
    assert max(abs(i) for i in integer_part) >= 1                 # the q_0 multiple is really there
    # the low part still decodes to the message (q_0 I only adds a multiple of q_0)
    assert np.max(np.abs(s.decrypt(ct) - z)) < 2.0 ** -30


def test_mod_raise_to_an_intermediate_level(s):
    ct = s.encrypt(s.rng.uniform(-1, 1, 8), level=0)
    raised = mod_raise(s.params, ct, level=2)
    full = mod_raise(s.params, ct)
    assert raised.level == 2
    assert s.decrypt_integers(raised) == s.decrypt_integers(full)


def test_mod_raise_checks_its_input(s):
    ct = s.encrypt([0.5], level=1)
    with pytest.raises(LevelMismatchError, match="^mod_raise: "):
        mod_raise(s.params, ct)
    with pytest.raises(ParameterError, match="^mod_raise: "):
        mod_raise(s.params, ct.data)
    with pytest.raises(LevelMismatchError, match="^mod_raise: "):
        mod_raise(s.params, s.encrypt([0.5], level=0), level=9)
