"""RNS ciphertext multiplication of BFV by the BEHZ algorithm (Bajard, Eynard, Hasan, Zucca,
"A Full RNS Variant of FV like Somewhat Homomorphic Encryption Schemes", SAC 2016).

BFV multiplication needs round(t/Q * (a . b)) over the integers, where a . b is the tensor
product of the lifted components (coefficients up to N Q^2). BEHZ works with integers only (so
CPU and CUDA give identical bits) in the basis Q_l and an auxiliary basis Bsk = B u {m_sk}:

1. ``lift``   (fastbconv_m_tilde + sm_mrq): c over Q -> c - alpha Q over Bsk, alpha in {0, 1}.
   Conv_{Q->Bsk u {m~}}([m~ c]_Q) = m~ c + u Q (0 <= u < l+1, the fast conversion's error);
   r = [-(m~ c + u Q) Q^-1]_{m~} (centred) makes it divisible by m~, and
   (m~ c + u Q + r Q) / m~ = c + ((u + r) / m~) Q is c up to one multiple of Q when m~ > 2(l+1).
2. ``tensor``: (d0, d1, d2) = (a0 b0, a0 b1 + a1 b0, a1 b1) in the NTT domain of Q and of Bsk.
3. ``fast_floor``: (t d - Conv_{Q->Bsk}([t d]_Q)) * Q^-1 over Bsk = floor(t d / Q) - u, u < l+1.
4. ``to_q_exact`` (fastbconv_sk, Shenoy-Kumaresan): y over Bsk -> y over Q exactly:
   Conv_{B->Q}(y) = y + a B, and a = [(Conv_{B->m_sk}(y) - y) B^-1]_{m_sk} (centred) is known.

The result decrypts (degree 2, under (1, s, s^2)) to m_a m_b mod t with the usual BFV noise
growth. Sizes: B has enough 61-bit primes that B > 4 t N Q_L (|y| < 2 t N Q + l + 1 < B/2);
m_sk and m~ are 61-bit primes. Every step is a few batched ops over all limbs and all
components at once: loops run over nothing but the steps.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import torch

from fhe_core import ops
from fhe_core.bfv.context import BFVContext
from fhe_core.ring import BasisConverter, RNSBasis, generate_primes, shoup_constants, words_tensor

AUX_PRIME_BITS = 61


def auxiliary_primes(ctx: BFVContext) -> tuple[list[int], int, int]:
    """(B, m_sk, m~): distinct 61-bit NTT-friendly primes, disjoint from Q, P and t, with
    B > 4 t N Q_L (checked at the top level; lower levels need less)."""
    taken = set(ctx.params.q_primes) | set(ctx.params.p_primes) | {ctx.t}
    bound = 4 * ctx.t * ctx.n * ctx.q_modulus(ctx.max_level)
    count = 1
    while True:
        primes = generate_primes([AUX_PRIME_BITS] * (count + 2), ctx.n, exclude=taken)
        if prod(primes[:count]) > bound:
            return primes[:count], primes[count], primes[count + 1]
        count += 1


def _shoup(values, primes, device) -> tuple[torch.Tensor, torch.Tensor]:
    return shoup_constants([v % p for v, p in zip(values, primes)], primes, device)


@dataclass(frozen=True, eq=False)
class BEHZTables:
    """Bases, converters and constants of BEHZ at one level l (k = l+1 primes of Q_l)."""

    q: RNSBasis          # Q_l
    bsk: RNSBasis        # B u {m_sk}
    b: RNSBasis          # B (a prefix view of bsk)
    m_sk: int
    m_tilde: int
    q_to_bsk: BasisConverter
    q_to_mt: BasisConverter
    b_to_q: BasisConverter
    b_to_msk: BasisConverter
    mt_moduli: torch.Tensor   # [1, 4]
    msk_moduli: torch.Tensor  # [1, 4]
    consts: dict              # name -> (values, shoup) per-limb constants, see build()
    bsk_column: torch.Tensor  # [|Bsk|, 1] int64 primes
    q_column: torch.Tensor    # [k, 1] int64 primes

    @staticmethod
    def build(ctx: BFVContext, level: int) -> BEHZTables:
        b_primes, m_sk, m_tilde = auxiliary_primes(ctx)
        dev = ctx.device
        q = ctx.rlwe.q_at(level)
        bsk = ctx.basis(b_primes + [m_sk])
        b = bsk.prefix(len(b_primes))
        mt, msk = ctx.basis([m_tilde]), ctx.basis([m_sk])
        big_q, big_b = q.modulus, b.modulus
        qp, sp = q.primes, bsk.primes
        consts = {
            "mt_mod_q": _shoup([m_tilde] * len(qp), qp, dev),
            "neg_q_inv_mt": _shoup([-pow(big_q, -1, m_tilde)], [m_tilde], dev),
            "q_mod_bsk": _shoup([big_q] * len(sp), sp, dev),
            "mt_inv_bsk": _shoup([pow(m_tilde, -1, p) for p in sp], sp, dev),
            "t_mod_q": _shoup([ctx.t] * len(qp), qp, dev),
            "t_mod_bsk": _shoup([ctx.t] * len(sp), sp, dev),
            "q_inv_bsk": _shoup([pow(big_q, -1, p) for p in sp], sp, dev),
            "b_inv_msk": _shoup([pow(big_b, -1, m_sk)], [m_sk], dev),
            "b_mod_q": _shoup([big_b] * len(qp), qp, dev),
        }
        return BEHZTables(q, bsk, b, m_sk, m_tilde, BasisConverter(q, bsk), BasisConverter(q, mt),
                          BasisConverter(b, q), BasisConverter(b, msk), mt.moduli, msk.moduli, consts,
                          words_tensor(sp, dev).reshape(-1, 1), words_tensor(qp, dev).reshape(-1, 1))

    def mul_const(self, a: torch.Tensor, name: str, moduli: torch.Tensor) -> torch.Tensor:
        values, shoup = self.consts[name]
        return ops.mul_const(a, values, shoup, moduli)


def _centred(x: torch.Tensor, modulus: int) -> torch.Tensor:
    """Residues in [0, m) -> the centred representatives in (-m/2, m/2] (int64)."""
    return torch.where(x > modulus // 2, x - modulus, x)


def lift(tab: BEHZTables, c: torch.Tensor) -> torch.Tensor:
    """fastbconv_m_tilde + sm_mrq: ``[..., k, N]`` coefficients over Q_l -> ``[..., |Bsk|, N]``
    coefficients over Bsk of c - alpha Q, alpha in {0, 1}."""
    c_mt = tab.mul_const(c, "mt_mod_q", tab.q.moduli)
    x = tab.q_to_bsk(c_mt)                                       # m~ c + u Q over Bsk
    r = tab.mul_const(tab.q_to_mt(c_mt), "neg_q_inv_mt", tab.mt_moduli)
    r_bsk = torch.remainder(_centred(r, tab.m_tilde), tab.bsk_column)  # [..., |Bsk|, N]
    x = ops.add(x, tab.mul_const(r_bsk, "q_mod_bsk", tab.bsk.moduli), tab.bsk.moduli, out=x)
    return tab.mul_const(x, "mt_inv_bsk", tab.bsk.moduli)


def tensor(a: torch.Tensor, b: torch.Tensor, moduli: torch.Tensor) -> torch.Tensor:
    """``[2, k, N]`` x ``[2, k, N]`` (NTT domain) -> ``[3, k, N]``: (a0 b0, a0 b1 + a1 b0, a1 b1)."""
    d1 = ops.mul(a[0], b[1], moduli)
    return torch.stack((ops.mul(a[0], b[0], moduli), ops.mul_add(a[1], b[0], d1, moduli, out=d1),
                        ops.mul(a[1], b[1], moduli)))


def fast_floor(tab: BEHZTables, d_q: torch.Tensor, d_bsk: torch.Tensor) -> torch.Tensor:
    """floor(t d / Q) - u (0 <= u < k) over Bsk, from d's coefficients over Q_l and over Bsk."""
    conv = tab.q_to_bsk(tab.mul_const(d_q, "t_mod_q", tab.q.moduli))
    diff = ops.sub(tab.mul_const(d_bsk, "t_mod_bsk", tab.bsk.moduli), conv, tab.bsk.moduli, out=conv)
    return tab.mul_const(diff, "q_inv_bsk", tab.bsk.moduli)


def to_q_exact(tab: BEHZTables, y: torch.Tensor) -> torch.Tensor:
    """fastbconv_sk: ``[..., |Bsk|, N]`` coefficients of y (|y| < B/2) -> ``[..., k, N]`` over Q_l."""
    nb = len(tab.b)
    y_b, y_sk = y[..., :nb, :].contiguous(), y[..., nb:, :].contiguous()
    conv_q = tab.b_to_q(y_b)                                     # y + a B over Q_l
    a = ops.sub(tab.b_to_msk(y_b), y_sk, tab.msk_moduli)
    a = _centred(tab.mul_const(a, "b_inv_msk", tab.msk_moduli), tab.m_sk)
    a_q = torch.remainder(a, tab.q_column)                       # [..., k, N]
    return ops.sub(conv_q, tab.mul_const(a_q, "b_mod_q", tab.q.moduli), tab.q.moduli, out=conv_q)


def multiply(tab: BEHZTables, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The BFV product of two degree-1 ciphertexts.

    a, b: ``[2, k, N]`` int64, NTT domain over Q_l. Returns ``[3, k, N]`` int64, NTT domain over
    Q_l: floor(t/Q_l (a~ . b~)) - u with 0 <= u < k per coefficient (a~, b~ the lifts of step 1;
    the error u is absorbed by the noise), a degree-2 ciphertext under (1, s, s^2).
    """
    q, bsk = tab.q, tab.bsk
    coeffs = q.intt(torch.stack((a, b)))                         # [2, 2, k, N]
    lifted = bsk.ntt(lift(tab, coeffs))                          # [2, 2, |Bsk|, N]
    d_q = q.intt(tensor(a, b, q.moduli))
    d_bsk = bsk.intt(tensor(lifted[0], lifted[1], bsk.moduli))
    return q.ntt(to_q_exact(tab, fast_floor(tab, d_q, d_bsk)))
