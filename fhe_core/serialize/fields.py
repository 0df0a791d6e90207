"""Typed reads of metadata fields and residue payloads; every failure names the object and field.

A residue payload's length is checked against its shape (and bit widths) before anything is
allocated (:func:`residues`); :meth:`Residues.tensor` then copies the words once, to the device
the object is headed for, unpacks them there and checks their ranges there. Writers pack on the
device the object lives on (:func:`pack_residues`).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
#
# On the wire a residue payload is either plain little-endian uint64 words or, with the metadata
# field ``bits``, each limb's N residues as one little-endian bit stream of w bits each. Since N
# is a multiple of 64, 64 residues of a limb fill exactly w words: residue k of a group starts at
# bit k w, i.e. in word (k w) // 64 at bit (k w) % 64, and spills into the next word when it
# crosses a word boundary. Packing and unpacking are a few vectorised shifts, masks and gathers
# per run of equal widths, with index tables built once per width, where the residues are: torch
# ops on a GPU (the writer packs there, the reader unpacks there), numpy on the host (uint64
# shifts are logical there, and blocks that stay in cache: torch's CPU threads gain nothing on
# such small steps and spin).

GROUP = 64                # residues per group: one group of width w is exactly w uint64 words
CPU_BLOCK_GROUPS = 2048   # groups per step on the host: each temporary (1 MiB) stays in cache
Words = np.ndarray | torch.Tensor   # uint64 host arrays, or int64 device tensors (the same bits)


def residue_tensor(t: object, what: str, dims: int) -> torch.Tensor:
    """An object's residue tensor, checked to be ``dims``-d int64 (what an encoder may write)."""
    if not isinstance(t, torch.Tensor) or t.dtype != torch.int64 or t.dim() != dims:
        raise SerializationError(f"{what}: data must be a {dims}-d int64 tensor, got "
                                 f"{getattr(t, 'dtype', type(t).__name__)} {list(getattr(t, 'shape', []))}")
    return t.detach()


def host_words(t: torch.Tensor) -> np.ndarray:
    """``t``'s residues as a contiguous little-endian uint64 array on the host (one copy)."""
    return np.ascontiguousarray(t.to("cpu").contiguous().numpy().view(np.uint64).astype(WORD, copy=False))


def limb_widths(t: torch.Tensor) -> list[int]:
    """Per limb (axis -2), the bit length of its largest residue as a uint64 (over every leading
    index): one reduction on ``t``'s device. A negative int64 (a uint64 >= 2^63) takes 64 bits."""
    rows = t.reshape(-1, *t.shape[-2:])
    largest, smallest = rows.amax(dim=(0, 2)).tolist(), rows.amin(dim=(0, 2)).tolist()
    return [64 if low < 0 else int(high).bit_length() for high, low in zip(largest, smallest)]


def pack_residues(t: torch.Tensor, widths: Sequence[int]) -> np.ndarray:
    """``[..., limbs, N]`` int64 -> the packed payload as host uint64 words: for each leading
    index, each limb i in order, its N residues at widths[i] bits (N w_i / 64 words). Packed where
    ``t`` is; from a GPU only the packed words travel to the host."""
    rows = t.reshape(-1, *t.shape[-2:])
    outer, _, n = rows.shape
    starts = _starts(widths, n)
    on_host = rows.device.type == "cpu"
    src = rows.numpy().view(np.uint64) if on_host else rows
    out = _empty(src, (outer, starts[-1]))
    for w, first, last in _runs(widths):
        groups = (last - first) * n // GROUP
        _blocked(_pack_groups, src[:, first:last].reshape(outer, groups, GROUP),
                 out[:, starts[first]:starts[last]].reshape(outer, groups, w), w)
    return out.reshape(-1) if on_host else host_words(out).reshape(-1)


@dataclass(frozen=True, eq=False)
class Residues:
    """A residue payload whose length fits its ``shape`` (and ``widths``, when bit-packed): what a
    decoder checks before anything is allocated. :meth:`tensor` then builds it on a device."""

    payload: memoryview
    shape: tuple[int, ...]
    widths: tuple[int, ...] | None          # None: plain uint64 words
    primes: tuple[int, ...]                 # of the limbs (axis -2)
    what: str
    labels: tuple[str, ...]                 # names of the primes ("q_3", "p_0")
    outer: Callable[[tuple[int, ...]], str]  # names a leading index ("component 1, ")

    def tensor(self, device: torch.device) -> torch.Tensor:
        """The residues as an int64 ``shape`` tensor on ``device``: unpacked on the host straight
        from the payload, or the payload's (packed) words copied to a GPU and unpacked there; then
        range-checked there (every residue < its prime; ResidueRangeError names the first)."""
        words = np.frombuffer(self.payload, dtype=WORD)
        if device.type == "cpu":
            data = torch.from_numpy((words.astype(np.uint64) if self.widths is None
                                     else _unpack(words, self.shape, self.widths)).view(np.int64))
        else:
            words = torch.from_numpy(words.view("<i8").astype(np.int64)).to(device)
            data = words if self.widths is None else _unpack(words, self.shape, self.widths)
        data = data.reshape(self.shape)
        _check_range(data, self.primes, self.what, self.labels, self.outer)
        return data


def residues(payload: memoryview, shape: Sequence[int], what: str, meta: dict[str, Any], primes: Sequence[int],
             labels: Sequence[str], outer: Callable[[tuple[int, ...]], str] = lambda index: "") -> Residues:
    """The payload as :class:`Residues` of ``shape`` (plain words, or bit-packed when the metadata
    has ``bits``: one width in [0, 64] per limb), after checking its length; nothing allocated."""
    widths = None
    if "bits" in meta:
        widths = meta["bits"]
        if not isinstance(widths, list) or len(widths) != shape[-2] or \
                not all(isinstance(w, int) and not isinstance(w, bool) and 0 <= w <= 64 for w in widths):
            raise MetadataError(f"{what}: bits must list {shape[-2]} limb widths in [0, 64], got {widths!r}")
        expected = math.prod(shape[:-2]) * sum(shape[-1] * w // 8 for w in widths)
        if len(payload) != expected:
            raise ShapeError(f"{what}: payload is {len(payload)} bytes, shape {list(shape)} packed at "
                             f"{widths} bits per residue needs {expected}")
        widths = tuple(widths)
    else:
        expected = math.prod(shape) * WORD.itemsize
        if len(payload) != expected:
            raise ShapeError(f"{what}: payload is {len(payload)} bytes, shape {list(shape)} needs {expected}")
    return Residues(payload, tuple(shape), widths, tuple(primes), what, tuple(labels), outer)


def _unpack(words: Words, shape: tuple[int, ...], widths: tuple[int, ...]) -> Words:
    """Inverse of :func:`pack_residues` (lengths checked): packed words -> ``[outer, limbs, N]``."""
    *_, limbs, n = shape
    outer = math.prod(shape[:-2])
    starts = _starts(widths, n)
    packed = words.reshape(outer, starts[-1])
    out = _empty(words, (outer, limbs, n), zero=True)   # a limb of width 0 is all zero
    for w, first, last in _runs(widths):
        groups = (last - first) * n // GROUP
        _blocked(_unpack_groups, packed[:, starts[first]:starts[last]].reshape(outer, groups, w),
                 out[:, first:last].reshape(outer, groups, GROUP), w)
    return out


def _empty(like: Words, shape: tuple[int, ...], *, zero: bool = False) -> Words:
    """A new array of ``shape`` of ``like``'s kind (host uint64 or device int64)."""
    if isinstance(like, np.ndarray):
        return (np.zeros if zero else np.empty)(shape, dtype=np.uint64)
    return (torch.zeros if zero else torch.empty)(shape, dtype=torch.int64, device=like.device)


def _blocked(transform: Callable[[Words, int], Words], src: Words, dst: Words, w: int) -> None:
    """``dst[o, g] = transform(src[o, g], w)`` for ``[outer, groups, ...]`` views: on the host in
    blocks of CPU_BLOCK_GROUPS groups (the temporaries of a block stay in cache; whole arrays would
    stream through memory once per op), on a device in one call."""
    if not isinstance(src, np.ndarray):
        dst.copy_(transform(src, w))
        return
    for o in range(src.shape[0]):
        for g in range(0, src.shape[1], CPU_BLOCK_GROUPS):
            dst[o, g:g + CPU_BLOCK_GROUPS] = transform(src[o, g:g + CPU_BLOCK_GROUPS], w)


def _starts(widths: Sequence[int], n: int) -> list[int]:
    """Word offsets of each limb's stream within one leading index (and the total at the end)."""
    return np.cumsum([0] + [n * w // GROUP for w in widths]).tolist()


def _runs(widths: Sequence[int]) -> list[tuple[int, int, int]]:
    """(w, first, last): the maximal runs of consecutive limbs [first, last) of one nonzero width
    (a chain of 40-bit primes is one run: its streams are one contiguous slice)."""
    runs, first = [], 0
    for i in range(1, len(widths) + 1):
        if i == len(widths) or widths[i] != widths[first]:
            if widths[first]:
                runs.append((widths[first], first, i))
            first = i
    return runs


@functools.lru_cache(maxsize=256)
def _plan(w: int, device: torch.device | None) -> dict[str, Words]:
    """Index and shift tables of width ``w`` (1..64) for :func:`_pack_groups` / :func:`_unpack_groups`:
    numpy (uint64 values) for the host (``device`` None), int64 tensors on a device.

    Unpacking residue k: word j = (k w) // 64, shift s = (k w) % 64; its low part is the word
    shifted right by s (logically: masked), its high part the next word shifted left by 64 - s.
    Packing word j: residues k from (64 j) // w to (64 j + 63) // w (at most 64 // w + 2), each
    shifted left (by k w - 64 j >= 0) or logically right (by 64 j - k w > 0); as their bits are
    disjoint, OR-ing them gives the word. Every shift is by at most 63.
    """
    k = np.arange(GROUP)
    j, s = divmod(k * w, 64)
    j_words = np.arange(w)
    first = j_words * 64 // w
    last = np.minimum((j_words * 64 + 63) // w, GROUP - 1)
    steps = int((last - first).max()) + 1
    k_t = first[None, :] + np.arange(steps)[:, None]                    # [steps, w]
    offset = k_t * w - j_words[None, :] * 64                            # > 0: left shift; < 0: right
    right = np.maximum(-offset, 0)

    def index(a) -> Words:
        a = np.asarray(a, dtype=np.int64)
        return a if device is None else torch.as_tensor(a, device=device)

    def value(a) -> Words:   # shift amounts and masks: uint64 on the host, the same bits as int64 on a device
        a = np.asarray(a, dtype=np.int64)
        return a.view(np.uint64) if device is None else torch.as_tensor(a, device=device)

    return {"lo": index(j), "hi": index(np.minimum(j + 1, w - 1)), "s": value(s), "lo_mask": value(_low_masks(64 - s)),
            "up": value(63 - s), "mask": value(_low_masks(np.array([w])))[0],
            "k": index(np.minimum(k_t, GROUP - 1)), "valid": value(-(k_t <= last[None, :]).astype(np.int64)),
            "left": value(np.maximum(offset, 0)), "right": value(right), "right_mask": value(_low_masks(64 - right))}


def _low_masks(bits: np.ndarray) -> np.ndarray:
    """int64 masks of the low ``bits`` (0..64) bits (64 bits: all ones, -1)."""
    bits = np.asarray(bits, dtype=object)
    return np.array([((1 << int(b)) - 1) - ((1 << 64) if b == 64 else 0) for b in bits.reshape(-1)],
                    dtype=np.int64).reshape(bits.shape)


def _tables(like: Words, w: int) -> dict[str, Words]:
    return _plan(w, None if isinstance(like, np.ndarray) else like.device)


def _pack_groups(x: Words, w: int) -> Words:
    """``[..., 64]`` residues of width <= w -> ``[..., w]`` words (the groups' bit streams)."""
    plan = _tables(x, w)
    out = _empty(x, (*x.shape[:-1], w), zero=True)
    for k, valid, left, right, right_mask in zip(plan["k"], plan["valid"], plan["left"], plan["right"],
                                                 plan["right_mask"]):
        part = x[..., k]                     # one new array per step; the rest in place
        part >>= right
        part &= right_mask & valid           # valid: all ones where residue k meets the word, else 0
        part <<= left
        out |= part
    return out


def _unpack_groups(words: Words, w: int) -> Words:
    """``[..., w]`` words -> ``[..., 64]`` residues of w bits (inverse of :func:`_pack_groups`)."""
    plan = _tables(words, w)
    low = words[..., plan["lo"]]
    low >>= plan["s"]
    low &= plan["lo_mask"]
    high = words[..., plan["hi"]]
    high <<= 1                               # two shifts: never one by 64
    high <<= plan["up"]
    low |= high
    low &= plan["mask"]
    return low


@functools.lru_cache(maxsize=64)
def _limits(primes: tuple[int, ...], device: torch.device) -> torch.Tensor:
    return torch.tensor(primes, dtype=torch.int64, device=device)[:, None]


def _check_range(data: torch.Tensor, primes: tuple[int, ...], what: str, labels: Sequence[str],
                 outer: Callable[[tuple[int, ...]], str]) -> None:
    """Every residue of limb i (axis -2) is in [0, primes[i]) (a negative int64 is a uint64 >=
    2^63); ResidueRangeError names the first that is not. One pass, one sync."""
    bad = (data < 0) | (data >= _limits(primes, data.device))
    if not bool(bad.any()):
        return
    where = [int(i) for i in bad.nonzero()[0]]
    *lead, limb, column = where
    value = int(data[tuple(where)]) % (1 << 64)
    raise ResidueRangeError(f"{what}: {outer(tuple(lead))}limb {limb} has a residue >= {labels[limb]} "
                            f"(coefficient {column}: {value} >= {primes[limb]})")


def q_labels(count: int) -> list[str]:
    """Names of the limbs q_0..q_(count-1)."""
    return [f"q_{i}" for i in range(count)]


def qp_labels(alpha: int, q_count: int) -> list[str]:
    """Names of the limbs of QP (P first): p_0..p_(alpha-1), q_0..q_(q_count-1)."""
    return [f"p_{i}" for i in range(alpha)] + q_labels(q_count)
