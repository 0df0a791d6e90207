"""Independent references for the kernel tests: Python big integers only, no fhe_core code.

Everything here is written for clarity, not speed; tests keep sizes small enough for it.
"""
from __future__ import annotations

import os
import struct
from math import prod

import numpy as np
import torch

import pytest

# Every op test runs on both backends; the CUDA run carries the `gpu` marker (skipped without a GPU).
DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]


def fresh_rng() -> tuple[np.random.Generator, int]:
    """A generator on a fresh OS-random seed; tests print the seed so a failure can be replayed."""
    seed = int.from_bytes(os.urandom(8), "little")
    print(f"rng seed = {seed}")
    return np.random.default_rng(seed), seed


def fresh_seed(label: str) -> bytes:
    """A 32-byte key or encryption seed from the OS; printed with ``label`` so that a failure can
    be replayed (pass ``bytes.fromhex(...)`` in its place)."""
    seed = os.urandom(32)
    print(f"{label} seed = {seed.hex()}")
    return seed


def random_residues(rng: np.random.Generator, primes, shape_prefix=(), n: int = 1024,
                    device="cpu") -> torch.Tensor:
    """Uniform residues ``[*shape_prefix, l, N]`` for the given primes (each < 2^61)."""
    rows = [rng.integers(0, q, size=(*shape_prefix, n), dtype=np.uint64) for q in primes]
    stacked = np.stack(rows, axis=-2).astype(np.int64)
    return torch.from_numpy(stacked).to(device)


def to_ints(t: torch.Tensor) -> list:
    """A residue tensor as nested Python ints."""
    return t.cpu().tolist()


# ---- polynomials mod X^N + 1 ---------------------------------------------------------------------

def negacyclic_product(a: list[int], b: list[int], q: int) -> list[int]:
    """Schoolbook a*b mod (X^N + 1, q)."""
    n = len(a)
    out = [0] * n
    for i, ai in enumerate(a):
        if ai == 0:
            continue
        for j, bj in enumerate(b):
            k = i + j
            if k < n:
                out[k] += ai * bj
            else:
                out[k - n] -= ai * bj
    return [c % q for c in out]


def substitute(a: list[int], k: int, q: int) -> list[int]:
    """a(X^k) mod (X^N + 1, q) by direct substitution: X^(i*k) = (-1)^floor(i*k/N) X^(i*k mod N)."""
    n = len(a)
    out = [0] * n
    for i, c in enumerate(a):
        e = i * k
        sign = -1 if (e // n) % 2 else 1
        out[e % n] = (out[e % n] + sign * c) % q
    return out


def bit_reverse(x: int, bits: int) -> int:
    return int(format(x, f"0{bits}b")[::-1], 2) if bits else 0


def evaluate(a: list[int], x: int, q: int) -> int:
    """a(x) mod q by Horner's rule."""
    acc = 0
    for c in reversed(a):
        acc = (acc * x + c) % q
    return acc


def ntt_prime_below(limit: int, n: int) -> int:
    """The largest prime q < limit with q = 1 mod 2n (an NTT prime for ring degree n)."""
    from fhe_core.ring.primes import is_prime
    q = limit - 1 - (limit - 2) % (2 * n)
    while not is_prime(q):
        q -= 2 * n
    return q


def ntt_prime_above(limit: int, n: int) -> int:
    """The smallest prime q > limit with q = 1 mod 2n."""
    from fhe_core.ring.primes import is_prime
    q = limit + 1 + (-limit) % (2 * n)
    while not is_prime(q):
        q += 2 * n
    return q


def inverse_ntt_rounds(log_n: int) -> list[tuple[int, int]]:
    """(lowest t-bit, stages) of each round of the CUDA inverse NTT, in order: the rows kernel's k2 stages (t = 1 ..
    2^(k2-1)), then the columns kernel's k1, each local transform's rounds of 3 stages from the top group (the
    Python-integer models of the lazy and unreduced inverse rounds walk this)."""
    k1 = log_n // 2
    k2 = log_n - k1
    out = []
    for lo, length in ((0, k2), (k2, k1)):
        rounds = (length + 2) // 3
        for g in reversed(range(rounds)):
            stages = min(3, length - 3 * g)
            out.append((lo + length - 3 * g - stages, stages))
    return out


def crt(residues: list[int], primes: list[int]) -> int:
    """The x in [0, prod(primes)) with x = residues[i] mod primes[i]."""
    big = prod(primes)
    x = 0
    for r, q in zip(residues, primes):
        m = big // q
        x += r * m * pow(m, -1, q)
    return x % big


# ---- ChaCha20 (RFC 8439 block function, 64-bit counter and 64-bit nonce) -------------------------

def _rotl(x: int, r: int) -> int:
    return ((x << r) & 0xFFFFFFFF) | (x >> (32 - r))


def _quarter(s: list[int], a: int, b: int, c: int, d: int) -> None:
    s[a] = (s[a] + s[b]) & 0xFFFFFFFF; s[d] = _rotl(s[d] ^ s[a], 16)
    s[c] = (s[c] + s[d]) & 0xFFFFFFFF; s[b] = _rotl(s[b] ^ s[c], 12)
    s[a] = (s[a] + s[b]) & 0xFFFFFFFF; s[d] = _rotl(s[d] ^ s[a], 8)
    s[c] = (s[c] + s[d]) & 0xFFFFFFFF; s[b] = _rotl(s[b] ^ s[c], 7)


def chacha20_block(key: bytes, counter: int, nonce: int) -> list[int]:
    """16 output words of the ChaCha20 block (state words 12-13 = counter, 14-15 = nonce)."""
    state = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574, *struct.unpack("<8I", key),
             counter & 0xFFFFFFFF, counter >> 32, nonce & 0xFFFFFFFF, nonce >> 32]
    x = list(state)
    for _ in range(10):
        _quarter(x, 0, 4, 8, 12); _quarter(x, 1, 5, 9, 13); _quarter(x, 2, 6, 10, 14); _quarter(x, 3, 7, 11, 15)
        _quarter(x, 0, 5, 10, 15); _quarter(x, 1, 6, 11, 12); _quarter(x, 2, 7, 8, 13); _quarter(x, 3, 4, 9, 14)
    return [(a + b) & 0xFFFFFFFF for a, b in zip(x, state)]


def chacha20_words(key: bytes, nonce: int, count: int) -> list[int]:
    """The first ``count`` 32-bit words of the stream."""
    words: list[int] = []
    block = 0
    while len(words) < count:
        words.extend(chacha20_block(key, block, nonce))
        block += 1
    return words[:count]


def chacha20_u64(key: bytes, nonce: int):
    """The stream as 64-bit words without end: word pair (2i, 2i+1), low word first."""
    block = 0
    while True:
        words = chacha20_block(key, block, nonce)
        yield from (words[i] | words[i + 1] << 32 for i in range(0, 16, 2))
        block += 1


def fixed_weight_ternary(key: bytes, nonce: int, n: int, h: int) -> list[int]:
    """A ternary vector with exactly h nonzero entries: Floyd's algorithm picks the support (for
    j = n-h .. n-1, t uniform in [0, j]; take t unless already taken, else j), each chosen entry
    +1 when the next 64-bit word is odd, else -1. Uniform integers below b by rejection: words
    under 2^64 mod b are skipped, so the rest split evenly into b classes."""
    stream = chacha20_u64(key, nonce)

    def below(bound: int) -> int:
        word = next(stream)
        while word < (1 << 64) % bound:
            word = next(stream)
        return word % bound

    out = [0] * n
    for j in range(n - h, n):
        t = below(j + 1)
        out[j if out[t] else t] = 1 if next(stream) & 1 else -1
    return out
