"""Primality, NTT-friendly prime generation and roots of unity, against independent checks."""
import pytest

from fhe_core.errors import ParameterError
from fhe_core.ring import generate_primes, is_prime, ntt_primes, primitive_root_2n


def _trial_division(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, int(n ** 0.5) + 1))


def test_is_prime_matches_trial_division_below_20000():
    assert [n for n in range(20000) if is_prime(n)] == [n for n in range(20000) if _trial_division(n)]


@pytest.mark.parametrize("n", [
    3215031751,                # strong pseudoprime to bases 2, 3, 5, 7
    2152302898747,             # strong pseudoprime to bases 2..11
    3825123056546413051,       # strong pseudoprime to bases 2..23
    561, 41041, 825265,        # Carmichael numbers
    (2 ** 31 - 1) * (2 ** 61 - 1),
])
def test_is_prime_rejects_pseudoprimes(n):
    assert not is_prime(n)


@pytest.mark.parametrize("p", [2 ** 61 - 1, 2 ** 31 - 1, 0xFFFFFFFF00000001, 1152921504606584833])
def test_is_prime_accepts_known_primes(p):
    assert is_prime(p)


@pytest.mark.parametrize("bits,n", [(30, 1 << 10), (45, 1 << 14), (61, 1 << 16), (50, 1 << 17)])
def test_ntt_primes_are_the_largest_of_their_size(bits, n):
    primes = ntt_primes(bits, n, 3)
    assert primes == sorted(primes, reverse=True)
    for q in primes:
        assert q.bit_length() == bits and q % (2 * n) == 1 and is_prime(q)
    # nothing skipped: no other prime = 1 mod 2N lies between consecutive picks (or above the first)
    upper = 1 << bits
    for q in primes:
        assert not any(is_prime(c) for c in range(q + 2 * n, upper, 2 * n))
        upper = q


def test_generate_primes_is_deterministic_and_distinct():
    sizes = [60, 40, 40, 40, 60]
    first = generate_primes(sizes, 1 << 12)
    assert first == generate_primes(sizes, 1 << 12)
    assert len(set(first)) == len(first)
    assert [q.bit_length() for q in first] == sizes


def test_generate_primes_refuses_impossible_requests():
    with pytest.raises(ParameterError, match="bits"):
        ntt_primes(62, 1 << 10, 1)
    with pytest.raises(ParameterError, match="power of two"):
        ntt_primes(40, 1000, 1)
    with pytest.raises(ParameterError, match="only"):
        ntt_primes(20, 1 << 17, 5)  # 2N = 2^18 leaves very few 20-bit candidates


@pytest.mark.parametrize("n", [1 << 10, 1 << 16])
def test_primitive_root_has_order_exactly_2n(n):
    for q in generate_primes([61, 40, 30], n):
        psi = primitive_root_2n(q, n)
        assert pow(psi, 2 * n, q) == 1
        assert pow(psi, n, q) == q - 1  # so the order is 2N, not a divisor of N
