"""The key-switching steps (HK20) on inputs already checked: the engine under ``fhe_core.rlwe.keyswitch``.

A context with ``key_switching="linear"`` runs :mod:`fhe_core.rlwe.linear_switching` instead: :func:`key_switch`,
:func:`relinearize`, :func:`relinearize_product`, :func:`apply_galois` and :func:`apply_galois_hoisted` dispatch on
the context; the hybrid-only steps (ModUp and the inner products the linear transforms and bootstrapping compose)
raise :class:`~fhe_core.errors.UnsupportedMethodError` there.

Every function here takes a context, tensors and keys that its caller has checked (shapes, devices, levels, keys'
params_id: what :mod:`fhe_core.rlwe.keyswitch`'s public functions and the scheme evaluators check at their entry)
and checks nothing again, nor do the steps it calls: a check once per operation, not once per step. The CKKS and BFV
evaluators, the linear transforms and the bootstrapping circuit call these after their own entry checks; anyone else
calls :mod:`fhe_core.rlwe.keyswitch`.

Each step runs as a handful of batched ops (loops only over digits and components) inside an NVTX range named after
it on CUDA. Where a step has a tuned composition the context's kernel plan picks it (``ctx.plan``,
:class:`fhe_core.ops.KernelPlan`): ModUp in one launch or digit by digit, the inner product fused into ModUp's last
NTT pass or not, HMult's tensor terms in that inner product or a tensor product first. Every choice gives the same
residues.
"""
from __future__ import annotations

import contextlib

import torch

from fhe_core import ops
from fhe_core.errors import UnsupportedMethodError
from fhe_core.rlwe import context as _context
from fhe_core.rlwe import linear_switching
from fhe_core.rlwe.ciphertext import Ciphertext
from fhe_core.rlwe.context import RLWEContext
from fhe_core.rlwe.keys import SwitchingKey


def _step(name: str, device: torch.device):
    """An NVTX range on CUDA (profiles read as the algorithm), nothing elsewhere."""
    return torch.cuda.nvtx.range(name) if device.type == "cuda" else contextlib.nullcontext()


def _linear(ctx: RLWEContext) -> bool:
    return ctx.key_switching == "linear"


def _hybrid_only(ctx: RLWEContext, step: str) -> None:
    """Refuse a hybrid-only step on a linear context (the double-hoisted linear transforms, bootstrapping and the
    explicit ModUp / inner-product API compose hybrid's steps; linear has no ModUp to share)."""
    if _linear(ctx):
        raise UnsupportedMethodError(f"{step}: a step of hybrid key switching, and this context switches keys "
                                     f"linearly (params key_switching='linear'); relinearize, rotate, conjugate "
                                     f"and hoisted rotations run with either method, the linear transforms and "
                                     f"bootstrapping need hybrid parameters")


def decompose_mod_up(ctx: RLWEContext, d: torch.Tensor, level: int,
                     coeffs: torch.Tensor | None = None) -> torch.Tensor:
    """ModUp of the gadget digits of d (``[l+1, N]``, NTT domain over Q_l): ``[dnum_l, alpha + l + 1, N]``, NTT
    domain over QP_l, row block j is [d]_{Q_j} + u_j Q_j extended to every prime of QP_l (equal to d on the digit's
    own primes). ``coeffs``: INTT(d) if the caller has it (several inputs transformed in one launch). Hybrid only."""
    _hybrid_only(ctx, "decompose_mod_up")
    t = ctx.tables(level)
    with _step("mod_up", ctx.device):
        coeffs = t.q.intt(d) if coeffs is None else coeffs
        if ctx.plan.mod_up_in_one_launch:
            return _mod_up_all_digits(ctx, t, d, coeffs)
        if ctx.alpha <= _context.BATCHED_MODUP_MAX_ALPHA:  # small digits: one extension kernel, one NTT
            b = t.batched_mod_up
            out = ops.mod_up_conv(coeffs, t.q.moduli, b.qhat_inv, b.qhat_inv_shoup, t.qp.moduli, b.qhat_mod_p,
                                  fragments=b.mma_fragments, plan=ctx.plan)
            return t.qp.ntt(out, out=out)
        out = torch.empty((len(t.digits), len(t.qp), ctx.n), dtype=torch.int64, device=ctx.device)
        for j, ext in enumerate(t.digits):
            out[j, ext.own_start:ext.own_start + ext.stop - ext.start].copy_(d[ext.start:ext.stop])
            for part in ext.parts:  # convert and transform only the rows outside the digit
                rows = out[j, part.start:part.stop]
                ops.bconv(coeffs[ext.start:ext.stop], ext.src_moduli, part.basis.moduli, ext.qhat_inv,
                          ext.qhat_inv_shoup, part.qhat_mod_p, plan=ctx.plan, out=rows)
                part.basis.ntt(rows, out=rows)
        return out


def _mod_up_all_digits(ctx: RLWEContext, t, d: torch.Tensor, coeffs: torch.Tensor) -> torch.Tensor:
    """ModUp in two launches (``ctx.plan.mod_up_in_one_launch``; instead of ~7 per large digit): one Conv of every
    digit to every row outside it, the digits' own rows copied from d (NTT domain, exact) in the same kernel
    (ops.mod_up_conv with ``own``), then one NTT over all digits that skips those rows. Equal to the
    per-digit path bit for bit."""
    out = _mod_up_conv_all_digits(ctx, t, d, coeffs)
    return t.qp.ntt(out, skip=_own_rows(ctx), out=out)


def _mod_up_conv_all_digits(ctx: RLWEContext, t, d: torch.Tensor, coeffs: torch.Tensor,
                            copy_own: bool = True) -> torch.Tensor:
    """The Conv of :func:`_mod_up_all_digits`: ``[dnum_l, alpha + l + 1, N]``, coefficients in [0, 4p) (lazy: the
    NTT that follows takes them) outside the digits' own rows, d's NTT-domain rows on them (``copy_own``; else
    those rows are left unwritten, for :func:`ntt_inner_product` to read from d). Hybrid only."""
    _hybrid_only(ctx, "mod_up")
    b = t.batched_mod_up
    return ops.mod_up_conv(coeffs, t.q.moduli, b.qhat_inv, b.qhat_inv_shoup, t.qp.moduli, b.qhat_mod_p, d,
                           lazy=True, fragments=b.mma_fragments, copy_own=copy_own, plan=ctx.plan)


def _own_rows(ctx: RLWEContext) -> tuple[int, int, int]:
    """The NTT skip of the digits' own rows: digit j's are alpha + j * alpha onwards, alpha of them (fewer in the
    last)."""
    return (ctx.alpha, ctx.alpha, ctx.alpha)


def mod_up_inner_product(ctx: RLWEContext, d: torch.Tensor, key: SwitchingKey, level: int,
                         coeffs: torch.Tensor | None = None) -> torch.Tensor:
    """``inner_product(decompose_mod_up(d))``, ``[2, alpha + l + 1, N]``; ``coeffs``: INTT(d)
    if the caller has it. With ``ctx.plan.inner_product_in_mod_up`` the Conv, then one op for the NTT and the inner
    product (equal bit for bit), which reads the digits' own rows from d (the Conv does not copy them)."""
    if not ctx.plan.inner_product_in_mod_up:
        return inner_product(ctx, decompose_mod_up(ctx, d, level, coeffs), key, level)
    t = ctx.tables(level)
    with _step("mod_up", ctx.device):
        digits = _mod_up_conv_all_digits(ctx, t, d, t.q.intt(d) if coeffs is None else coeffs, copy_own=False)
    return ntt_inner_product(ctx, digits, key, level, d)


def ntt_inner_product(ctx: RLWEContext, digits: torch.Tensor, key: SwitchingKey, level: int, own: torch.Tensor,
                      own_galois: int = 1, tensor: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """The forward NTT of :func:`_mod_up_conv_all_digits`' output (``copy_own=False``) and the inner product, one op
    (digits: scratch), the own rows read from ``own`` (d over Q_l; with own_galois k, sigma_k(own)); with ``tensor``
    = (a, b) (:func:`relinearize_product`) plus (P mod q_i) * HMult's tensor terms on the Q rows."""
    t = ctx.tables(level)
    rows = len(t.qp)
    p_mod_q = None if tensor is None else ctx.p_mod_q[:len(t.q)]
    with _step("mod_up_inner_product", ctx.device):
        return ops.ntt_inner_product(digits, t.qp.moduli, t.qp.ntt_table, key.data, rows, rows, skip=_own_rows(ctx),
                                     own=own, own_galois=own_galois, tensor=tensor, p_mod_q=p_mod_q, plan=ctx.plan)


def inner_product(ctx: RLWEContext, digits: torch.Tensor, key: SwitchingKey, level: int) -> torch.Tensor:
    """sum_j digits_j * (b_j, a_j) over QP_l: ``[2, alpha + l + 1, N]`` from digits ``[dnum_l, alpha + l + 1, N]``
    (NTT domain, possibly permuted by an automorphism) and a switching key (its level-l part a prefix view). Hybrid
    only."""
    _hybrid_only(ctx, "inner_product")
    t = ctx.tables(level)
    rows = len(t.qp)
    with _step("inner_product", ctx.device):
        # One fused pass (128-bit accumulation, one reduction). Under the (P, Q_l) layout the
        # level-l rows of the key are its first `rows` rows, so the row map is the identity.
        return ops.ks_inner_product(digits, key.data, rows, rows, t.qp.moduli)


def inner_product_into(ctx: RLWEContext, digits: torch.Tensor, key: SwitchingKey, level: int, out: torch.Tensor,
                       *, galois: int = 1, add: torch.Tensor | None = None, add_galois: int = 1,
                       accumulate: bool = False) -> torch.Tensor:
    """:func:`inner_product` into ``out`` (``[2, alpha + l + 1, N]``, its components may be apart), with
    the digits read through sigma_galois, ``add`` (``[a, N]``: the last a rows) read through
    sigma_add_galois and added to component 0, and (``accumulate``) out's previous contents added: one
    pass (ops.ks_inner_product_fused) where the composed ops make a permuted copy and an addition each."""
    rows = len(ctx.tables(level).qp)
    with _step("inner_product", ctx.device):
        return ops.ks_inner_product_fused(digits, key.data, rows, rows, ctx.qp_at(level).moduli, out=out,
                                          galois=galois, add=add, add_galois=add_galois, accumulate=accumulate)


def inner_product_babies_into(ctx: RLWEContext, digits: torch.Tensor, keys: list[SwitchingKey], elements: list[int],
                              positions: list[int], level: int, out: torch.Tensor,
                              add: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`inner_product_into` with galois=add_galois=elements[b] and keys[b] into out[positions[b]] for
    every b, one launch sharing the digit reads (ops.ks_inner_product_babies)."""
    rows = len(ctx.tables(level).qp)
    with _step("inner_product", ctx.device):
        return ops.ks_inner_product_babies(digits, [k.data for k in keys], elements, positions, rows, rows,
                                           ctx.qp_at(level).moduli, out=out, add=add)


def inner_product_pair_into(ctx: RLWEContext, digits_a: torch.Tensor, digits_b: torch.Tensor, key: SwitchingKey,
                            level: int, out: torch.Tensor) -> torch.Tensor:
    """:func:`inner_product` of two digit sets with one key into ``out`` ``[2 (component), 2 (set),
    alpha + l + 1, N]``, the key read once for both (ops.ks_inner_product_pair)."""
    rows = len(ctx.tables(level).qp)
    with _step("inner_product", ctx.device):
        return ops.ks_inner_product_pair(digits_a, digits_b, key.data, rows, rows, ctx.qp_at(level).moduli, out=out)


def mod_down(ctx: RLWEContext, c: torch.Tensor, level: int, add: torch.Tensor | None = None,
             add_galois: int = 1) -> torch.Tensor:
    """round(c / P) from QP_l to Q_l for c ``[..., alpha + l + 1, N]`` (NTT domain): ``[..., l + 1, N]`` (see
    :func:`fhe_core.rlwe.keyswitch.mod_down`), plus ``add`` (``[B', l+1, N]``, B' <= the batch of c; with
    ``add_galois`` k != 1, sigma_k(add)) on the first B' components, in the same pass as ModDown's last step."""
    t = ctx.tables(level)
    alpha, rows = ctx.alpha, len(t.qp)
    batch = c.reshape(-1, rows, ctx.n)  # a view; a copy only if the [rows, N] blocks are not contiguous
    if batch.stride(-1) != 1 or batch.stride(-2) != ctx.n:
        batch = batch.contiguous()
    with _step("mod_down", ctx.device):
        c_p = ctx.p_basis.intt(batch[:, :alpha])                        # every component's P rows, one launch
        conv = t.p_to_q(c_p, exact=True, lazy=True)                     # [c]_P, centred, over Q_l (< 3q: NTT next)
        out = ops.mod_down_ntt(conv, batch, alpha, t.p_inv, t.p_inv_shoup, t.q.moduli, t.q.ntt_table, add,
                               add_galois=add_galois, plan=ctx.plan, out=conv)  # NTT and (c - conv) P^-1, one pass
    return out.reshape(*c.shape[:-2], level + 1, ctx.n)


def key_switch(ctx: RLWEContext, d: torch.Tensor, key: SwitchingKey, level: int,
               add: torch.Tensor | None = None) -> torch.Tensor:
    """(u0, u1) with u0 + u1 s = d s' + e_ks for a key s' -> s: ``[2, l+1, N]`` from d ``[l+1, N]`` (NTT domain),
    plus ``add`` on the first components (see :func:`mod_down`); either method."""
    if _linear(ctx):
        with _step("linear_key_switch", ctx.device):
            return linear_switching.key_switch(ctx, d, key, level, add)
    return mod_down(ctx, mod_up_inner_product(ctx, d, key, level), level, add)


def relinearize(ctx: RLWEContext, ct: Ciphertext, key: SwitchingKey, level: int) -> Ciphertext:
    """(d0, d1, d2) under (1, s, s^2) -> (d0, d1) + key_switch(d2, s^2 -> s), for a degree-2 ciphertext at
    ``level`` and a relinearization key."""
    data = ct.data.contiguous()  # (a no-op but for a hand-made strided view: the kernels want dense rows)
    return ct.replace(data=key_switch(ctx, data[2], key, level, add=data[:2]))


def relinearize_product(ctx: RLWEContext, a: torch.Tensor, b: torch.Tensor, key: SwitchingKey,
                        level: int) -> torch.Tensor:
    """relinearize(tensor(a, b)) for degree-1 data a, b (contiguous ``[2, l+1, N]``, NTT domain, at ``level``) and a
    relinearization key: ``[2, l+1, N]``. Where the plan puts HMult's tensor terms in the
    inner product (:meth:`fhe_core.ops.KernelPlan.tensor_in_inner_product`), without the tensor product's pass and
    its three rows: ModUp's inverse NTT reads a1 and b1 and stores d2 = a1 b1 for the digits' own rows
    (ops.intt_product), and the inner product's kernel adds (P mod q_i) (a0 b0, a0 b1 + a1 b0) to its Q rows, which
    ModDown turns into (a0 b0, a0 b1 + a1 b0) mod q_i (its Conv reads only the P rows, so (x + P t - Conv) P^-1 =
    (x - Conv) P^-1 + t). Else the tensor product, then :func:`relinearize`: the same words bit for bit."""
    t = ctx.tables(level)
    if _linear(ctx) or not ctx.plan.tensor_in_inner_product(ctx.digit_count(level)):
        with _step("tensor_product", ctx.device):
            data = ops.tensor_product(a, b, t.q.moduli)
        return key_switch(ctx, data[2], key, level, add=data[:2])
    with _step("tensor_mod_up", ctx.device):
        coeffs, d2 = ops.intt_product(a[1], b[1], t.q.moduli, t.q.ntt_table, plan=ctx.plan)
    with _step("mod_up", ctx.device):
        digits = _mod_up_conv_all_digits(ctx, t, d2, coeffs, copy_own=False)
    return mod_down(ctx, ntt_inner_product(ctx, digits, key, level, d2, tensor=(a, b)), level)


def apply_galois(ctx: RLWEContext, ct: Ciphertext, k: int, key: SwitchingKey, level: int) -> Ciphertext:
    """sigma_k(ct) for a degree-1 ciphertext at ``level``, a Galois element and its key: (sigma_k(c0) + u0, u1) with
    (u0, u1) = key_switch(sigma_k(c1), sigma_k(s) -> s)."""
    data = ct.data.contiguous()  # (a hand-made view may be strided)
    return ct.replace(data=_key_switch_galois(ctx, data, k, key, level))


def _key_switch_galois(ctx: RLWEContext, data: torch.Tensor, k: int, key: SwitchingKey, level: int) -> torch.Tensor:
    """(sigma_k(c0), 0) + key_switch(sigma_k(c1)) for contiguous ``data`` = (c0, c1): ModUp's inverse NTT reads
    sigma_k(c1) from c1 and stores it for the digits' own rows (ops.intt_galois), ModDown's last store adds
    sigma_k(c0) read from c0 (on the reference kernels and the CPU, each an automorphism pass first: the same
    words). With the inner product in ModUp's NTT (``ctx.plan.inner_product_in_mod_up``) its kernel reads the own
    rows of sigma_k(c1) from c1 too, and nothing stores sigma_k(c1). Linear: the key switch of sigma_k(c1)."""
    t = ctx.tables(level)
    if _linear(ctx):
        with _step("linear_key_switch", ctx.device):
            c1 = ops.automorphism_ntt(data[1], t.q.moduli, k)
            return linear_switching.key_switch(ctx, c1, key, level, add=data[:1], add_galois=k)
    if ctx.plan.inner_product_in_mod_up:  # sigma_k(c1)'s own rows read from c1 by the inner product's kernel
        with _step("mod_up", ctx.device):
            coeffs, _ = ops.intt_galois(data[1], t.q.moduli, t.q.ntt_table, k, store_permuted=False, plan=ctx.plan)
            digits = _mod_up_conv_all_digits(ctx, t, data[1], coeffs, copy_own=False)  # (data[1]: marks the rows)
        extended = ntt_inner_product(ctx, digits, key, level, data[1], k)
    else:
        coeffs, d = ops.intt_galois(data[1], t.q.moduli, t.q.ntt_table, k, plan=ctx.plan)
        extended = inner_product(ctx, decompose_mod_up(ctx, d, level, coeffs), key, level)
    return mod_down(ctx, extended, level, add=data[:1], add_galois=k)


def apply_galois_hoisted(ctx: RLWEContext, ct: Ciphertext, galois_keys: dict[int, SwitchingKey],
                         level: int) -> dict[int, Ciphertext]:
    """sigma_k(ct) for every Galois element k of ``galois_keys`` (element -> key), one ModUp shared (hoisting):
    the extended digits permuted by sigma_k per element, then its inner product and ModDown (linear: the lifted
    digits shared, :func:`linear_switching.rotate_hoisted`)."""
    if _linear(ctx):
        with _step("linear_hoisted_rotations", ctx.device):
            rotated = linear_switching.rotate_hoisted(ctx, ct.data.contiguous(), galois_keys, level)
        return {k: ct.replace(data=data) for k, data in rotated.items()}
    qp = ctx.qp_at(level)
    digits = decompose_mod_up(ctx, ct.data[1], level)
    c0 = ct.data[:1].contiguous()
    results = {}
    for k in galois_keys:
        with _step(f"hoisted_rotation_{k}", ctx.device):
            extended = inner_product(ctx, ops.automorphism_ntt(digits, qp.moduli, k), galois_keys[k], level)
            out = mod_down(ctx, extended, level, add=c0, add_galois=k)  # sigma_k(c0) read by ModDown's last store
        results[k] = ct.replace(data=out)
    return results
