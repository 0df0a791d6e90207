"""NTT-friendly primes and roots of unity, generated deterministically.

A prime q supports the negacyclic NTT of length N when q = 1 (mod 2N): then Z_q^* has a
primitive 2N-th root of unity psi. The same (bit sizes, N) always give the same primes, so
parameter sets are reproducible from their description.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from fhe_core.errors import ParameterError

MAX_PRIME_BITS = 61  # the kernels' headroom: lazy butterflies up to 4q < 2^63
MIN_PRIME_BITS = 20

# Deterministic Miller-Rabin: these bases decide primality for every n < 3.3e24 > 2^64.
_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def is_prime(n: int) -> bool:
    """Exact primality for n < 3.3e24 (deterministic Miller-Rabin)."""
    if n < 2:
        return False
    for p in _MR_BASES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _MR_BASES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _check_ring_degree(n: int) -> None:
    if n < 2 or n & (n - 1):
        raise ParameterError(f"the ring degree N must be a power of two, got {n}")


def ntt_primes(bits: int, n: int, count: int, *, exclude: Iterable[int] = ()) -> list[int]:
    """The ``count`` largest primes q < 2^bits with q = 1 (mod 2N), not in ``exclude``, descending.

    Raises ParameterError if fewer than ``count`` such primes have exactly ``bits`` bits.
    """
    _check_ring_degree(n)
    if not MIN_PRIME_BITS <= bits <= MAX_PRIME_BITS:
        raise ParameterError(f"prime sizes must be in [{MIN_PRIME_BITS}, {MAX_PRIME_BITS}] bits, got {bits}")
    excluded = set(exclude)
    step = 2 * n
    q = ((1 << bits) - 1) // step * step + 1  # largest candidate = 1 mod 2N below 2^bits
    found: list[int] = []
    while len(found) < count:
        if q < 1 << (bits - 1):
            raise ParameterError(f"only {len(found)} primes of {bits} bits are 1 mod 2N for N={n}; "
                                 f"asked for {count}")
        if q not in excluded and is_prime(q):
            found.append(q)
        q -= step
    return found


def generate_primes(bit_sizes: Sequence[int], n: int, *, exclude: Iterable[int] = ()) -> list[int]:
    """One distinct NTT-friendly prime per entry of ``bit_sizes``, in that order.

    Each is the largest prime of that size (= 1 mod 2N) not already chosen or excluded.
    """
    chosen: list[int] = []
    taken = set(exclude)
    for bits in bit_sizes:
        (q,) = ntt_primes(bits, n, 1, exclude=taken)
        chosen.append(q)
        taken.add(q)
    return chosen


def primitive_root_2n(q: int, n: int) -> int:
    """A primitive 2N-th root of unity mod q: psi = x^((q-1)/2N) for the smallest x = 2, 3, ...
    with psi^N = -1 (which forces the order to be exactly 2N)."""
    _check_ring_degree(n)
    if (q - 1) % (2 * n) or not is_prime(q):
        raise ParameterError(f"{q} is not a prime = 1 mod 2N for N={n}")
    exponent = (q - 1) // (2 * n)
    for x in range(2, q):
        psi = pow(x, exponent, q)
        if pow(psi, n, q) == q - 1:
            return psi
    raise ParameterError(f"no primitive 2N-th root mod {q}")  # unreachable for a valid q


def _primes_from(start: int, step: int, stop_bits: tuple[int, int]) -> Iterator[int]:
    """Primes start, start + step, ... (step may be negative) while their bit length is in
    ``stop_bits`` = (min, max)."""
    q = start
    while stop_bits[0] <= q.bit_length() <= stop_bits[1]:
        if is_prime(q):
            yield q
        q += step


class _AlternatingPrimes:
    """Primes q = 1 (mod 2N) nearest 2^bits, taken alternately from above and from below."""

    def __init__(self, bits: int, n: int):
        step = 2 * n
        above = (1 << bits) + 1  # the smallest candidate > 2^bits, as 2N divides 2^bits
        self._sides = [_primes_from(above, step, (bits + 1, MAX_PRIME_BITS)),
                       _primes_from(above - step, -step, (bits, bits))]
        self._turn = 0

    def take(self, taken: set[int]) -> int | None:
        """The next prime not in ``taken`` from the side whose turn it is (or the other side,
        once one is exhausted); None when both are."""
        for side in (self._turn, 1 - self._turn):
            q = next((c for c in self._sides[side] if c not in taken), None)
            if q is not None:
                self._turn = 1 - side
                return q
        return None


def scaling_primes(bit_sizes: Sequence[int], n: int, *, exclude: Iterable[int] = ()) -> list[int]:
    """One distinct prime q = 1 (mod 2N) as close to 2^bits as possible per entry of ``bit_sizes``.

    For CKKS rescaling primes: entries of the same size take the primes nearest 2^bits
    alternately above and below it (first above, then below, ...), so that consecutive rescalings
    by q_l and q_(l-1) divide by about 2^(2*bits) and the scale stays near 2^bits. A prime above
    2^bits has bits + 1 bits; sizes in [MIN_PRIME_BITS, MAX_PRIME_BITS - 1], and 2N must divide
    2^bits. Deterministic: the same (bit_sizes, N, exclude) give the same primes.
    """
    _check_ring_degree(n)
    taken = set(exclude)
    streams: dict[int, _AlternatingPrimes] = {}
    chosen: list[int] = []
    for bits in bit_sizes:
        if not MIN_PRIME_BITS <= bits < MAX_PRIME_BITS or (1 << bits) % (2 * n):
            raise ParameterError(f"scaling primes need bits in [{MIN_PRIME_BITS}, {MAX_PRIME_BITS - 1}] "
                                 f"with 2N | 2^bits, got bits={bits} for N={n}")
        q = streams.setdefault(bits, _AlternatingPrimes(bits, n)).take(taken)
        if q is None:
            raise ParameterError(f"ran out of primes = 1 mod 2N near 2^{bits} for N={n}")
        chosen.append(q)
        taken.add(q)
    return chosen
