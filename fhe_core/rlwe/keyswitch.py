"""Hybrid key switching (HK20) and the operations built on it.

For d over Q_l and a switching key s' -> s, key switching returns (u0, u1) over Q_l with
u0 + u1 s = d s' + e_ks, in three steps:

    decompose_mod_up   d -> dnum_l digits [d]_{Q_j}, each extended to QP_l = (P, Q_l)
    inner_product      (sum_j d~_j b_j, sum_j d~_j a_j) over QP_l
    mod_down           divide by P with rounding, back to Q_l

Noise: e_ks = sum_j d~_j e_j / P + (eps_0 - u_0) + (eps_1 - u_1) s with |d~_j| < alpha Q_j,
|eps_c| <= 1/2 (rounding) and 0 <= u_c < alpha (fast conversion in ModDown). Worst case
dnum_l alpha eta N max_j(Q_j) / P + (alpha - 1/2)(1 + |s|_1); with P >= Q_j the rounding term
dominates (measured 2^4.5..2^7 at N = 2^10..2^12, see tests/fhe_core/rlwe).
Each step runs as a handful of batched ops (loops only over digits and components) and is
wrapped in an NVTX range on CUDA. Apply Galois / relinearize / hoisted rotations sit on top. Where a
step has a tuned composition, the context's plan (``ctx.plan``, :class:`fhe_core.ops.KernelPlan`) picks
it or the reference; both give the same residues.

Checks once: every public function checks its inputs and calls its ``_``-prefixed twin, which
takes checked inputs and checks nothing (nor do the steps it calls); the scheme evaluators call
the twins after their own entry checks.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterable

import torch

from fhe_core import ops
from fhe_core.errors import ParameterError
from fhe_core.rlwe.checks import check_ciphertext, check_params_id, check_tensor
from fhe_core.rlwe.ciphertext import Ciphertext
from fhe_core.rlwe import context as _context
from fhe_core.rlwe.context import RLWEContext
from fhe_core.rlwe.galois import check_galois_element
from fhe_core.rlwe.keys import EvalKeySet, SwitchingKey, check_switching_key


def _step(name: str, device: torch.device):
    """An NVTX range on CUDA (profiles read as the algorithm), nothing elsewhere."""
    return torch.cuda.nvtx.range(name) if device.type == "cuda" else contextlib.nullcontext()


def decompose_mod_up(ctx: RLWEContext, d: torch.Tensor, level: int) -> torch.Tensor:
    """ModUp of the gadget digits of d.

    d: ``[l+1, N]`` int64, NTT domain over Q_l.
    Returns ``[dnum_l, alpha + l + 1, N]`` int64, NTT domain over QP_l: row block j is
    [d]_{Q_j} + u_j Q_j (0 <= u_j < |D_j|) extended to every prime of QP_l, and equals d on
    the primes of digit j (copied: only the other rows are converted and transformed).
    dnum_l = ceil((l+1)/alpha). Consumes no level; needs no key.
    """
    level = ctx.check_level(level, "decompose_mod_up")
    check_tensor(ctx, d, (level + 1, ctx.n), "decompose_mod_up", "d")
    return _decompose_mod_up(ctx, d, level)


def _decompose_mod_up(ctx: RLWEContext, d: torch.Tensor, level: int,
                      coeffs: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`decompose_mod_up` of checked inputs; ``coeffs``: INTT(d) if the caller has it (several
    inputs transformed in one launch)."""
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
    those rows are left unwritten, for :func:`_ntt_inner_product` to read from d)."""
    b = t.batched_mod_up
    return ops.mod_up_conv(coeffs, t.q.moduli, b.qhat_inv, b.qhat_inv_shoup, t.qp.moduli, b.qhat_mod_p, d,
                           lazy=True, fragments=b.mma_fragments, copy_own=copy_own, plan=ctx.plan)


def _own_rows(ctx: RLWEContext) -> tuple[int, int, int]:
    """The NTT skip of the digits' own rows: digit j's are alpha + j * alpha onwards, alpha of them (fewer in the
    last)."""
    return (ctx.alpha, ctx.alpha, ctx.alpha)


def _mod_up_inner_product(ctx: RLWEContext, d: torch.Tensor, key: SwitchingKey, level: int,
                          coeffs: torch.Tensor | None = None) -> torch.Tensor:
    """``_inner_product(_decompose_mod_up(d))`` of checked inputs, ``[2, alpha + l + 1, N]``; ``coeffs``: INTT(d)
    if the caller has it. With ``ctx.plan.inner_product_in_mod_up`` the Conv, then one op for the NTT and the inner
    product (equal bit for bit), which reads the digits' own rows from d (the Conv does not copy them)."""
    if not ctx.plan.inner_product_in_mod_up:
        return _inner_product(ctx, _decompose_mod_up(ctx, d, level, coeffs), key, level)
    t = ctx.tables(level)
    with _step("mod_up", ctx.device):
        digits = _mod_up_conv_all_digits(ctx, t, d, t.q.intt(d) if coeffs is None else coeffs, copy_own=False)
    return _ntt_inner_product(ctx, t, digits, key, d)


def _ntt_inner_product(ctx: RLWEContext, t, digits: torch.Tensor, key: SwitchingKey, own: torch.Tensor,
                       own_galois: int = 1, tensor: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """The forward NTT of :func:`_mod_up_conv_all_digits`' output (``copy_own=False``) and the inner product, one op
    (digits: scratch), the own rows read from ``own`` (d over Q_l; with own_galois k, sigma_k(own)); with ``tensor``
    = (a, b) (:func:`_relinearize_product`) plus (P mod q_i) * HMult's tensor terms on the Q rows."""
    rows = len(t.qp)
    p_mod_q = None if tensor is None else ctx.p_mod_q[:len(t.q)]
    with _step("mod_up_inner_product", ctx.device):
        return ops.ntt_inner_product(digits, t.qp.moduli, t.qp.ntt_table, key.data, rows, rows, skip=_own_rows(ctx),
                                     own=own, own_galois=own_galois, tensor=tensor, p_mod_q=p_mod_q, plan=ctx.plan)


def inner_product(ctx: RLWEContext, digits: torch.Tensor, key: SwitchingKey, level: int) -> torch.Tensor:
    """sum_j digits_j * (b_j, a_j) over QP_l.

    digits: ``[dnum_l, alpha + l + 1, N]`` NTT domain (from :func:`decompose_mod_up`, possibly
    permuted by an automorphism); key: a switching key (its level-l part is a prefix view).
    Returns ``[2, alpha + l + 1, N]`` int64, NTT domain over QP_l.
    """
    op = "inner_product"
    level = ctx.check_level(level, op)
    check_switching_key(ctx, key, op)
    t = ctx.tables(level)
    check_tensor(ctx, digits, (len(t.digits), len(t.qp), ctx.n), op, "digits")
    return _inner_product(ctx, digits, key, level)


def _inner_product(ctx: RLWEContext, digits: torch.Tensor, key: SwitchingKey, level: int) -> torch.Tensor:
    """:func:`inner_product` of checked inputs."""
    t = ctx.tables(level)
    rows = len(t.qp)
    with _step("inner_product", ctx.device):
        # One fused pass (128-bit accumulation, one reduction). Under the (P, Q_l) layout the
        # level-l rows of the key are its first `rows` rows, so the row map is the identity.
        return ops.ks_inner_product(digits, key.data, rows, rows, t.qp.moduli)


def _inner_product_into(ctx: RLWEContext, digits: torch.Tensor, key: SwitchingKey, level: int, out: torch.Tensor,
                        *, galois: int = 1, add: torch.Tensor | None = None, add_galois: int = 1,
                        accumulate: bool = False) -> torch.Tensor:
    """:func:`_inner_product` into ``out`` (``[2, alpha + l + 1, N]``, its components may be apart), with
    the digits read through sigma_galois, ``add`` (``[a, N]``: the last a rows) read through
    sigma_add_galois and added to component 0, and (``accumulate``) out's previous contents added: one
    pass (ops.ks_inner_product_fused) where the composed ops make a permuted copy and an addition each."""
    rows = len(ctx.tables(level).qp)
    with _step("inner_product", ctx.device):
        return ops.ks_inner_product_fused(digits, key.data, rows, rows, ctx.qp_at(level).moduli, out=out,
                                          galois=galois, add=add, add_galois=add_galois, accumulate=accumulate)


def _inner_product_babies_into(ctx: RLWEContext, digits: torch.Tensor, keys: list[SwitchingKey], elements: list[int],
                               positions: list[int], level: int, out: torch.Tensor,
                               add: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`_inner_product_into` with galois=add_galois=elements[b] and keys[b] into out[positions[b]] for
    every b, one launch sharing the digit reads (ops.ks_inner_product_babies)."""
    rows = len(ctx.tables(level).qp)
    with _step("inner_product", ctx.device):
        return ops.ks_inner_product_babies(digits, [k.data for k in keys], elements, positions, rows, rows,
                                           ctx.qp_at(level).moduli, out=out, add=add)


def _inner_product_pair_into(ctx: RLWEContext, digits_a: torch.Tensor, digits_b: torch.Tensor, key: SwitchingKey,
                             level: int, out: torch.Tensor) -> torch.Tensor:
    """:func:`_inner_product` of two digit sets with one key into ``out`` ``[2 (component), 2 (set),
    alpha + l + 1, N]``, the key read once for both (ops.ks_inner_product_pair)."""
    rows = len(ctx.tables(level).qp)
    with _step("inner_product", ctx.device):
        return ops.ks_inner_product_pair(digits_a, digits_b, key.data, rows, rows, ctx.qp_at(level).moduli, out=out)


def mod_down(ctx: RLWEContext, c: torch.Tensor, level: int) -> torch.Tensor:
    """round(c / P) from QP_l to Q_l.

    c: ``[..., alpha + l + 1, N]`` int64, NTT domain over QP_l.
    Returns ``[..., l+1, N]`` int64, NTT domain over Q_l, equal to round(c / P):
    (c - Conv_{P->Q}([c]_P)) * P^-1 with the exact, centred conversion of [c]_P. The fast one
    would leave an extra -u, 0 <= u < alpha, per coefficient: an error of mean -(alpha - 1)/2 in
    every coefficient of both components, whose constant part decodes to ~N/pi times that in the
    slots near X = 1 (2^-20 errors on a few slots of an N = 2^12 bootstrap with alpha = 5, where
    the random noise is ~2^-29).
    """
    op = "mod_down"
    level = ctx.check_level(level, op)
    rows = len(ctx.tables(level).qp)
    if c.dim() < 2:
        raise ParameterError(f"{op}: c must be [..., {rows}, {ctx.n}], got {list(c.shape)}")
    check_tensor(ctx, c, (*c.shape[:-2], rows, ctx.n), op, "c")
    return _mod_down(ctx, c, level)


def _mod_down(ctx: RLWEContext, c: torch.Tensor, level: int, add: torch.Tensor | None = None,
              add_galois: int = 1) -> torch.Tensor:
    """:func:`mod_down` of checked inputs, plus ``add`` (``[B', l+1, N]``, B' <= the batch of c; with
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


def key_switch(ctx: RLWEContext, d: torch.Tensor, key: SwitchingKey, level: int) -> torch.Tensor:
    """(u0, u1) with u0 + u1 s = d s' + e_ks for a key s' -> s.

    d: ``[l+1, N]`` int64, NTT domain over Q_l. Returns ``[2, l+1, N]`` int64, NTT domain over
    Q_l. Consumes no level.
    """
    check_switching_key(ctx, key, "key_switch")
    level = ctx.check_level(level, "key_switch")
    check_tensor(ctx, d, (level + 1, ctx.n), "key_switch", "d")
    return _key_switch(ctx, d, key, level)


def _key_switch(ctx: RLWEContext, d: torch.Tensor, key: SwitchingKey, level: int,
                add: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`key_switch` of checked inputs (no check repeated on the way down), plus ``add`` on the
    first components (see :func:`_mod_down`)."""
    return _mod_down(ctx, _mod_up_inner_product(ctx, d, key, level), level, add)


def relinearize(ctx: RLWEContext, ct: Ciphertext, keys: EvalKeySet) -> Ciphertext:
    """(d0, d1, d2) under (1, s, s^2) -> (d0, d1) + key_switch(d2, s^2 -> s).

    ct: degree 2, ``[3, l+1, N]`` NTT domain. Returns degree 1 at the same level (and scale).
    Needs the relinearization key; consumes no level.
    """
    op = "relinearize"
    level = check_ciphertext(ctx, ct, op, degree=2)
    key = _key_set(ctx, keys, op).relin_key(op)
    check_switching_key(ctx, key, op)
    return _relinearize(ctx, ct, key, level)


def _relinearize(ctx: RLWEContext, ct: Ciphertext, key: SwitchingKey, level: int) -> Ciphertext:
    """:func:`relinearize` of a checked degree-2 ciphertext at ``level`` and a checked key."""
    data = ct.data.contiguous()  # (a no-op but for a hand-made strided view: the kernels want dense rows)
    return ct.replace(data=_key_switch(ctx, data[2], key, level, add=data[:2]))


def _relinearize_product(ctx: RLWEContext, a: torch.Tensor, b: torch.Tensor, key: SwitchingKey,
                         level: int) -> torch.Tensor:
    """relinearize(tensor(a, b)) for checked degree-1 data a, b (contiguous ``[2, l+1, N]``, NTT domain, at
    ``level``) and a checked relinearization key: ``[2, l+1, N]``. Where the plan puts HMult's tensor terms in the
    inner product (:meth:`fhe_core.ops.KernelPlan.tensor_in_inner_product`), without the tensor product's pass and
    its three rows: ModUp's inverse NTT reads a1 and b1 and stores d2 = a1 b1 for the digits' own rows
    (ops.intt_product), and the inner product's kernel adds (P mod q_i) (a0 b0, a0 b1 + a1 b0) to its Q rows, which
    ModDown turns into (a0 b0, a0 b1 + a1 b0) mod q_i (its Conv reads only the P rows, so (x + P t - Conv) P^-1 =
    (x - Conv) P^-1 + t). Else the tensor product, then :func:`_relinearize`: the same words bit for bit."""
    t = ctx.tables(level)
    if not ctx.plan.tensor_in_inner_product(ctx.digit_count(level)):
        with _step("tensor_product", ctx.device):
            data = ops.tensor_product(a, b, t.q.moduli)
        return _key_switch(ctx, data[2], key, level, add=data[:2])
    with _step("tensor_mod_up", ctx.device):
        coeffs, d2 = ops.intt_product(a[1], b[1], t.q.moduli, t.q.ntt_table, plan=ctx.plan)
    with _step("mod_up", ctx.device):
        digits = _mod_up_conv_all_digits(ctx, t, d2, coeffs, copy_own=False)
    return _mod_down(ctx, _ntt_inner_product(ctx, t, digits, key, d2, tensor=(a, b)), level)


def apply_galois(ctx: RLWEContext, ct: Ciphertext, galois_element: int, keys: EvalKeySet) -> Ciphertext:
    """sigma_k(ct): decrypts to sigma_k(m) under s.

    (sigma_k(c0) + u0, u1) with (u0, u1) = key_switch(sigma_k(c1), sigma_k(s) -> s).
    ct: degree 1, ``[2, l+1, N]`` NTT domain. Needs the Galois key of k; consumes no level.
    """
    op = "apply_galois"
    level = check_ciphertext(ctx, ct, op)
    k = check_galois_element(galois_element, ctx.n, op)
    key = _key_set(ctx, keys, op).galois_key(k, op)
    check_switching_key(ctx, key, op)
    return _apply_galois(ctx, ct, k, key, level)


def _apply_galois(ctx: RLWEContext, ct: Ciphertext, k: int, key: SwitchingKey, level: int) -> Ciphertext:
    """:func:`apply_galois` of a checked degree-1 ciphertext at ``level``, element and key."""
    data = ct.data.contiguous()  # (a hand-made view may be strided)
    return ct.replace(data=_key_switch_galois(ctx, data, k, key, level))


def _key_switch_galois(ctx: RLWEContext, data: torch.Tensor, k: int, key: SwitchingKey, level: int) -> torch.Tensor:
    """(sigma_k(c0), 0) + key_switch(sigma_k(c1)) for contiguous ``data`` = (c0, c1): ModUp's inverse NTT reads
    sigma_k(c1) from c1 and stores it for the digits' own rows (ops.intt_galois), ModDown's last store adds
    sigma_k(c0) read from c0 (on the reference kernels and the CPU, each an automorphism pass first: the same
    words). With the inner product in ModUp's NTT (``ctx.plan.inner_product_in_mod_up``) its kernel reads the own
    rows of sigma_k(c1) from c1 too, and nothing stores sigma_k(c1)."""
    t = ctx.tables(level)
    if ctx.plan.inner_product_in_mod_up:  # sigma_k(c1)'s own rows read from c1 by the inner product's kernel
        with _step("mod_up", ctx.device):
            coeffs, _ = ops.intt_galois(data[1], t.q.moduli, t.q.ntt_table, k, store_permuted=False, plan=ctx.plan)
            digits = _mod_up_conv_all_digits(ctx, t, data[1], coeffs, copy_own=False)  # (data[1]: marks the rows)
        extended = _ntt_inner_product(ctx, t, digits, key, data[1], k)
    else:
        coeffs, d = ops.intt_galois(data[1], t.q.moduli, t.q.ntt_table, k, plan=ctx.plan)
        extended = _inner_product(ctx, _decompose_mod_up(ctx, d, level, coeffs), key, level)
    return _mod_down(ctx, extended, level, add=data[:1], add_galois=k)


def apply_galois_hoisted(ctx: RLWEContext, ct: Ciphertext, galois_elements: Iterable[int],
                         keys: EvalKeySet) -> dict[int, Ciphertext]:
    """sigma_k(ct) for several k sharing one ModUp (hoisting).

    decompose_mod_up(c1) runs once; for each k the extended digits are permuted by sigma_k
    (an NTT-domain index permutation, valid on QP_l), then inner product and ModDown run per
    k. The results decrypt like :func:`apply_galois` (the noise differs slightly: sigma_k of
    an extended digit is another valid extension). Needs a Galois key for every k (all are
    checked before any work); consumes no level.
    """
    op = "apply_galois_hoisted"
    level = check_ciphertext(ctx, ct, op)
    elements = [check_galois_element(k, ctx.n, op) for k in dict.fromkeys(galois_elements)]
    key_set = _key_set(ctx, keys, op)
    galois_keys = {k: key_set.galois_key(k, op) for k in elements}
    for key in galois_keys.values():
        check_switching_key(ctx, key, op)
    return _apply_galois_hoisted(ctx, ct, galois_keys, level)


def _apply_galois_hoisted(ctx: RLWEContext, ct: Ciphertext, galois_keys: dict[int, SwitchingKey],
                          level: int) -> dict[int, Ciphertext]:
    """:func:`apply_galois_hoisted` of a checked degree-1 ciphertext at ``level`` and checked
    keys by element."""
    qp = ctx.qp_at(level)
    digits = _decompose_mod_up(ctx, ct.data[1], level)
    c0 = ct.data[:1].contiguous()
    results = {}
    for k in galois_keys:
        with _step(f"hoisted_rotation_{k}", ctx.device):
            extended = _inner_product(ctx, ops.automorphism_ntt(digits, qp.moduli, k), galois_keys[k], level)
            out = _mod_down(ctx, extended, level, add=c0, add_galois=k)  # sigma_k(c0) read by ModDown's last store
        results[k] = ct.replace(data=out)
    return results


def _key_set(ctx: RLWEContext, keys: EvalKeySet, op: str) -> EvalKeySet:
    if not isinstance(keys, EvalKeySet):
        raise ParameterError(f"{op}: expected an EvalKeySet, got {type(keys).__name__}")
    check_params_id(ctx, keys, op, "the key set")
    return keys
