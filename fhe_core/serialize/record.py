"""The record layer: fixed header, canonical JSON metadata, payload, BLAKE2b checksum.

:func:`pack` writes one record; :func:`parse` checks a record's sizes, magic, version, kind
and checksum (in that order) and returns views into the input without copying the payload.
The byte layout is documented in the package docstring (:mod:`fhe_core.serialize`).
"""
from __future__ import annotations

import enum
import hashlib
import json
import math
import os
import struct
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, BinaryIO

from fhe_core import jsontext
from fhe_core.errors import (
    BadMagicError, ChecksumError, MetadataError, SerializationError, SizeLimitError, TrailingDataError,
    TruncatedError, UnsupportedVersionError, WrongKindError,
)

MAGIC = b"\x89FHESER\n"           # 0x89 catches 7-bit channels, "\n" catches newline translation
FORMAT_VERSION = 1
HEADER_BYTES = 88
MAX_METADATA_BYTES = 1 << 20      # metadata is small: a few fields, or one entry per key of a set
DEFAULT_MAX_BYTES = 1 << 33       # 8 GiB: a full N=2^16 key set with a few dozen Galois keys
CHECKSUM_BYTES = 32
PARAMS_ID_BYTES = 32

_FIXED = struct.Struct("<8sHHIQ32s32s")  # magic, version, kind, metadata length, payload length, id, checksum
_CHECKSUM_AT = 56                          # offset of the checksum field inside the header
_PERSON = b"fhe_core.serial1"              # BLAKE2b personalisation (16 bytes)
assert _FIXED.size == HEADER_BYTES


class Kind(enum.IntEnum):
    """The object kind stored at header offset 10 (uint16). Numbers are never reused."""

    PARAMS = 1
    PLAINTEXT = 2          # fhe_core.ckks.Plaintext
    CIPHERTEXT = 3         # fhe_core.rlwe.Ciphertext (degree 1 or 2)
    SECRET_KEY = 4
    PUBLIC_KEY = 5
    SWITCHING_KEY = 6
    RELIN_KEY = 7
    GALOIS_KEY = 8
    EVAL_KEY_SET = 9
    CKKS_CIPHERTEXT = 10   # the CIPHERTEXT record plus "scale" and "slots" metadata
    ENCAPSULATION_KEY = 11  # fhe_core.rlwe.EncapsulationKey (sparse-secret encapsulation)


@dataclass(frozen=True, eq=False)
class Record:
    """A record whose sizes, magic, version, kind and checksum have been checked (the checksum
    by the caller when :func:`parse` was told to leave it).

    ``view`` (the whole record), ``metadata`` and ``payload`` are views into the caller's
    buffer (nothing copied yet).
    """

    kind: Kind
    params_id: str          # 64 lowercase hex digits
    view: memoryview
    meta_end: int

    @property
    def metadata(self) -> memoryview:
        return self.view[HEADER_BYTES:self.meta_end]

    @property
    def payload(self) -> memoryview:
        return self.view[self.meta_end:]

    @property
    def size(self) -> int:
        """Total bytes of the record (header, metadata and payload)."""
        return len(self.view)


# ---- writing ---------------------------------------------------------------------------------------

def canonical_json(meta: dict[str, Any]) -> bytes:
    """The one encoding of a metadata object: sorted keys, no whitespace, ASCII, no NaN."""
    return json.dumps(meta, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode("ascii")


def padded(meta_bytes: bytes) -> bytes:
    """Metadata padded with ASCII spaces to a multiple of 8 bytes, so that the payload (at offset
    88 + metadata length) is 8-byte aligned for zero-copy uint64 views."""
    return meta_bytes + b" " * (-len(meta_bytes) % 8)


def params_id_bytes(params_id: object, what: str) -> bytes:
    """The 32 raw bytes of a hex SHA-256 params_id (the form :class:`fhe_core.params.Params` uses)."""
    if isinstance(params_id, str) and len(params_id) == 2 * PARAMS_ID_BYTES and \
            set(params_id) <= set("0123456789abcdef"):
        return bytes.fromhex(params_id)
    raise SerializationError(f"{what}: params_id must be 64 lowercase hex digits (a Params.params_id), "
                             f"got {params_id!r}")


def pack(kind: Kind, params_id: str, meta: dict[str, Any], payload: Sequence[bytes | memoryview]) -> bytes:
    """One record: header, canonical metadata, the concatenated payload parts, checksum filled in.
    The parts are hashed in place and copied once, into the result."""
    return b"".join(pack_parts(kind, params_id, meta, payload))


def pack_parts(kind: Kind, params_id: str, meta: dict[str, Any],
               payload: Sequence[bytes | memoryview]) -> list[bytes | memoryview]:
    """The pieces of :func:`pack`'s record (header with its checksum, metadata, the payload
    views), not yet joined: a sequence of records is then copied once, not twice."""
    parts = [memoryview(p).cast("B") for p in payload]
    fields, meta_bytes = _prefix(kind, params_id, meta, sum(p.nbytes for p in parts))
    h = _hasher(fields, meta_bytes)
    for part in parts:
        h.update(part)
    return [_FIXED.pack(*fields, h.digest()), meta_bytes, *parts]


def write_streamed(out: BinaryIO, kind: Kind, params_id: str, meta: dict[str, Any], payload: BinaryIO,
                   payload_bytes: int, *, chunk_bytes: int = 16 << 20) -> int:
    """Write one record to the file ``out``, its payload copied from the file ``payload`` (from its
    current position, ``payload_bytes`` long): the kernel copies the bytes (:func:`copy_bytes`)
    while this thread reads them once more, from the page cache, for the checksum; the header is
    rewritten at the end. Memory holds one chunk, never the record. Returns the record size."""
    fields, meta_bytes = _prefix(kind, params_id, meta, payload_bytes)
    h = _hasher(fields, meta_bytes)
    out.flush()
    start = out.tell()
    prefix = _FIXED.pack(*fields, bytes(CHECKSUM_BYTES)) + meta_bytes
    src, at = payload.fileno(), payload.tell()
    os.pwrite(out.fileno(), prefix, start)
    with ThreadPoolExecutor(max_workers=1) as pool:
        copied = pool.submit(copy_bytes, src, at, out.fileno(), start + len(prefix), payload_bytes)
        hashed = 0
        while hashed < payload_bytes:
            chunk = os.pread(src, min(chunk_bytes, payload_bytes - hashed), at + hashed)
            if not chunk:
                break
            h.update(chunk)
            hashed += len(chunk)
        copied.result()
    if hashed != payload_bytes:
        raise SerializationError(f"{kind.name.lower()}: the payload file holds {hashed} bytes, "
                                 f"{payload_bytes} were declared")
    os.pwrite(out.fileno(), _FIXED.pack(*fields, h.digest()), start)
    end = start + len(prefix) + payload_bytes
    out.seek(end)
    return end - start


def copy_bytes(src: int, src_offset: int, dst: int, dst_offset: int, count: int) -> None:
    """Copy ``count`` bytes between two file descriptors at the given offsets, in the kernel
    (``os.copy_file_range``: no pass through Python's memory) where it can, else in chunks."""
    done = 0
    if hasattr(os, "copy_file_range"):
        try:
            while done < count:
                step = os.copy_file_range(src, dst, count - done, src_offset + done, dst_offset + done)
                if step == 0:
                    break
                done += step
        except OSError:  # another file system, or no support here: copy the rest by hand
            pass
    while done < count and (chunk := os.pread(src, min(16 << 20, count - done), src_offset + done)):
        done += os.pwrite(dst, chunk, dst_offset + done)
    if done != count:
        raise SerializationError(f"copy_bytes: {done} of {count} bytes copied (the source is shorter)")


def _prefix(kind: Kind, params_id: str, meta: dict[str, Any], payload_bytes: int) -> tuple[tuple, bytes]:
    """The header fields (all but the checksum) and the padded canonical metadata."""
    meta_bytes = padded(canonical_json(meta))
    if len(meta_bytes) > MAX_METADATA_BYTES:
        raise SizeLimitError(f"{kind.name.lower()}: metadata of {len(meta_bytes)} bytes exceeds "
                             f"{MAX_METADATA_BYTES}")
    fields = (MAGIC, FORMAT_VERSION, int(kind), len(meta_bytes), payload_bytes,
              params_id_bytes(params_id, kind.name.lower()))
    return fields, meta_bytes


def _hasher(fields: tuple, meta_bytes: bytes):
    """BLAKE2b over the header's bytes before the checksum field, then the metadata."""
    h = hashlib.blake2b(_FIXED.pack(*fields, bytes(CHECKSUM_BYTES))[:_CHECKSUM_AT],
                        digest_size=CHECKSUM_BYTES, person=_PERSON)
    h.update(meta_bytes)
    return h


def _checksum(view: memoryview) -> bytes:
    """BLAKE2b-256 of every byte of the record except the checksum field itself."""
    h = hashlib.blake2b(digest_size=CHECKSUM_BYTES, person=_PERSON)
    h.update(view[:_CHECKSUM_AT])
    h.update(view[_CHECKSUM_AT + CHECKSUM_BYTES:])
    return h.digest()


# ---- reading ---------------------------------------------------------------------------------------

def as_view(data: object) -> memoryview:
    """``data`` (bytes, bytearray, memoryview) as a flat byte view; anything else is refused."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SerializationError(f"expected bytes, bytearray or memoryview, got {type(data).__name__}")
    view = memoryview(data)
    if not view.c_contiguous:
        raise SerializationError("expected a contiguous buffer")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def parse(data: object, *, max_bytes: int = DEFAULT_MAX_BYTES, expect: Iterable[Kind] | None = None,
          exact: bool = True, checksum: bool = True) -> Record:
    """Check, in order, sizes, magic, version, kind and checksum; no payload byte is copied.

    ``expect``: the kinds the caller accepts (None: any known kind). ``exact``: the input must
    end where the record ends (False lets :func:`parse` read the first record of a sequence).
    ``checksum``: False leaves :func:`check_checksum` to the caller, who must report its
    ChecksumError ahead of any later check's error (``api._checksums_alongside``).
    """
    view = as_view(data)
    meta_len, payload_len = _check_sizes(view, max_bytes, exact)
    view = view[:HEADER_BYTES + meta_len + payload_len]
    header = read_header(view)
    kind = _check_kind(header.kind, expect)
    if checksum:
        check_checksum(view, kind)
    meta_end = HEADER_BYTES + meta_len
    return Record(kind, header.params_id, view, meta_end)


def check_checksum(view: memoryview, kind: Kind) -> None:
    """ChecksumError unless the record ``view`` (exactly one record) carries its own checksum."""
    if _checksum(view) != bytes(view[_CHECKSUM_AT:_CHECKSUM_AT + CHECKSUM_BYTES]):
        raise ChecksumError(f"{kind.name.lower()}: checksum mismatch over {len(view)} bytes "
                            "(the data is corrupted or was altered)")


@dataclass(frozen=True)
class Header:
    """The fixed header of a record, read from its first bytes alone (see :func:`read_header`).
    ``kind`` is the raw number (it may name no known kind)."""

    kind: int
    params_id: str
    metadata_bytes: int
    payload_bytes: int


def read_header(data: object) -> Header:
    """The header of a record whose first :data:`HEADER_BYTES` bytes are ``data`` (more may
    follow): magic and version are checked, nothing else; the checksum needs the whole record.
    For a receiver that must refuse an upload (a secret key, foreign parameters) from its first
    part, before the rest arrives. TruncatedError, BadMagicError, UnsupportedVersionError."""
    view = as_view(data)
    if len(view) < HEADER_BYTES:
        raise TruncatedError(f"{len(view)} bytes are shorter than the {HEADER_BYTES}-byte header")
    magic, version, kind, meta_len, payload_len, raw_id, _ = _FIXED.unpack_from(view)
    if magic != MAGIC:
        raise BadMagicError(f"not a serialized fhe_core object: magic bytes {magic!r}, expected {MAGIC!r}")
    if version != FORMAT_VERSION:
        raise UnsupportedVersionError(f"format version {version} is not supported (this build reads "
                                      f"version {FORMAT_VERSION})")
    return Header(kind, raw_id.hex(), meta_len, payload_len)


def _check_sizes(view: memoryview, max_bytes: int, exact: bool) -> tuple[int, int]:
    """(metadata length, payload length) after the size checks; nothing is read past the header."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < HEADER_BYTES:
        raise SerializationError(f"max_bytes must be an int >= {HEADER_BYTES}, got {max_bytes!r}")
    size = len(view)
    if size > max_bytes:
        raise SizeLimitError(f"input of {size} bytes exceeds max_bytes={max_bytes}")
    if size == 0:
        raise TruncatedError(f"empty input: a serialized object has at least {HEADER_BYTES} bytes")
    if size < HEADER_BYTES:
        raise TruncatedError(f"input of {size} bytes is shorter than the {HEADER_BYTES}-byte header")
    meta_len, payload_len = struct.unpack_from("<IQ", view, 12)
    if meta_len > MAX_METADATA_BYTES:
        raise SizeLimitError(f"declared metadata of {meta_len} bytes exceeds {MAX_METADATA_BYTES}")
    total = HEADER_BYTES + meta_len + payload_len
    if total > max_bytes:
        raise SizeLimitError(f"declared size of {total} bytes (payload {payload_len}) exceeds "
                             f"max_bytes={max_bytes}")
    if total > size:
        raise TruncatedError(f"input of {size} bytes is shorter than its declared size of {total} bytes "
                             f"(header {HEADER_BYTES} + metadata {meta_len} + payload {payload_len})")
    if exact and total < size:
        raise TrailingDataError(f"{size - total} bytes follow the declared end of the object at {total}")
    return meta_len, payload_len


def _check_kind(value: int, expect: Iterable[Kind] | None) -> Kind:
    try:
        kind = Kind(value)
    except ValueError:
        raise WrongKindError(f"unknown object kind {value}") from None
    if expect is not None:
        allowed = sorted(expect)
        if kind not in allowed:
            names = ", ".join(k.name.lower() for k in allowed)
            raise WrongKindError(f"object kind {kind.name.lower()} is not one of the expected: {names}")
    return kind


def decode_metadata(record: Record) -> dict[str, Any]:
    """The metadata object; it must be the canonical JSON encoding (one encoding per object)."""
    what = record.kind.name.lower()
    raw = bytes(record.metadata)
    if len(raw) % 8:
        raise MetadataError(f"{what}: metadata length {len(raw)} is not a multiple of 8")
    try:
        meta = jsontext.loads(raw.decode("ascii"), parse_constant=_refuse_constant,
                              object_pairs_hook=_refuse_duplicates)
    except ValueError as exc:  # UnicodeDecodeError is one
        raise MetadataError(f"{what}: metadata is not valid ASCII JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise MetadataError(f"{what}: metadata must be a JSON object, got {type(meta).__name__}")
    try:
        canonical = padded(canonical_json(meta))
    except ValueError:  # e.g. 1e999 parses as inf, which has no canonical encoding
        canonical = b""
    if canonical != raw:
        raise MetadataError(f"{what}: metadata is not in canonical form (sorted keys, no whitespace, "
                            "space padding to 8 bytes)")
    return meta


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not allowed")


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate keys")
    return out


def float_hex(value: float) -> str:
    """A float64 as its exact hexadecimal text (``float.hex``): no decimal rounding anywhere."""
    if not math.isfinite(value):
        raise SerializationError(f"cannot store the non-finite value {value}")
    return float(value).hex()
