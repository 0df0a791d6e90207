"""The record layout of fhe_core.serialize re-implemented from its documented table (struct and
hashlib only), so the tests can read headers, and craft altered records with a valid checksum,
without trusting the library's own writer."""
from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass

HEADER = struct.Struct("<8sHHIQ32s32s")   # offsets 0, 8, 10, 12, 16, 24, 56; 88 bytes
MAGIC = b"\x89FHESER\n"
PERSON = b"fhe_core.serial1"
KINDS = {"params": 1, "plaintext": 2, "ciphertext": 3, "secret_key": 4, "public_key": 5,
         "switching_key": 6, "relin_key": 7, "galois_key": 8, "eval_key_set": 9}


@dataclass
class Parts:
    """A record split into its documented fields (metadata as a dict)."""

    magic: bytes
    version: int
    kind: int
    params_id: bytes
    checksum: bytes
    meta: dict
    meta_bytes: bytes
    payload: bytes


def split(blob: bytes) -> Parts:
    magic, version, kind, meta_len, payload_len, params_id, checksum = HEADER.unpack_from(blob)
    assert len(blob) == 88 + meta_len + payload_len
    meta_bytes = blob[88:88 + meta_len]
    return Parts(magic, version, kind, params_id, checksum, json.loads(meta_bytes), meta_bytes,
                 blob[88 + meta_len:])


def meta_encoding(meta: dict) -> bytes:
    """Canonical JSON, space-padded to a multiple of 8 bytes."""
    text = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()
    return text + b" " * (-len(text) % 8)


def checksum(blob: bytes) -> bytes:
    h = hashlib.blake2b(digest_size=32, person=PERSON)
    h.update(blob[:56])
    h.update(blob[88:])
    return h.digest()


def build(*, kind: int, params_id: bytes, meta_bytes: bytes, payload: bytes, magic: bytes = MAGIC,
          version: int = 1, meta_len: int | None = None, payload_len: int | None = None,
          seal: bool = True) -> bytes:
    """A record from its fields; ``seal`` fills in a valid checksum."""
    header = HEADER.pack(magic, version, kind, len(meta_bytes) if meta_len is None else meta_len,
                         len(payload) if payload_len is None else payload_len, params_id, bytes(32))
    blob = bytearray(header + meta_bytes + payload)
    if seal:
        blob[56:88] = checksum(bytes(blob))
    return bytes(blob)


def rebuild(blob: bytes, *, meta: dict | None = None, meta_bytes: bytes | None = None, **changes) -> bytes:
    """``blob`` with some fields replaced (metadata as a dict or raw bytes), checksum re-sealed."""
    p = split(blob)
    if meta is not None:
        meta_bytes = meta_encoding(meta)
    fields = {"kind": p.kind, "params_id": p.params_id, "meta_bytes": p.meta_bytes if meta_bytes is None
              else meta_bytes, "payload": p.payload, "magic": p.magic, "version": p.version}
    fields.update(changes)
    return build(**fields)


def word_at(payload: bytes, index: int) -> int:
    """The index-th little-endian uint64 of a payload."""
    return int.from_bytes(payload[8 * index:8 * index + 8], "little")


def with_word(payload: bytes, index: int, value: int) -> bytes:
    return payload[:8 * index] + value.to_bytes(8, "little") + payload[8 * index + 8:]
