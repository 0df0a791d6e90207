"""Entry checks shared by the RLWE operations; every error names the operation.

Cheap checks (type, params_id, device, dtype, shape, level, domain) run at every public entry.
The residue range check (every residue in [0, q_i)) reads the whole tensor and, on CUDA, waits
for the device, so it runs where that is cheap next to the work: at decryption, in
deserialization, and the first time an evaluator sees a ciphertext object. Objects that
evaluators, encryptors and ``serialize.loads`` return are canonical by construction and carry a
mark (:func:`mark_canonical`) that lets later entry checks skip the pass; an object built or
relabelled by hand has none and is checked once. (Tensors edited in place after construction
are not rechecked: objects are treated as immutable.)
"""
from __future__ import annotations

import functools

import torch

from fhe_core.errors import DomainMismatchError, LevelMismatchError, ParameterError, ParamsMismatchError, ResidueError
from fhe_core.rlwe.ciphertext import CANONICAL_MARK, Ciphertext
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




def check_residues(ctx: RLWEContext, data: torch.Tensor, level: int, op: str, what: str) -> None:
    """ResidueError naming ``op`` unless every residue of ``data`` (``[..., l+1, N]`` over Q_l,
    shape already checked) is canonical, in [0, q_i). One pass and one device sync. Skipped while
    a CUDA graph is being captured: kernels are recorded, not run, so there is nothing to check
    yet (and a sync is not allowed)."""
    if data.is_cuda and torch.cuda.is_current_stream_capturing():
        return
    bad = _out_of_range(ctx, data, level)
    if bool(bad.any()):
        index = [int(i) for i in bad.nonzero()[0]]
        raise ResidueError(f"{op}: {what} has a residue outside [0, q_{index[-2]}) at index {index} "
                           "(hand-built or corrupted data: make objects with the encoders, encryptors and "
                           "evaluators, read them with serialize.loads)")


def _out_of_range(ctx: RLWEContext, data: torch.Tensor, level: int) -> torch.Tensor:
    primes = ctx.q_at(level).moduli[:, :1]  # [l+1, 1]
    return torch.logical_or(data >= primes, data < 0)


def check_canonical_all(ctx: RLWEContext, cts, op: str) -> None:
    """:func:`check_canonical` of a list of checked ciphertexts (each over Q of its own level) with one device sync
    for all of them instead of one each (a server's inputs, checked before its circuit starts); the ResidueError
    names the first bad one by its index ("input i"). Marks them."""
    todo = [(i, ct) for i, ct in enumerate(cts) if not ct.__dict__.get(CANONICAL_MARK)]
    if not todo or (todo[0][1].data.is_cuda and torch.cuda.is_current_stream_capturing()):
        return
    if bool(torch.stack([_out_of_range(ctx, ct.data, ct.level).any() for _, ct in todo]).any()):
        for i, ct in todo:
            check_residues(ctx, ct.data, ct.level, op, f"input {i}")
    for _, ct in todo:
        mark_canonical(ct)


def check_canonical(ctx: RLWEContext, obj, level: int, op: str, what: str = "the ciphertext") -> None:
    """:func:`check_residues` of a checked ciphertext (or plaintext: any object whose ``data`` is
    over Q_level) unless it carries the canonical mark; marks it."""
    if not obj.__dict__.get(CANONICAL_MARK):  # (is_marked_canonical, inlined: every entry runs this)
        if obj.data.is_cuda and torch.cuda.is_current_stream_capturing():
            return  # see check_residues; not marked, so an eager use still checks it
        check_residues(ctx, obj.data, level, op, what)
        mark_canonical(obj)


def is_marked_canonical(obj) -> bool:
    """Whether ``obj`` carries the mark of :func:`mark_canonical`."""
    return bool(obj.__dict__.get(CANONICAL_MARK))


def mark_canonical(obj):
    """Mark a ciphertext or plaintext as holding canonical residues (for producers that guarantee
    it); returns it."""
    obj.__dict__[CANONICAL_MARK] = True  # not a dataclass field: frozen objects take it, replace() drops it
    return obj


def canonical_results(method):
    """Decorator for evaluator operations: the ciphertext (or dict of ciphertexts) they return is
    made by the kernels from checked, canonical inputs, so it gets the canonical mark."""
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        result = method(*args, **kwargs)
        if type(result) is dict:
            for ct in result.values():
                ct.__dict__[CANONICAL_MARK] = True
        else:  # (mark_canonical, inlined: every operation returns through here)
            result.__dict__[CANONICAL_MARK] = True
        return result
    return wrapper
