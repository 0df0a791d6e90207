"""ModRaise: a level-0 CKKS ciphertext lifted, unchanged as integer polynomials, to the full chain.

A ciphertext (c_0, c_1) at level 0 decrypts to m = [c_0 + c_1 s]_(q_0) (centred). Taking the
centred representatives of c_0 and c_1 in (-q_0/2, q_0/2] and reading them modulo
Q_L = q_0 ... q_L instead gives a ciphertext that decrypts to

    c_0 + c_1 s = m + q_0 * I(X)   over Q_L,   I an integer polynomial,

exactly, as long as |m + q_0 I| < Q_L / 2. Since |c_1 s|_inf <= h * q_0 / 2 for a ternary secret
of Hamming weight h (each coefficient of c_1 s is a signed sum of h coefficients of c_1),
|c_0 + c_1 s| <= (h + 1) q_0 / 2 and |I|_inf <= (h + 1) / 2 + |m| / q_0: a worst case; for random
c_1 the coefficients of I behave like sums of h uniform values, of size about sqrt(h / 12).
EvalMod removes q_0 I afterwards.

With sparse-secret encapsulation (:func:`mod_raise_encapsulated`) the ciphertext is first switched to a
sparse ephemeral secret s' (weight h') at level 0 and raised under it, so I is bounded by h' instead
of the main secret's weight; the raised c_1's lift to QP_L is switched back to the main secret
(:mod:`fhe_core.rlwe.encapsulation`), adding only key-switching noise far below the scale q_0.
"""
from __future__ import annotations

from fhe_core import ops
from fhe_core.ckks.ciphertext import Ciphertext, rlwe_context
from fhe_core.errors import LevelMismatchError, ParameterError
from fhe_core.ops import KernelPlan
from fhe_core.params import Params
from fhe_core.rlwe import encapsulation
from fhe_core.rlwe.checks import check_canonical, check_ciphertext, mark_canonical
from fhe_core.rlwe.keys import DENSE_TO_SPARSE, SPARSE_TO_DENSE, EncapsulationKey


def mod_raise(params: Params, ct: Ciphertext, level: int | None = None, *,
              plan: KernelPlan | None = None) -> Ciphertext:
    """The same polynomials (centred mod q_0) read modulo Q_level (default Q_L).

    ct: a degree-1 CKKS ciphertext at level 0, ``[2, 1, N]`` int64, NTT domain (drop it to level 0
    first). Returns ``[2, level + 1, N]`` int64, NTT domain, at ``level``, with ct's scale and
    slots, decrypting to m + q_0 I (module docstring). Exact, no key, no noise: one INTT over
    q_0, :func:`fhe_core.ops.center_lift` onto q_0..q_level (the q_0 row is the input again) and
    one NTT, each batched over both components. The message's scale is unchanged but the
    plaintext now carries the multiple q_0 I, which decodes to slot values of size about
    q_0 / scale * sqrt(h). ``plan``: the kernel plan the transforms run with (default: resolved).
    """
    ctx, level = _check(params, ct, level, plan, "mod_raise")
    q0, target = ctx.q_at(0), ctx.q_at(level)
    coefficients = q0.intt(ct.data)                                             # [2, 1, N] mod q_0
    lifted = ops.center_lift(coefficients, params.q_primes[0], target.moduli)  # [2, level + 1, N]
    return mark_canonical(ct.replace(data=target.ntt(lifted, out=lifted), level=level))


def mod_raise_encapsulated(params: Params, ct: Ciphertext, keys: tuple[EncapsulationKey, EncapsulationKey],
                           level: int | None = None, *, plan: KernelPlan | None = None) -> Ciphertext:
    """:func:`mod_raise` through the ephemeral sparse secret: switched to s' at level 0 with ``keys[0]``
    (dense -> sparse), raised under s', switched back to the main secret at ``level`` with ``keys[1]`` (sparse ->
    dense; :func:`fhe_core.rlwe.encapsulation.raise_to_dense`). Decrypts to m + q_0 I + e_ks with I that of the
    ephemeral weight h' (|I| <= (h' + 1) / 2, ~sqrt(h' / 12) in practice) and |e_ks| a few bits: two one-digit key
    switches (the first over (p_0, q_0), the second at ``level``), no other cost. Same contract as
    :func:`mod_raise` otherwise."""
    op = "mod_raise_encapsulated"
    ctx, level = _check(params, ct, level, plan, op)
    if not isinstance(keys, tuple) or len(keys) != 2:
        raise ParameterError(f"{op}: keys must be the pair (dense -> sparse, sparse -> dense)")
    for key, direction in zip(keys, (DENSE_TO_SPARSE, SPARSE_TO_DENSE)):
        encapsulation.check_encapsulation_key(ctx, key, direction, op)
    if keys[0].ephemeral_id != keys[1].ephemeral_id:
        raise ParameterError(f"{op}: the two encapsulation keys belong to different ephemeral secrets")
    sparse = encapsulation.switch_to_sparse(ctx, ct.data.contiguous(), keys[0])
    return mark_canonical(ct.replace(data=encapsulation.raise_to_dense(ctx, sparse, keys[1], level), level=level))


def _check(params: Params, ct: Ciphertext, level: int | None, plan: KernelPlan | None, op: str):
    """The entry checks of both raises: (the context, the target level)."""
    if not isinstance(params, Params):
        raise ParameterError(f"{op}: expected a Params, got {type(params).__name__}")
    if not isinstance(ct, Ciphertext):
        raise ParameterError(f"{op}: expected a ckks.Ciphertext, got {type(ct).__name__}")
    ctx = rlwe_context(params, plan)
    if check_ciphertext(ctx, ct, op, degree=1) != 0:
        raise LevelMismatchError(f"{op}: the ciphertext must be at level 0 (drop_level first), got level {ct.level}")
    level = params.max_level if level is None else level
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= params.max_level:
        raise LevelMismatchError(f"{op}: target level must be an int in [0, {params.max_level}], got {level!r}")
    check_canonical(ctx, ct, 0, op)  # so that the raised ciphertext is canonical too
    return ctx, level


__all__ = ["mod_raise", "mod_raise_encapsulated"]
