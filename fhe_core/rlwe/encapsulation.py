"""Sparse-secret encapsulation (Bossuat, Troncoso-Pastoriza and Hubaux, ACNS 2022; Lattigo's
``EphemeralSecretWeight``): a dense main secret s for computation, a sparse ephemeral secret s' of
Hamming weight h' for ModRaise, whose overflow I then has the size of a sum of h' + 1 uniforms.

Two one-digit switching keys (:class:`~fhe_core.rlwe.keys.EncapsulationKey`), made by the secret-key holder:

    dense -> sparse   b = -a s' + e + p_0 s   over (p_0, q_0) only: s' is exposed at this small modulus
                      alone (its security is judged there, ``fhe_core.params.security``);
    sparse -> dense   b = -a s + e + P s'     over QP_L (an RLWE sample under the dense s, like every key).

The bootstrap's entry then runs (:func:`switch_to_sparse`, :func:`raise_to_dense`):

    (c0, c1) at level 0 under s  --key switch over (p_0, q_0)-->  under s', still at level 0
    ModRaise under s': the centred lifts of c0 and c1; c1's lift to QP_L is its one digit
    (|c1| < q_0 / 2 needs no decomposition), times the sparse -> dense key, ModDown: under s at level L,
    decrypting to m + q_0 I + e_ks with I from s' (small) and e_ks ~ (1 + |s|_1) / 2 (rounding).

Noise: the first switch adds |c1 e| / p_0 + rounding (q_0 < p_0 keeps it at a few bits over q_0's
scale); the second d e / P + rounding. Both are far below the message scale at that point (~q_0 / R).
The steps below take checked inputs; :func:`check_encapsulation_key` is the check.
"""
from __future__ import annotations

import functools
import hashlib

import torch

from fhe_core import ops
from fhe_core.errors import ParameterError
from fhe_core.rlwe import switching
from fhe_core.rlwe.checks import check_params_id, check_tensor
from fhe_core.rlwe.context import RLWEContext
from fhe_core.rlwe.keys import (
    DENSE_TO_SPARSE, ENCAPSULATION_DIRECTIONS, EPHEMERAL_ID_BYTES, SPARSE_TO_DENSE, EncapsulationKey, SecretKey,
    check_secret_key, one_digit_key_data,
)
from fhe_core.rlwe.sampling import Domain, nonce, seeds_for, sub_seed, ternary_ntt, uniform_ntt


@functools.lru_cache(maxsize=16)
def encapsulation_context(ctx: RLWEContext) -> RLWEContext:
    """The context of the dense -> sparse switch: q_0 with the one special prime p_0 (same device, plan,
    errors). Its rows (p_0, q_0) are rows 0 and alpha of ctx's QP_L, with the same NTT tables."""
    return RLWEContext(ctx.n, ctx.q_primes[:1], ctx.p_primes[:1], ctx.device, error_eta=ctx.error_eta, plan=ctx.plan)


def _small_rows(ctx: RLWEContext) -> list[int]:
    """The rows (p_0, q_0) of QP_L."""
    return [0, ctx.alpha]


def gen_ephemeral_secret(ctx: RLWEContext, weight: int, *, seed: bytes | None = None) -> SecretKey:
    """A sparse ternary secret of exactly ``weight`` nonzero coefficients over QP_L, for
    :func:`gen_encapsulation_keys` only (discard it afterwards). ``seed``: tests only."""
    op = "gen_ephemeral_secret"
    if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= ctx.n:
        raise ParameterError(f"{op}: the ephemeral Hamming weight must be an int in [1, N = {ctx.n}], got {weight!r}")
    seeds = seeds_for(ctx, seed, op)
    s = ternary_ntt(ctx.qp_basis, seeds.secret, nonce(Domain.SECRET_KEY, 0), weight)
    return SecretKey(data=s, params_id=ctx.params_id, hamming_weight=weight, seed=seeds.master)


def ephemeral_id(ephemeral: SecretKey) -> bytes:
    """The public tag of an ephemeral secret: a one-way hash of its seed (reveals nothing about it)."""
    return hashlib.blake2b(b"ephemeral id", key=ephemeral.seed, digest_size=EPHEMERAL_ID_BYTES,
                           person=b"fhe-rlwe-eph-id").digest()


def gen_encapsulation_keys(ctx: RLWEContext, sk: SecretKey, ephemeral: SecretKey, *,
                           seed: bytes | None = None) -> tuple[EncapsulationKey, EncapsulationKey]:
    """(dense -> sparse, sparse -> dense) between the main secret ``sk`` and a sparse ``ephemeral`` one
    (:func:`gen_ephemeral_secret`), each with its own OS-random seeds. ``seed``: tests only."""
    op = "gen_encapsulation_keys"
    check_secret_key(ctx, sk, op)
    check_secret_key(ctx, ephemeral, op)
    if ephemeral.hamming_weight == 0:
        raise ParameterError(f"{op}: the ephemeral secret must be sparse (a fixed Hamming weight), got a uniform one")
    if ephemeral.seed == sk.seed:
        raise ParameterError(f"{op}: the ephemeral secret is the main secret")
    small, rows = encapsulation_context(ctx), _small_rows(ctx)
    tag = ephemeral_id(ephemeral)

    def key(direction: str, key_ctx: RLWEContext, s_to: torch.Tensor, s_from: torch.Tensor) -> EncapsulationKey:
        seeds = seeds_for(ctx, sub_seed(seed, direction), op)
        return EncapsulationKey(data=one_digit_key_data(key_ctx, s_to, s_from, seeds), params_id=ctx.params_id,
                                uniform_seed=seeds.uniform, direction=direction,
                                ephemeral_weight=ephemeral.hamming_weight, ephemeral_id=tag)
    return (key(DENSE_TO_SPARSE, small, ephemeral.data[rows], sk.data[rows]),
            key(SPARSE_TO_DENSE, ctx, sk.data, ephemeral.data))


def encapsulation_key_rows(ctx: RLWEContext, direction: str) -> int:
    """The rows of a key of ``direction``: 2 (p_0, q_0) or alpha + L + 1 (QP_L)."""
    return 2 if direction == DENSE_TO_SPARSE else len(ctx.qp_basis)


def encapsulation_key_uniform(ctx: RLWEContext, direction: str, uniform_seed: bytes) -> torch.Tensor:
    """The a of an encapsulation key from its uniform seed: ``[1, rows, N]`` (a compressed key's other half)."""
    basis = encapsulation_context(ctx).qp_basis if direction == DENSE_TO_SPARSE else ctx.qp_basis
    return uniform_ntt(basis, uniform_seed, nonce(Domain.KEY_UNIFORM, 0))[None]


def check_encapsulation_key(ctx: RLWEContext, key: EncapsulationKey, direction: str, op: str) -> None:
    """A key of these parameters, of ``direction``, of the right shape (errors name ``op``)."""
    if not isinstance(key, EncapsulationKey):
        raise ParameterError(f"{op}: expected an EncapsulationKey, got {type(key).__name__}")
    if key.direction not in ENCAPSULATION_DIRECTIONS or key.direction != direction:
        raise ParameterError(f"{op}: expected the {direction} encapsulation key, got {key.direction!r}")
    check_params_id(ctx, key, op, f"the {direction} key")
    check_tensor(ctx, key.data, (1, 2, encapsulation_key_rows(ctx, direction), ctx.n), op, f"the {direction} key")


# ---- the steps (inputs already checked) --------------------------------------------------------------

def switch_to_sparse(ctx: RLWEContext, data: torch.Tensor, key: EncapsulationKey) -> torch.Tensor:
    """(c0, c1) ``[2, 1, N]`` (contiguous, NTT domain, level 0) under s -> ``[2, 1, N]`` under s', with the
    dense -> sparse key: a key switch over (p_0, q_0)."""
    return switching.key_switch(encapsulation_context(ctx), data[1], key, 0, add=data[:1])


def raise_to_dense(ctx: RLWEContext, data: torch.Tensor, key: EncapsulationKey, level: int) -> torch.Tensor:
    """ModRaise under s' and the switch back to s: (c0, c1) ``[2, 1, N]`` (NTT domain, level 0) under s'
    -> ``[2, level + 1, N]`` over Q_level under s, decrypting to c0 + c1 s' (centred lifts) + e_ks. c1's
    lift to QP_level is its own one digit for the sparse -> dense key (module docstring)."""
    t, q0 = ctx.tables(level), ctx.q_primes[0]
    coeffs = ctx.q_at(0).intt(data)                                  # [2, 1, N] mod q_0
    c0 = ops.center_lift(coeffs[:1], q0, t.q.moduli)                 # [1, l + 1, N]
    digit = ops.center_lift(coeffs[1:], q0, t.qp.moduli)             # [1, alpha + l + 1, N]
    extended = switching.inner_product(ctx, t.qp.ntt(digit, out=digit), key, level)
    return switching.mod_down(ctx, extended, level, add=t.q.ntt(c0, out=c0))


__all__ = ["encapsulation_context", "gen_ephemeral_secret", "ephemeral_id", "gen_encapsulation_keys",
           "encapsulation_key_rows", "encapsulation_key_uniform", "check_encapsulation_key", "switch_to_sparse",
           "raise_to_dense"]
