"""Linear key switching (Jin et al., "Efficient Key-Switching for Word-Type FHE and GPU Acceleration") on inputs
already checked: the engine of a context with ``key_switching="linear"``, called by :mod:`fhe_core.rlwe.switching`.

The algorithm. The gadget has one prime per digit: d = sum_i [d]_{q_i} g_i (mod Q_l), g_i the CRT idempotent of
q_i, and the key's digit i is (b_i, a_i) = (-a_i s + e_i + P g_i s', a_i) over QP_L (:mod:`fhe_core.rlwe.keys`).
Hybrid switching extends each digit to every prime of QP_l (ModUp: a conversion and an NTT per digit and prime,
O(l^2) NTTs). Here each digit [d]_{q_i}, read as an integer polynomial with coefficients in [0, q_i), is transformed
once per auxiliary prime m_k (A = 2 or 3 primes of 61 bits, :func:`fhe_core.rlwe.context.linear_aux_primes`); the
key is stored transformed the same way (``[k_i]_t`` per target prime t of QP_L, :func:`keys.linear_preprocess`).
For every target t the products sum_i [d]_{q_i} * [k_i]_t accumulate in the aux base; the aux base holds that
integer exactly (M > 4 * bound), so one inverse NTT per aux prime, component and target, and an exact CRT
(:class:`fhe_core.rlwe.context.LinearBase`), give its residue mod t: sum_i [d]_{q_i} k_i over QP_l, the same
quantity hybrid's inner product computes with digits of one prime. ModDown then runs in the coefficient domain
((c_Q - Conv_exact(c_P)) P^-1) with one forward NTT per output row.

Noise (the analysis the tests rely on): the result is (u0, u1) with u0 + u1 s = d s' + e_ks (mod Q_l),
e_ks = P^-1 sum_i [d]_{q_i} e_i + (r0 + r1 s) with |r_c| <= 1/2 (ModDown's exact rounding), so
|e_ks|_inf <= N eta sum_i q_i / P + (1 + |s|_1) / 2 (``ks_noise_bound`` in the tests). Every step before ModDown
is exact (the lift, the aux products, the CRT), so the only rounding is ModDown's: with alpha = 1 hybrid's ModUp is
exact too and the two methods give the same words (tested bit for bit). With alpha-prime digits hybrid's first
term is sum_j ([d]_{Q_j} + u_j Q_j) e_j / P < N eta alpha sum_j Q_j / P: under the same P linear's is the smaller.

Costs per key switch at level l (T = alpha + l + 1 target rows, A aux primes): NTTs (l + 1) inverse of d,
A (l + 1) forward, 2 A T inverse, 2 (l + 1) forward after ModDown; Hadamard products 2 A T (l + 1); key words
2 A T (L + 1) N (hybrid: 2 dnum T N). The products are composed from ``ops.mul`` / ``ops.mul_add`` (each pass reads
the accumulator too); a fused kernel is the obvious next step and is not written (docs/performance.md).
"""
from __future__ import annotations

import torch

from fhe_core import ops
from fhe_core.rlwe.context import RLWEContext
from fhe_core.rlwe.keys import SwitchingKey


def lift(ctx: RLWEContext, d: torch.Tensor, level: int) -> torch.Tensor:
    """The digits of d (``[l+1, N]``, NTT domain over Q_l) in the aux base: ``[l+1, A, N]``, row i = NTT_{m_k} of
    [d]_{q_i}'s coefficients (below 2^61 < 4 m_k: the forward NTT takes them unreduced)."""
    aux = ctx.linear.aux
    coeffs = ctx.tables(level).q.intt(d)
    lifted = coeffs[:, None, :].expand(-1, len(aux), -1).contiguous()
    return aux.ntt(lifted, out=lifted)


def extend(ctx: RLWEContext, digits: torch.Tensor, key: SwitchingKey, level: int) -> torch.Tensor:
    """sum_i digits_i * k_i over QP_l, exactly reduced mod every target prime: ``[2, alpha + l + 1, N]``,
    coefficient domain, canonical (digits: :func:`lift`'s output, possibly permuted by an automorphism)."""
    base, rows = ctx.linear, ctx.alpha + level + 1
    moduli = base.aux.moduli
    acc = ops.mul(key.data[0, :rows], digits[0], moduli)          # [rows, 2, A, N], aux NTT domain
    for i in range(1, level + 1):
        ops.mul_add(key.data[i, :rows], digits[i], acc, moduli, out=acc)
    return _crt(ctx, base.aux.intt(acc, out=acc), rows)


def _crt(ctx: RLWEContext, y: torch.Tensor, rows: int) -> torch.Tensor:
    """[x]_t for every target row from y ``[rows, 2, A, N]`` = [x (M/m_k)^-1]_{m_k} (x centred, |x| < M/4):
    sum_k [y_k]_t [M/m_k]_t - [v]_t [M]_t with v = round(sum_k y_k / m_k) (see LinearBase). The float estimate of v
    is off by far less than the 1/4 margin, so v is exact on every backend."""
    base = ctx.linear
    moduli, targets = ctx.qp_at(rows - ctx.alpha - 1).moduli, base.targets[:rows]
    per_prime = y.permute(2, 1, 0, 3)                               # [A, 2, rows, N] view
    v = (per_prime.double() / base.m_float[:, :, None, None]).sum(0).round_().long()
    out = torch.remainder(v, targets, out=v)
    out = ops.mul_const(out, base.m_mod_t[:rows], base.m_mod_t_shoup[:rows], moduli)
    out = ops.neg(out, moduli, out=out)
    residue = torch.empty_like(out)
    for k in range(len(base.aux)):
        torch.remainder(per_prime[k], targets, out=residue)
        ops.mul_const(residue, base.m_hat_mod_t[k, :rows], base.m_hat_mod_t_shoup[k, :rows], moduli, out=residue)
        ops.add(out, residue, moduli, out=out)
    return out


def mod_down(ctx: RLWEContext, c: torch.Tensor, level: int, add: torch.Tensor | None = None,
             add_galois: int = 1) -> torch.Tensor:
    """round(c / P) for c ``[2, alpha + l + 1, N]`` over QP_l in the coefficient domain (:func:`extend`'s output):
    ``[2, l + 1, N]``, NTT domain over Q_l, plus ``add`` (``[B', l+1, N]``, NTT domain; sigma_add_galois of it)
    on the first B' components."""
    t, alpha = ctx.tables(level), ctx.alpha
    conv = t.p_to_q(c[:, :alpha].contiguous(), exact=True)         # [c]_P centred, over Q_l
    out = ops.sub_mul_const(c[:, alpha:].contiguous(), conv, t.p_inv, t.p_inv_shoup, t.q.moduli, out=conv)
    out = t.q.ntt(out, out=out)
    if add is not None:
        if add_galois != 1:
            add = ops.automorphism_ntt(add, t.q.moduli, add_galois)
        ops.add(out[:add.shape[0]], add, t.q.moduli, out=out[:add.shape[0]])
    return out


def key_switch(ctx: RLWEContext, d: torch.Tensor, key: SwitchingKey, level: int,
               add: torch.Tensor | None = None, add_galois: int = 1) -> torch.Tensor:
    """(u0, u1) with u0 + u1 s = d s' + e_ks, ``[2, l+1, N]`` NTT domain, plus ``add`` as in :func:`mod_down`."""
    return mod_down(ctx, extend(ctx, lift(ctx, d, level), key, level), level, add, add_galois)


def rotate_hoisted(ctx: RLWEContext, data: torch.Tensor, galois_keys: dict[int, SwitchingKey],
                   level: int) -> dict[int, torch.Tensor]:
    """sigma_k(data) for every k of ``galois_keys``, the lift of c1 shared: sigma_k of a lifted digit (an NTT-domain
    permutation mod m_k) is the lift of sigma_k([c1]_{q_i}), an integer polynomial with coefficients in
    (-q_i, q_i), inside the aux base's bound and equal to sigma_k(c1) mod q_i."""
    digits = lift(ctx, data[1], level)
    c0, moduli = data[:1], ctx.linear.aux.moduli
    return {k: mod_down(ctx, extend(ctx, ops.automorphism_ntt(digits, moduli, k), key, level), level,
                        add=c0, add_galois=k)
            for k, key in galois_keys.items()}
