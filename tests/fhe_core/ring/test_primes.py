"""Primality, NTT-friendly prime generation and roots of unity, against independent checks."""
import pytest

from fhe_core.errors import ParameterError
from fhe_core.ring import generate_primes, is_prime, ntt_primes, primitive_root_2n, scaling_primes


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


def _primes_on_side(bits: int, n: int, count: int, direction: int) -> list[int]:
    """The first ``count`` primes = 1 mod 2N walking from 2^bits up (+1) or down (-1), by brute force."""
    found, c = [], (1 << bits) + 1 if direction > 0 else (1 << bits) + 1 - 2 * n
    while len(found) < count:
        if is_prime(c):
            found.append(c)
        c += direction * 2 * n
    return found


@pytest.mark.parametrize("bits,n", [(40, 1 << 16), (55, 1 << 12), (60, 1 << 10), (30, 1 << 14)])
def test_scaling_primes_alternate_around_the_power_of_two(bits, n):
    primes = scaling_primes([bits] * 7, n)
    above, below = _primes_on_side(bits, n, 4, +1), _primes_on_side(bits, n, 3, -1)
    assert primes == [above[0], below[0], above[1], below[1], above[2], below[2], above[3]]
    for q in primes:
        assert q % (2 * n) == 1 and abs(q - (1 << bits)) < (1 << bits) >> 10  # |log2 q - bits| < 0.0015
    assert scaling_primes([bits] * 7, n) == primes  # deterministic


def test_scaling_primes_interleave_sizes_and_skip_excluded():
    n = 1 << 12
    above40, below40 = _primes_on_side(40, n, 3, +1), _primes_on_side(40, n, 1, -1)
    above50 = _primes_on_side(50, n, 1, +1)
    primes = scaling_primes([40, 50, 40, 40], n, exclude=[above40[0]])
    assert primes == [above40[1], above50[0], below40[0], above40[2]]


def test_scaling_primes_refuse_bad_sizes():
    with pytest.raises(ParameterError, match="bits"):
        scaling_primes([61], 1 << 10)  # a prime above 2^61 would have 62 bits
    with pytest.raises(ParameterError, match="bits"):
        scaling_primes([19], 1 << 10)
    with pytest.raises(ParameterError, match="2N"):
        scaling_primes([20], 1 << 20)  # 2N = 2^21 does not divide 2^20
