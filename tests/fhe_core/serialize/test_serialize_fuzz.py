"""Bounded fuzzing: random byte strings and random mutations of valid records (some re-sealed so
the checksum passes and the metadata/shape/range checks are reached) never raise anything but a
SerializationError, and never load as an object that differs from the original.
The generator seed is printed so a failure can be replayed."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from fhe_core import serialize
from fhe_core.errors import SerializationError
from serialize_helpers import MAGIC, meta_encoding, rebuild, split


def _rng() -> np.random.Generator:
    seed = int.from_bytes(os.urandom(8), "little")
    print(f"fuzz seed = {seed}")
    return np.random.default_rng(seed)


def _load(blob: bytes, params) -> object | None:
    """loads, with SerializationError as None; anything else propagates and fails the test."""
    try:
        return serialize.loads(blob, params, max_bytes=1 << 24)
    except SerializationError:
        return None


def _mutate(rng: np.random.Generator, blob: bytes) -> bytes:
    b = bytearray(blob)
    op = int(rng.integers(0, 6))
    at = int(rng.integers(0, len(b)))
    if op == 0:
        b[at] ^= 1 << int(rng.integers(0, 8))
    elif op == 1:
        b[at:at + 8] = rng.bytes(8)
    elif op == 2:
        del b[at:at + int(rng.integers(1, 64))]
    elif op == 3:
        b[at:at] = rng.bytes(int(rng.integers(1, 64)))
    elif op == 4:
        b = b[:at]
    else:
        b[at] = 0xFF
    return bytes(b)


def _mutate_metadata(rng: np.random.Generator, blob: bytes) -> bytes:
    """Replace one metadata value by a random JSON value and re-seal the record."""
    meta = dict(split(blob).meta)
    name = list(meta)[int(rng.integers(0, len(meta)))] if meta else "x"
    choices = [None, True, -1, 0, 1, 2 ** 70, 3.5, "0x1p+40", "", [], [2, 4, 1024], {"a": 1},
               int(rng.integers(-10, 5000)), list(rng.integers(0, 3000, int(rng.integers(0, 5))).tolist())]
    meta[name] = choices[int(rng.integers(0, len(choices)))]
    return rebuild(blob, meta_bytes=meta_encoding(meta))


def test_random_byte_strings(world):
    rng = _rng()
    for _ in range(400):
        length = int(rng.integers(0, 400))
        prefix = MAGIC if rng.integers(0, 2) else b""
        assert _load(prefix + rng.bytes(length), world.params) is None


def test_random_mutations_of_valid_records(world):
    rng = _rng()
    originals = [serialize.dumps(o) for o in (world.params, world.pt, world.ct, world.pk, world.keys)]
    for i in range(400):
        blob = originals[i % len(originals)]
        mutated = _mutate(rng, blob)
        if mutated != blob:
            assert _load(mutated, world.params) is None, "a corrupted record loaded"


def test_random_resealed_payload_and_metadata_mutations(world):
    """Re-sealed mutations reach the deeper checks; what still loads must carry valid residues."""
    rng = _rng()
    originals = [serialize.dumps(o) for o in (world.pt, world.ct, world.keys.relin_key("t"), world.sk, world.keys)]
    originals += [serialize.dumps(o, packed=True) for o in (world.ct, world.keys.relin_key("t"), world.sk)]
    for i in range(300):
        blob = originals[i % len(originals)]
        if i % 2:
            crafted = _mutate_metadata(rng, blob)
        else:
            parts = split(blob)
            crafted = rebuild(blob, payload=_mutate(rng, parts.payload) if parts.payload else b"")
        obj = _load(crafted, world.params)
        data = getattr(obj, "data", None)
        if data is not None:
            primes = np.array(world.params.p_primes + world.params.q_primes, dtype=np.uint64)
            assert (data.numpy().view(np.uint64) < primes.max()).all()


@pytest.mark.parametrize("text", ['{"records":[{"kind":7,"length":-1}]}', '[[[[[[[[[[[[]]]]]]]]]]]]',
                                  json.dumps({"shape": [[1] * 3]}), '{"level":' + "9" * 5000 + "}"])
def test_hostile_metadata(world, text):
    blob = serialize.dumps(world.keys)
    raw = text.encode()
    assert _load(rebuild(blob, meta_bytes=raw + b" " * (-len(raw) % 8)), world.params) is None
