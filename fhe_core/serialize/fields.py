"""Typed reads of metadata fields and residue payloads; every failure names the object and field.

Residue payloads are read as little-endian uint64 views of the input (no copy) and checked
with vectorised numpy reductions; :func:`to_tensor` is the only place a payload is copied.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from fhe_core.errors import MetadataError, ResidueRangeError, SerializationError, ShapeError

WORD = np.dtype("<u8")


# ---- metadata fields -------------------------------------------------------------------------------

def check_keys(meta: dict[str, Any], what: str, required: Sequence[str], optional: Sequence[str] = ()) -> None:
    """The metadata has every ``required`` key and no key outside ``required`` + ``optional``."""
    missing = sorted(set(required) - set(meta))
    unknown = sorted(set(meta) - set(required) - set(optional))
    if missing or unknown:
        raise MetadataError(f"{what}: metadata fields missing {missing}, unknown {unknown}")


def int_field(meta: dict[str, Any], name: str, what: str, low: int, high: int) -> int:
    """An integer field in [low, high]."""
    value = meta[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise MetadataError(f"{what}: {name} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise MetadataError(f"{what}: {name} must be in [{low}, {high}], got {value}")
    return value


def bool_field(meta: dict[str, Any], name: str, what: str) -> bool:
    value = meta[name]
    if not isinstance(value, bool):
        raise MetadataError(f"{what}: {name} must be true or false, got {value!r}")
    return value


def hex_bytes_field(meta: dict[str, Any], name: str, what: str, length: int) -> bytes:
    """``length`` bytes stored as 2 * length lowercase hex digits."""
    value = meta[name]
    if isinstance(value, str) and len(value) == 2 * length and value == value.lower():
        try:
            return bytes.fromhex(value)
        except ValueError:
            pass
    raise MetadataError(f"{what}: {name} must be {2 * length} lowercase hex digits")


def scale_field(meta: dict[str, Any], name: str, what: str) -> float:
    """A positive finite float64 stored exactly as ``float.hex`` text."""
    value = meta[name]
    try:
        scale = float.fromhex(value) if isinstance(value, str) else math.nan
    except (ValueError, OverflowError):
        scale = math.nan
    if not (math.isfinite(scale) and scale > 0) or scale.hex() != value:
        raise MetadataError(f"{what}: {name} must be a positive finite float64 in float.hex form, got {value!r}")
    return scale


def shape_field(meta: dict[str, Any], what: str, expected: Sequence[int], meaning: str) -> tuple[int, ...]:
    """The declared ``shape`` must equal the shape the parameters and metadata imply."""
    value = meta["shape"]
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise MetadataError(f"{what}: shape must be a list of integers, got {value!r}")
    if tuple(value) != tuple(expected):
        raise ShapeError(f"{what}: shape {value} does not match the parameters: expected "
                         f"{list(expected)} ({meaning})")
    return tuple(value)


# ---- residue payloads ------------------------------------------------------------------------------

def residue_view(payload: memoryview, shape: Sequence[int], what: str) -> np.ndarray:
    """The payload as a read-only ``shape`` array of little-endian uint64 (a view, no copy)."""
    expected = math.prod(shape) * WORD.itemsize
    if len(payload) != expected:
        raise ShapeError(f"{what}: payload is {len(payload)} bytes, shape {list(shape)} needs {expected}")
    return np.frombuffer(payload, dtype=WORD).reshape(shape)


def residue_words(payload: memoryview, shape: Sequence[int], what: str, meta: dict[str, Any]) -> np.ndarray:
    """The payload as ``shape`` uint64 residues: a zero-copy view of little-endian words, or,
    when the metadata has ``bits`` (one width per limb), the unpacked bit streams."""
    if "bits" not in meta:
        return residue_view(payload, shape, what)
    widths = meta["bits"]
    if not isinstance(widths, list) or len(widths) != shape[-2] or \
            not all(isinstance(w, int) and not isinstance(w, bool) and 0 <= w <= 64 for w in widths):
        raise MetadataError(f"{what}: bits must list {shape[-2]} limb widths in [0, 64], got {widths!r}")
    expected = math.prod(shape[:-2]) * sum(shape[-1] * w // 8 for w in widths)
    if len(payload) != expected:
        raise ShapeError(f"{what}: payload is {len(payload)} bytes, shape {list(shape)} packed at "
                         f"{widths} bits per residue needs {expected}")
    return unpack_bits(np.frombuffer(payload, dtype=np.uint8), shape, widths)


def limb_widths(words: np.ndarray) -> list[int]:
    """Per limb (axis -2), the bit length of its largest residue (over every leading index)."""
    largest = words.reshape(-1, *words.shape[-2:]).max(axis=(0, 2))
    return [int(v).bit_length() for v in largest]


def _limb_groups(widths: Sequence[int]) -> dict[int, list[int]]:
    """Limbs by width: each width is packed for all its limbs (usually all but one) at once."""
    groups: dict[int, list[int]] = {}
    for i, w in enumerate(widths):
        groups.setdefault(int(w), []).append(i)
    return groups


def _stream_offsets(n: int, widths: Sequence[int]) -> np.ndarray:
    """Start of each limb's bit stream in 64-bit words (N residues of w bits: N w / 64 words)."""
    return np.cumsum([0] + [n * w // 64 for w in widths])


def pack_bits(words: np.ndarray, widths: Sequence[int]) -> np.ndarray:
    """``[..., limbs, N]`` uint64 -> bytes: for each leading index, each limb i in order, its N
    residues as one little-endian bit stream of widths[i] bits each (N * widths[i] / 8 bytes).

    64 residues of w bits fill exactly w words, so residue k of each group lands at bit k w of
    its group's words: in word k w // 64, and its top bits in the next one when it straddles.
    One vectorised shift-and-or per residue position and width (N is a multiple of 64)."""
    flat = words.reshape(-1, *words.shape[-2:]).astype(WORD, copy=False)
    outer, _, n = flat.shape
    offsets = _stream_offsets(n, widths)
    out = np.zeros((outer, int(offsets[-1])), dtype=WORD)
    for w, limbs in _limb_groups(widths).items():
        if w == 0:
            continue
        # [..., position k in the group, group]: each step below reads and writes whole rows
        groups = np.ascontiguousarray(flat[:, limbs, :].reshape(outer, len(limbs), n // 64, 64).swapaxes(-1, -2))
        packed = np.zeros((outer, len(limbs), w, n // 64), dtype=WORD)
        for k in range(64):
            word, shift = divmod(k * w, 64)
            packed[..., word, :] |= groups[..., k, :] << np.uint64(shift)
            if shift + w > 64:
                packed[..., word + 1, :] |= groups[..., k, :] >> np.uint64(64 - shift)
        for j, limb in enumerate(limbs):
            out[:, offsets[limb]:offsets[limb + 1]] = packed[:, j].swapaxes(-1, -2).reshape(outer, -1)
    return out.astype("<u8", copy=False).view(np.uint8).reshape(-1)


def unpack_bits(packed: np.ndarray, shape: Sequence[int], widths: Sequence[int]) -> np.ndarray:
    """Inverse of :func:`pack_bits` (the caller has checked the length): ``shape`` uint64."""
    outer, n = math.prod(shape[:-2]), shape[-1]
    offsets = _stream_offsets(n, widths)
    rows = np.frombuffer(packed, dtype="<u8").reshape(outer, int(offsets[-1]))
    out = np.zeros((outer, len(widths), n), dtype=np.uint64)
    for w, limbs in _limb_groups(widths).items():
        if w == 0:
            continue
        streams = np.stack([rows[:, offsets[limb]:offsets[limb + 1]] for limb in limbs], axis=1)
        streams = np.ascontiguousarray(streams.reshape(outer, len(limbs), n // 64, w).swapaxes(-1, -2))
        values = np.empty((outer, len(limbs), 64, n // 64), dtype=np.uint64)
        mask = np.uint64((1 << w) - 1)
        for k in range(64):
            word, shift = divmod(k * w, 64)
            v = streams[..., word, :] >> np.uint64(shift)
            if shift + w > 64:
                v |= streams[..., word + 1, :] << np.uint64(64 - shift)
            np.bitwise_and(v, mask, out=values[..., k, :])
        out[:, limbs, :] = values.swapaxes(-1, -2).reshape(outer, len(limbs), n)
    return out.reshape(shape)


def check_residues(words: np.ndarray, primes: Sequence[int], what: str, labels: Sequence[str],
                   outer: Callable[[tuple[int, ...]], str] = lambda index: "") -> None:
    """Every residue of limb i (axis -2) is < primes[i]; ResidueRangeError names the first that is not.

    words: ``[..., len(primes), N]`` uint64. ``labels[i]`` names prime i ("q_3", "p_0");
    ``outer`` names the leading index (e.g. "component 1, ").
    """
    limit = np.asarray(primes, dtype=np.uint64)
    bad = words.max(axis=-1) >= limit                       # [..., limbs]: one reduction, no copy
    if not bad.any():
        return
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    row = words[where]
    column = int(np.argmax(row >= limit[where[-1]]))
    limb = where[-1]
    raise ResidueRangeError(f"{what}: {outer(where[:-1])}limb {limb} has a residue >= {labels[limb]} "
                            f"(coefficient {column}: {int(row[column])} >= {int(limit[limb])})")


def to_tensor(words: np.ndarray, device: torch.device) -> torch.Tensor:
    """A checked uint64 view as an int64 tensor with the same bits on ``device`` (one copy)."""
    native = words.view("<i8").astype(np.int64, copy=True)
    return torch.from_numpy(native).to(device)


def tensor_words(t: object, what: str, dims: int) -> np.ndarray:
    """An int64 tensor's residues as a contiguous little-endian uint64 array (host copy if needed)."""
    if not isinstance(t, torch.Tensor) or t.dtype != torch.int64 or t.dim() != dims:
        raise SerializationError(f"{what}: data must be a {dims}-d int64 tensor, got "
                                 f"{getattr(t, 'dtype', type(t).__name__)} {list(getattr(t, 'shape', []))}")
    host = t.detach().to("cpu").contiguous().numpy()
    return np.ascontiguousarray(host.view(np.uint64).astype(WORD, copy=False))


def q_labels(count: int) -> list[str]:
    """Names of the limbs q_0..q_(count-1)."""
    return [f"q_{i}" for i in range(count)]


def qp_labels(alpha: int, q_count: int) -> list[str]:
    """Names of the limbs of QP (P first): p_0..p_(alpha-1), q_0..q_(q_count-1)."""
    return [f"p_{i}" for i in range(alpha)] + q_labels(q_count)
