"""Entry checks shared by the RLWE operations; every error names the operation."""
from __future__ import annotations

import torch

from fhe_core.errors import DomainMismatchError, LevelMismatchError, ParameterError, ParamsMismatchError
from fhe_core.rlwe.ciphertext import Ciphertext
from fhe_core.rlwe.context import RLWEContext


def check_params_id(ctx: RLWEContext, obj, op: str, what: str) -> None:
    """ParamsMismatchError unless ``obj.params_id`` is the context's."""
    if obj.params_id != ctx.params_id:
        raise ParamsMismatchError(f"{op}: {what} belongs to params {obj.params_id!r}, "
                                  f"the context to {ctx.params_id!r}")


def check_key(key, kinds: tuple[type, ...], params_id: str, op: str) -> None:
    """ParameterError unless ``key`` is one of ``kinds``; ParamsMismatchError unless it was made for
    ``params_id``. For the encryptors and decryptors of every scheme."""
    if not isinstance(key, kinds):
        expected = " or ".join(k.__name__ for k in kinds)
        raise ParameterError(f"{op}: expected a {expected}, got {type(key).__name__}")
    if key.params_id != params_id:
        raise ParamsMismatchError(f"{op}: the key belongs to params {key.params_id[:12]!r}, not {params_id[:12]!r}")


def check_tensor(ctx: RLWEContext, t: torch.Tensor, shape: tuple[int, ...], op: str, what: str) -> None:
    """``t`` is an int64 tensor of ``shape`` on the context's device; a wrong limb count
    (dimension -2) is a LevelMismatchError, anything else a ParameterError."""
    if not isinstance(t, torch.Tensor) or t.dtype != torch.int64:
        raise ParameterError(f"{op}: {what} must be an int64 tensor, got {getattr(t, 'dtype', type(t))}")
    if t.device != ctx.device:
        raise ParameterError(f"{op}: {what} is on {t.device}, the context on {ctx.device}")
    if t.dim() == len(shape) and t.shape[-2] != shape[-2] and t.shape[:-2] == shape[:-2] \
            and t.shape[-1] == shape[-1]:
        raise LevelMismatchError(f"{op}: {what} has {t.shape[-2]} limbs, expected {shape[-2]}")
    if tuple(t.shape) != tuple(shape):
        raise ParameterError(f"{op}: {what} must have shape {list(shape)}, got {list(t.shape)}")


def check_ciphertext(ctx: RLWEContext, ct: Ciphertext, op: str, *, degree: int | None = 1,
                     ntt: bool = True) -> int:
    """Validate a ciphertext operand; returns its level."""
    if not isinstance(ct, Ciphertext):
        raise ParameterError(f"{op}: expected a Ciphertext, got {type(ct).__name__}")
    check_params_id(ctx, ct, op, "the ciphertext")
    level = ctx.check_level(ct.level, op)
    if ct.is_ntt != ntt:
        raise DomainMismatchError(f"{op}: the ciphertext must be in the "
                                  f"{'NTT' if ntt else 'coefficient'} domain")
    if degree is not None and ct.degree != degree:
        raise ParameterError(f"{op}: expected a degree-{degree} ciphertext, got degree {ct.degree}")
    check_tensor(ctx, ct.data, (ct.degree + 1, level + 1, ctx.n), op, "the ciphertext data")
    return level


def check_same_level(level: int, other: int, op: str, what: str) -> None:
    if level != other:
        raise LevelMismatchError(f"{op}: {what} is at level {other}, expected level {level}")
