"""Hybrid key switching (HK20) and the operations built on it: the checked entry points.

For d over Q_l and a switching key s' -> s, key switching returns (u0, u1) over Q_l with
u0 + u1 s = d s' + e_ks, in three steps:

    decompose_mod_up   d -> dnum_l digits [d]_{Q_j}, each extended to QP_l = (P, Q_l)
    inner_product      (sum_j d~_j b_j, sum_j d~_j a_j) over QP_l
    mod_down           divide by P with rounding, back to Q_l

Noise: e_ks = sum_j d~_j e_j / P + (eps_0 - u_0) + (eps_1 - u_1) s with |d~_j| < alpha Q_j,
|eps_c| <= 1/2 (rounding) and 0 <= u_c < alpha (fast conversion in ModDown). Worst case
dnum_l alpha eta N max_j(Q_j) / P + (alpha - 1/2)(1 + |s|_1); with P >= Q_j the rounding term
dominates (measured 2^4.5..2^7 at N = 2^10..2^12, see tests/fhe_core/rlwe).
Apply Galois / relinearize / hoisted rotations sit on top.

Checks once: every function here checks its inputs, then calls the step of the same name in
:mod:`fhe_core.rlwe.switching`, which takes checked inputs and checks nothing (nor do the steps it
calls); the scheme evaluators call those after their own entry checks.
"""
from __future__ import annotations

from collections.abc import Iterable

import torch

from fhe_core.errors import ParameterError
from fhe_core.rlwe import switching
from fhe_core.rlwe.checks import check_ciphertext, check_params_id, check_tensor
from fhe_core.rlwe.ciphertext import Ciphertext
from fhe_core.rlwe.context import RLWEContext
from fhe_core.rlwe.galois import check_galois_element
from fhe_core.rlwe.keys import EvalKeySet, SwitchingKey, check_switching_key


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
    return switching.decompose_mod_up(ctx, d, level)


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
    return switching.inner_product(ctx, digits, key, level)


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
    return switching.mod_down(ctx, c, level)


def key_switch(ctx: RLWEContext, d: torch.Tensor, key: SwitchingKey, level: int) -> torch.Tensor:
    """(u0, u1) with u0 + u1 s = d s' + e_ks for a key s' -> s.

    d: ``[l+1, N]`` int64, NTT domain over Q_l. Returns ``[2, l+1, N]`` int64, NTT domain over
    Q_l. Consumes no level.
    """
    check_switching_key(ctx, key, "key_switch")
    level = ctx.check_level(level, "key_switch")
    check_tensor(ctx, d, (level + 1, ctx.n), "key_switch", "d")
    return switching.key_switch(ctx, d, key, level)


def relinearize(ctx: RLWEContext, ct: Ciphertext, keys: EvalKeySet) -> Ciphertext:
    """(d0, d1, d2) under (1, s, s^2) -> (d0, d1) + key_switch(d2, s^2 -> s).

    ct: degree 2, ``[3, l+1, N]`` NTT domain. Returns degree 1 at the same level (and scale).
    Needs the relinearization key; consumes no level.
    """
    op = "relinearize"
    level = check_ciphertext(ctx, ct, op, degree=2)
    key = _key_set(ctx, keys, op).relin_key(op)
    check_switching_key(ctx, key, op)
    return switching.relinearize(ctx, ct, key, level)


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
    return switching.apply_galois(ctx, ct, k, key, level)


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
    return switching.apply_galois_hoisted(ctx, ct, galois_keys, level)


def _key_set(ctx: RLWEContext, keys: EvalKeySet, op: str) -> EvalKeySet:
    if not isinstance(keys, EvalKeySet):
        raise ParameterError(f"{op}: expected an EvalKeySet, got {type(keys).__name__}")
    check_params_id(ctx, keys, op, "the key set")
    return keys
