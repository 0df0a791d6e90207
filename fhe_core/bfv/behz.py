"""RNS ciphertext multiplication of BFV by the BEHZ algorithm (Bajard, Eynard, Hasan, Zucca,
"A Full RNS Variant of FV like Somewhat Homomorphic Encryption Schemes", SAC 2016).

BFV multiplication needs round(t/Q * (a . b)) over the integers, where a . b is the tensor
product of the lifted components (coefficients up to N Q^2). BEHZ works with integers only (so
CPU and CUDA give identical bits) in the basis Q_l and an auxiliary basis B:

1. ``lift``   (fastbconv_m_tilde + sm_mrq): c over Q -> c - alpha Q over B, alpha in {0, 1}.
   Conv_{Q->B u {m~}}([m~ c]_Q) = m~ c + u Q (0 <= u < l+1, the fast conversion's error);
   r = [-(m~ c + u Q) Q^-1]_{m~} (centred) makes it divisible by m~, and
   (m~ c + u Q + r Q) / m~ = c + ((u + r) / m~) Q is c up to one multiple of Q when m~ > 2(l+1).
2. ``tensor``: (d0, d1, d2) = (a0 b0, a0 b1 + a1 b0, a1 b1) in the NTT domain of Q and of B.
3. ``fast_floor``: (t d - Conv_{Q->B}([t d]_Q)) * Q^-1 over B = floor(t d / Q) - u, u < l+1.
4. ``to_q_exact``: y over B -> y over Q exactly, by the exact (centred) conversion: |y| < 2 t N Q + l + 1 is
   below B/4, far from B/2 where its double-precision estimate of the multiple of B could go either way.
   (BEHZ's fastbconv_sk reaches the same words with one more prime m_sk and four more passes.)

The result decrypts (degree 2, under (1, s, s^2)) to m_a m_b mod t with the usual BFV noise
growth. Sizes: B has enough 61-bit primes that B > 8 t N Q_L; m~ is a 61-bit prime. The
constant factors of the steps (m~, Q^-1, t, m~^-1) are folded into the conversions' constants
(``BasisConverter``'s ``scale_in`` / ``scale_out``), so each step is one to three batched ops
over all limbs and all components at once: a product is 14 ops, loops run over nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import torch

from fhe_core import ops
from fhe_core.bfv.context import BFVContext
from fhe_core.ring import BasisConverter, RNSBasis, generate_primes, shoup_constants

AUX_PRIME_BITS = 61


def auxiliary_primes(ctx: BFVContext) -> tuple[list[int], int]:
    """(B, m~): distinct 61-bit NTT-friendly primes, disjoint from Q, P and t, with B > 8 t N Q_L
    (checked at the top level; lower levels need less)."""
    taken = set(ctx.params.q_primes) | set(ctx.params.p_primes) | {ctx.t}
    bound = 8 * ctx.t * ctx.n * ctx.q_modulus(ctx.max_level)
    count = 1
    while True:
        primes = generate_primes([AUX_PRIME_BITS] * (count + 1), ctx.n, exclude=taken)
        if prod(primes[:count]) > bound:
            return primes[:count], primes[count]
        count += 1


def _inverses(value: int, primes) -> list[int]:
    return [pow(value, -1, p) for p in primes]


@dataclass(frozen=True, eq=False)
class BEHZTables:
    """Bases and converters of BEHZ at one level l (k = l+1 primes of Q_l), their constants folded in."""

    q: RNSBasis               # Q_l
    b: RNSBasis               # B
    m_tilde: int
    lift_to_b: BasisConverter   # c -> Conv([m~ c]_Q) Q^-1 over B
    lift_to_mt: BasisConverter  # c -> [Conv([m~ c]_Q) Q^-1]_{m~} = -r
    lift_scale: tuple[torch.Tensor, torch.Tensor]   # Q m~^-1 mod p_j (Shoup)
    floor_conv: BasisConverter  # d -> Conv([t d]_Q) t^-1 over B
    floor_scale: tuple[torch.Tensor, torch.Tensor]  # t Q^-1 mod p_j (Shoup)
    to_q: BasisConverter        # y over B -> y over Q (exact conversion)

    @staticmethod
    def build(ctx: BFVContext, level: int) -> BEHZTables:
        b_primes, m_tilde = auxiliary_primes(ctx)
        q, b, mt = ctx.rlwe.q_at(level), ctx.basis(b_primes), ctx.basis([m_tilde])
        big_q, bp = q.modulus, b.primes
        return BEHZTables(
            q, b, m_tilde,
            lift_to_b=BasisConverter(q, b, scale_in=m_tilde, scale_out=_inverses(big_q, bp)),
            lift_to_mt=BasisConverter(q, mt, scale_in=m_tilde, scale_out=_inverses(big_q, [m_tilde])),
            lift_scale=shoup_constants([big_q * pow(m_tilde, -1, p) for p in bp], bp, ctx.device),
            floor_conv=BasisConverter(q, b, scale_in=ctx.t, scale_out=_inverses(ctx.t, bp)),
            floor_scale=shoup_constants([ctx.t * pow(big_q, -1, p) for p in bp], bp, ctx.device),
            to_q=BasisConverter(b, q))


def lift(tab: BEHZTables, c: torch.Tensor) -> torch.Tensor:
    """fastbconv_m_tilde + sm_mrq: ``[..., k, N]`` coefficients over Q_l -> ``[..., |B|, N]``
    coefficients over B of c - alpha Q, alpha in {0, 1}: (X Q^-1 + r) (Q m~^-1) with X = m~ c + u Q."""
    x = tab.lift_to_b(c)                                          # X Q^-1 over B
    minus_r = ops.center_lift(tab.lift_to_mt(c), tab.m_tilde, tab.b.moduli)  # -r (centred) over B
    return ops.sub_mul_const(x, minus_r, *tab.lift_scale, tab.b.moduli, out=x)


def tensor(a: torch.Tensor, b: torch.Tensor, moduli: torch.Tensor) -> torch.Tensor:
    """``[2, ..., k, N]`` x ``[2, ..., k, N]`` (NTT domain) -> ``[3, ..., k, N]``: (a0 b0, a0 b1 + a1 b0, a1 b1);
    one pass for single ciphertexts (ops.tensor_product), a few for stacks of them."""
    if a.dim() == 3:
        return ops.tensor_product(a, b, moduli)
    d1 = ops.mul(a[0], b[1], moduli)
    return torch.stack((ops.mul(a[0], b[0], moduli), ops.mul_add(a[1], b[0], d1, moduli, out=d1),
                        ops.mul(a[1], b[1], moduli)))


def fast_floor(tab: BEHZTables, d_q: torch.Tensor, d_b: torch.Tensor) -> torch.Tensor:
    """floor(t d / Q) - u (0 <= u < k) over B, from d's coefficients over Q_l and over B:
    (t d - Conv([t d]_Q)) Q^-1 = (d - Conv([t d]_Q) t^-1) (t Q^-1)."""
    conv = tab.floor_conv(d_q)
    return ops.sub_mul_const(d_b, conv, *tab.floor_scale, tab.b.moduli, out=conv)


def to_q_exact(tab: BEHZTables, y: torch.Tensor) -> torch.Tensor:
    """``[..., |B|, N]`` coefficients of y (|y| < B/4) -> ``[..., k, N]`` over Q_l, exactly."""
    return tab.to_q(y, exact=True)


def multiply(tab: BEHZTables, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The BFV product of two degree-1 ciphertexts (or of two stacks of them).

    a, b: ``[2, ..., k, N]`` int64, NTT domain over Q_l. Returns ``[3, ..., k, N]`` int64, NTT domain over
    Q_l: floor(t/Q_l (a~ . b~)) - u with 0 <= u < k per coefficient (a~, b~ the lifts of step 1;
    the error u is absorbed by the noise), a degree-2 ciphertext under (1, s, s^2).
    """
    q, bb = tab.q, tab.b
    coeffs = q.intt(torch.stack((a, b)))                         # [2, 2, ..., k, N]
    lifted = bb.ntt(lift(tab, coeffs))                           # [2, 2, ..., |B|, N]
    d_q = q.intt(tensor(a, b, q.moduli))
    d_b = bb.intt(tensor(lifted[0], lifted[1], bb.moduli))
    return q.ntt(to_q_exact(tab, fast_floor(tab, d_q, d_b)))
