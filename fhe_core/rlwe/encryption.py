"""Encryption and decryption of RNS polynomials (the scheme-generic part; encoders sit above).

A message is an ``[l+1, N]`` int64 polynomial over Q_l in the NTT domain; a fresh ciphertext is
``[2, l+1, N]`` in the NTT domain at level l and decrypts to m + e:
    secret key:  (c0, c1) = (-a s + e + m, a)                        e ~ CBD(eta)
                 a comes from the encryption's public uniform seed, which the ciphertext keeps
                 (``Ciphertext.uniform_seed``): serialized it travels instead of a (SEAL's and
                 Lattigo's seeded ciphertexts); the seed reveals a, which is public anyway.
    public key:  (c0, c1) = (b u + e0 + m, a u + e1)                 u uniform ternary
                 -> c0 + c1 s = m + e u + e0 + e1 s
Seeds and nonces: see ``sampling`` (``seed=`` is for tests only).
"""
from __future__ import annotations

import torch

from fhe_core import ops
from fhe_core.errors import ParameterError
from fhe_core.rlwe.checks import check_ciphertext, check_params_id, check_residues, check_tensor, mark_canonical
from fhe_core.rlwe.ciphertext import Ciphertext
from fhe_core.rlwe.context import RLWEContext
from fhe_core.rlwe.keys import PublicKey, SecretKey, check_secret_key, secret_over_q
from fhe_core.rlwe.sampling import Domain, error_ntt, nonce, seeds_for, ternary_ntt, uniform_ntt


def encrypt_sk(ctx: RLWEContext, sk: SecretKey, m: torch.Tensor, level: int, *,
               seed: bytes | None = None) -> Ciphertext:
    """Secret-key encryption of m (``[l+1, N]`` int64, NTT domain) at ``level``.

    Returns a ``[2, l+1, N]`` NTT-domain ciphertext with fresh noise |e|_inf <= eta.
    ``seed``: tests only.
    """
    op = "encrypt_sk"
    check_secret_key(ctx, sk, op)
    level = ctx.check_level(level, op)
    check_tensor(ctx, m, (level + 1, ctx.n), op, "the message")
    check_residues(ctx, m, level, op, "the message")
    seeds, q = seeds_for(ctx, seed, "encrypt_sk"), ctx.q_at(level)
    a = sk_encryption_uniform(ctx, seeds.uniform, level)
    e = error_ntt(q, seeds.secret, nonce(Domain.ENC_ERROR, 0), ctx.error_eta)
    c0 = ops.sub(ops.add(e, m, q.moduli), ops.mul(a, secret_over_q(ctx, sk, level), q.moduli), q.moduli)
    return mark_canonical(Ciphertext(data=torch.stack((c0, a)), level=level, params_id=ctx.params_id,
                                     uniform_seed=seeds.uniform))


def sk_encryption_uniform(ctx: RLWEContext, uniform_seed: bytes, level: int) -> torch.Tensor:
    """c_1 = a of a secret-key encryption at ``level`` from its uniform seed: ``[l+1, N]``, NTT
    domain, on the context's device (the same words on every device)."""
    return uniform_ntt(ctx.q_at(level), uniform_seed, nonce(Domain.ENC_UNIFORM, 0))


def encrypt_pk(ctx: RLWEContext, pk: PublicKey, m: torch.Tensor, level: int, *,
               seed: bytes | None = None) -> Ciphertext:
    """Public-key encryption of m (``[l+1, N]`` int64, NTT domain) at ``level``.

    Returns a ``[2, l+1, N]`` NTT-domain ciphertext; noise e u + e0 + e1 s (about
    sqrt(N * eta/2 * (2/3 + h/N)) per coefficient). ``seed``: tests only.
    """
    op = "encrypt_pk"
    level = _check_pk(ctx, pk, level, op)
    check_tensor(ctx, m, (level + 1, ctx.n), op, "the message")
    check_residues(ctx, m, level, op, "the message")
    return _encrypt_pk(ctx, pk, m, level, seed, op)


def encrypt_zero_pk(ctx: RLWEContext, pk: PublicKey, level: int, *, seed: bytes | None = None) -> Ciphertext:
    """:func:`encrypt_pk` of the zero message (the same words), without a message to check (its residue pass
    waits for a GPU): the fresh encryption of 0 that re-randomizes a ciphertext (BFV flooding)."""
    op = "encrypt_zero_pk"
    return _encrypt_pk(ctx, pk, None, _check_pk(ctx, pk, level, op), seed, op)


def _check_pk(ctx: RLWEContext, pk: PublicKey, level: int, op: str) -> int:
    if not isinstance(pk, PublicKey):
        raise ParameterError(f"{op}: expected a PublicKey, got {type(pk).__name__}")
    check_params_id(ctx, pk, op, "the public key")
    check_tensor(ctx, pk.data, (2, ctx.max_level + 1, ctx.n), op, "the public key")
    return ctx.check_level(level, op)


def _encrypt_pk(ctx: RLWEContext, pk: PublicKey, m: torch.Tensor | None, level: int, seed: bytes | None,
                op: str) -> Ciphertext:
    seeds, q = seeds_for(ctx, seed, op), ctx.q_at(level)
    u = ternary_ntt(q, seeds.secret, nonce(Domain.ENC_EPHEMERAL, 0))
    e0 = error_ntt(q, seeds.secret, nonce(Domain.ENC_ERROR, 0), ctx.error_eta)
    e1 = error_ntt(q, seeds.secret, nonce(Domain.ENC_ERROR, 1), ctx.error_eta)
    c0 = ops.mul_add(pk.data[0, :level + 1], u, e0 if m is None else ops.add(e0, m, q.moduli), q.moduli)
    c1 = ops.mul_add(pk.data[1, :level + 1], u, e1, q.moduli)
    return mark_canonical(Ciphertext(data=torch.stack((c0, c1)), level=level, params_id=ctx.params_id))


def decrypt(ctx: RLWEContext, sk: SecretKey, ct: Ciphertext) -> torch.Tensor:
    """c_0 + c_1 s + ... + c_d s^d = m + e: ``[l+1, N]`` int64, NTT domain (any degree d >= 1).
    Every residue is checked (ResidueError for a hand-built or corrupted ciphertext): one pass,
    next to decryption's own."""
    op = "decrypt"
    check_secret_key(ctx, sk, op)
    level = check_ciphertext(ctx, ct, op, degree=None)
    check_residues(ctx, ct.data, level, op, "the ciphertext")
    q, s = ctx.q_at(level), secret_over_q(ctx, sk, level)
    acc = ct.data[ct.degree]
    for i in range(ct.degree - 1, -1, -1):  # Horner in s
        acc = ops.mul_add(acc, s, ct.data[i], q.moduli)
    return acc
