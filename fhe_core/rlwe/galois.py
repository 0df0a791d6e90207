"""Galois elements of Z[X]/(X^N + 1): the automorphisms sigma_k: X -> X^k for odd k mod 2N.

Slot convention (shared with the CKKS encoder): with the N/2 slots ordered so that slot j holds
the value of the plaintext at psi^(5^j) (psi a primitive 2N-th root of unity), sigma_k with
k = 5^r mod 2N moves the value of slot j + r into slot j: it rotates the slot vector left by r
(negative r rotates right). sigma_{2N-1}: X -> X^-1 maps psi^(5^j) to its inverse, i.e. complex
conjugation of every slot. The group (Z/2NZ)^* = <5> x <-1> has order N; 5 has order N/2.
"""
from __future__ import annotations

from fhe_core.errors import ParameterError

ROTATION_GENERATOR = 5


def _check_ring(n: int) -> int:
    if n < 2 or n & (n - 1):
        raise ParameterError(f"N must be a power of two, got {n}")
    return 2 * n


def check_galois_element(k: int, n: int, op: str = "galois") -> int:
    """``k`` as an int, or ParameterError naming ``op`` if it is not odd in [1, 2N)."""
    two_n = _check_ring(n)
    if isinstance(k, bool) or not isinstance(k, int) or not (0 < k < two_n and k % 2 == 1):
        raise ParameterError(f"{op}: a Galois element must be an odd int in [1, {two_n}), got {k!r}")
    return k


def galois_element_for_rotation(r: int, n: int) -> int:
    """5^r mod 2N: the element that rotates the N/2 slots left by r (right for r < 0)."""
    two_n = _check_ring(n)
    return pow(ROTATION_GENERATOR, r % (n // 2), two_n)


def galois_element_for_conjugation(n: int) -> int:
    """2N - 1: X -> X^-1, complex conjugation of every slot."""
    return _check_ring(n) - 1


def galois_inverse(k: int, n: int) -> int:
    """k^-1 mod 2N (sigma_k^-1 = sigma_{k^-1})."""
    return pow(check_galois_element(k, n, "galois_inverse"), -1, 2 * n)


def galois_compose(k1: int, k2: int, n: int) -> int:
    """The element of sigma_k1 after sigma_k2 (and before: the group is abelian): k1*k2 mod 2N."""
    op = "galois_compose"
    return check_galois_element(k1, n, op) * check_galois_element(k2, n, op) % (2 * n)


def rotation_for_galois_element(k: int, n: int) -> tuple[int, bool]:
    """(r, conjugate) with k = (-1)^conjugate * 5^r mod 2N and 0 <= r < N/2.

    A host-side discrete logarithm by walking the N/2 powers of 5, for reporting which rotation
    steps a key set covers; not a hot path.
    """
    two_n = 2 * n
    check_galois_element(k, n, "rotation_for_galois_element")
    power = 1
    for r in range(n // 2):
        if power == k:
            return r, False
        if power == two_n - k:
            return r, True
        power = power * ROTATION_GENERATOR % two_n
    raise AssertionError(f"{k} is not in <5> x <-1> mod {two_n}")  # unreachable for odd k
