"""Shared pieces of the RLWE tests: small explicit contexts and exact (Python big-integer) decoding.

Every reference here goes through ``fhe_reference`` (CRT, substitution, schoolbook products);
nothing from fhe_core.rlwe is used to build an expected value.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from math import isqrt, prod

import numpy as np
import torch

from fhe_core import rlwe
from fhe_core.ops import KernelPlan
from fhe_core.ring import generate_primes
from fhe_reference import crt


@dataclass(frozen=True)
class Shape:
    """A small test parameter set: ring degree, q/p prime sizes, Hamming weight."""

    log_n: int
    q_bits: tuple[int, ...]
    p_bits: tuple[int, ...]
    hamming_weight: int = 0

    @property
    def id(self) -> str:
        return (f"N2^{self.log_n}-q{len(self.q_bits)}x{self.q_bits[0]}-p{len(self.p_bits)}x{self.p_bits[0]}"
                f"-h{self.hamming_weight}")


# alpha = 2 with a truncated last digit (dnum = 3); alpha = 1 (exact ModDown); alpha = 3, sparse secret
SHAPES = [
    Shape(12, (50,) * 5, (60,) * 2),
    Shape(11, (45,) * 4, (55,)),
    Shape(10, (40,) * 6, (50,) * 3, hamming_weight=64),
]


@functools.cache
def context(shape: Shape, device: str = "cpu", plan: KernelPlan | None = None,
            key_switching: str = "hybrid") -> rlwe.RLWEContext:
    """The context of ``shape`` on ``device`` with ``plan`` (default: resolved) and that key-switching method."""
    n = 1 << shape.log_n
    primes = generate_primes(list(shape.q_bits) + list(shape.p_bits), n)
    k = len(shape.q_bits)
    return rlwe.RLWEContext(n, primes[:k], primes[k:], device, hamming_weight=shape.hamming_weight, plan=plan,
                            key_switching=key_switching)


def fixed_seed(label: str) -> bytes:
    """A fixed 32-byte seed for determinism tests (tests only, never in library code)."""
    return label.encode().ljust(32, b"\0")[:32]


def centred(x: int, modulus: int) -> int:
    x %= modulus
    return x - modulus if x > modulus // 2 else x


def decode(ctx: rlwe.RLWEContext, poly_ntt: torch.Tensor, level: int) -> list[int]:
    """The centred integer coefficients of an NTT-domain ``[l+1, N]`` polynomial (exact CRT)."""
    basis = ctx.q_at(level)
    rows = basis.intt(poly_ntt).cpu().tolist()
    primes, big_q = list(basis.primes), basis.modulus
    return [centred(crt([row[i] for row in rows], primes), big_q) for i in range(ctx.n)]


def encode(ctx: rlwe.RLWEContext, coefficients: list[int], level: int) -> torch.Tensor:
    """An integer polynomial as ``[l+1, N]`` NTT-domain residues over Q_l."""
    basis = ctx.q_at(level)
    return basis.ntt(basis.to_residues(coefficients))


def random_poly(rng: np.random.Generator, n: int, bound: int) -> list[int]:
    """N integers uniform in [-bound, bound] (any size: drawn as Python ints)."""
    if bound < 1 << 62:
        return [int(v) for v in rng.integers(-bound, bound + 1, size=n)]
    return [int.from_bytes(rng.bytes(bound.bit_length() // 8 + 8), "little") % (2 * bound + 1) - bound
            for _ in range(n)]


def max_diff(got: list[int], expected: list[int], modulus: int) -> int:
    """max_i |got_i - expected_i| with differences centred mod ``modulus``."""
    return max(abs(centred(g - e, modulus)) for g, e in zip(got, expected, strict=True))


def fresh_noise_bound_pk(ctx: rlwe.RLWEContext) -> int:
    """2^6 sqrt(N): about 17 standard deviations of e u + e0 + e1 s, whose variance is at most
    N eta/2 (2/3 + 2/3) = 14 N for eta = 21."""
    return 64 * isqrt(ctx.n)


def q_modulus(ctx: rlwe.RLWEContext, level: int) -> int:
    return prod(ctx.q_primes[:level + 1])
