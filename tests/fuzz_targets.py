"""Fuzz targets: every deserializer of the project, its valid inputs, its mutators and its contract.

A :class:`Target` reads untrusted bytes. Its contract, checked by :func:`check` on every input:
it either returns an object that survives a round trip (written again and read back, it is the
same object) or raises one of the target's documented errors (a subclass of
:class:`fhe_core.errors.FHEError`). Anything else fails: another exception (a numpy RuntimeWarning,
a silent overflow or invalid cast, counts as one), a run longer than
:data:`TIME_LIMIT_S` (a hang), or a peak of traced memory (Python and numpy allocations) above
:data:`MEMORY_SLACK_BYTES` + :data:`MEMORY_PER_INPUT_BYTE` x the input's length (an allocation
sized by a forged length field rather than by the bytes present).

Inputs are valid records (built from tiny insecure parameters, once per process) mutated by
:func:`mutate`: bit flips, interesting values over bytes and over 4- or 8-byte length fields,
truncation, insertion, deletion, duplication, splices of two valid inputs, and structure-aware
edits that reach the deeper checks: metadata JSON values changed with the record's checksum
re-sealed, npz members rewritten with other dtypes, shapes or values, a forged ``.npy`` shape, JSON
documents with values replaced or nested deeply. Plain random bytes complete the mix.

Used by the bounded hypothesis tests (``tests/**/test_fuzz_*.py``, a few hundred inputs per
target in the default test run) and by ``scripts/fuzz.py`` for the long run (docs/fuzzing.md).
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import json
import math
import os
import random
import signal
import struct
import tempfile
import tracemalloc
import warnings
import zipfile
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

TIME_LIMIT_S = 10.0                 # one input; the slowest valid input takes well under 1 s
MEMORY_SLACK_BYTES = 48 << 20       # parameters' tables, contexts and caches built on first use
MEMORY_PER_INPUT_BYTE = 64          # words unpacked from bits (x8), copies to tensors, a key's a parts
MAX_INPUT_BYTES = 1 << 24           # the max_bytes every target is called with, where it takes one

RECORD_MAGIC = b"\x89FHESER\n"
_RECORD_HEADER = struct.Struct("<8sHHIQ32s32s")
_PERSON = b"fhe_core.serial1"
INTERESTING_INTS = (0, 1, 2, 7, 8, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF,
                    1 << 32, 1 << 40, (1 << 62) + 1, (1 << 63) - 1, (1 << 64) - 1)


class FuzzFailure(AssertionError):
    """The target broke its contract on one input (the message says how; the input is attached)."""

    def __init__(self, message: str, data: bytes):
        super().__init__(f"{message} (input of {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()[:16]})")
        self.data = data


class _Timeout(BaseException):
    """Raised inside a target that runs past its time limit (a BaseException: no except clause
    of the code under test catches it)."""


@dataclass(frozen=True)
class Target:
    """One deserializer.

    name: "<module>.<function>", as the docs list it. corpus: the valid inputs (built lazily,
    cached). read: the deserializer on one input. errors: its documented error classes.
    roundtrip: given the input and what ``read`` returned, raise AssertionError unless writing
    the result and reading it back gives the same object. mutators: the structure-aware
    mutators that apply to this format (the byte-level ones always apply).
    """

    name: str
    corpus: Callable[[], list[bytes]]
    read: Callable[[bytes], object]
    errors: tuple[type[BaseException], ...]
    roundtrip: Callable[[bytes, object], None]
    mutators: tuple[Callable[[random.Random, bytes], bytes], ...] = ()


# ---- the contract ------------------------------------------------------------------------------------

@contextmanager
def _time_limit(seconds: float):
    """Interrupt the block after ``seconds`` (SIGALRM: main thread only; elsewhere no limit)."""
    try:
        previous = signal.signal(signal.SIGALRM, _raise_timeout)
    except ValueError:  # not the main thread
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _raise_timeout(signum, frame):
    raise _Timeout()


def check(target: Target, data: bytes, *, memory: bool = True) -> str:
    """Run ``target`` on ``data`` under its contract; returns "ok" or the documented error's
    class name, raises :class:`FuzzFailure` otherwise. ``memory``: trace the allocations."""
    if memory:
        tracemalloc.start()
    try:
        try:
            with _time_limit(TIME_LIMIT_S), warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)   # numpy's silent overflow or invalid cast
                try:
                    result = target.read(data)
                except target.errors as exc:
                    outcome = type(exc).__name__
                except Exception as exc:
                    raise FuzzFailure(f"{target.name}: untyped {type(exc).__name__}: {exc}", data) from exc
                else:
                    outcome = "ok"
        except _Timeout:
            raise FuzzFailure(f"{target.name}: no answer within {TIME_LIMIT_S} s", data) from None
        if memory:
            peak = tracemalloc.get_traced_memory()[1]
            bound = MEMORY_SLACK_BYTES + MEMORY_PER_INPUT_BYTE * len(data)
            if peak > bound:
                raise FuzzFailure(f"{target.name}: peak allocation of {peak} bytes exceeds {bound}", data)
    finally:
        if memory:
            tracemalloc.stop()
    if outcome == "ok":
        try:
            target.roundtrip(data, result)
        except AssertionError as exc:
            raise FuzzFailure(f"{target.name}: accepted, but the round trip differs: {exc}", data) from None
        except Exception as exc:   # what was accepted cannot be written or read back
            raise FuzzFailure(f"{target.name}: accepted, but the round trip raised {type(exc).__name__}: {exc}",
                              data) from exc
    return outcome


# ---- byte-level mutators (every format) ------------------------------------------------------------------

def _flip_bit(rng: random.Random, b: bytearray) -> None:
    b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)


def _interesting_byte(rng: random.Random, b: bytearray) -> None:
    b[rng.randrange(len(b))] = rng.choice((0, 1, 0x7F, 0x80, 0xFE, 0xFF, 0x20, 0x22, 0x7B, 0x5B))


def _random_bytes(rng: random.Random, b: bytearray) -> None:
    at = rng.randrange(len(b))
    b[at:at + 8] = rng.randbytes(min(8, len(b) - at))


def _length_field(rng: random.Random, b: bytearray) -> None:
    """A 2-, 4- or 8-byte little-endian field set to an interesting value (a length, a count)."""
    width = rng.choice((2, 4, 8))
    if len(b) < width:
        return
    at = rng.randrange(len(b) - width + 1)
    if rng.random() < 0.5:
        at -= at % width                    # the fields of a record header are aligned
    value = rng.choice(INTERESTING_INTS + (len(b), len(b) + 1, len(b) - 1, len(b) * 2))
    if rng.random() < 0.3:
        value += rng.choice((-1, 1))
    b[at:at + width] = (value % (1 << (8 * width))).to_bytes(width, "little")


def _truncate(rng: random.Random, b: bytearray) -> None:
    del b[rng.randrange(len(b)):]


def _delete(rng: random.Random, b: bytearray) -> None:
    at = rng.randrange(len(b))
    del b[at:at + rng.choice((1, 2, 4, 8, 64, 1024))]


def _insert(rng: random.Random, b: bytearray) -> None:
    at = rng.randrange(len(b) + 1)
    b[at:at] = rng.randbytes(rng.choice((1, 4, 8, 88, 512)))


def _duplicate(rng: random.Random, b: bytearray) -> None:
    at = rng.randrange(len(b))
    b[at:at] = b[at:at + rng.choice((8, 88, 256, 4096))]


BYTE_MUTATORS = (_flip_bit, _interesting_byte, _random_bytes, _length_field, _truncate, _delete, _insert,
                 _duplicate)


def mutate(rng: random.Random, data: bytes, corpus: Sequence[bytes],
           mutators: Sequence[Callable[[random.Random, bytes], bytes]] = ()) -> bytes:
    """One to four mutations of ``data``: structure-aware ones (``mutators``) or byte-level ones,
    sometimes a splice with another valid input; empty input stays possible."""
    out = bytes(data)
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4))):
        choice = rng.random()
        if mutators and choice < 0.45:
            out = rng.choice(mutators)(rng, out)
        elif choice < 0.52 and corpus:
            other = rng.choice(corpus)
            out = out[:rng.randrange(len(out) + 1)] + other[rng.randrange(len(other) + 1):]
        elif out:
            b = bytearray(out)
            rng.choice(BYTE_MUTATORS)(rng, b)
            out = bytes(b)
    return out


def random_input(rng: random.Random) -> bytes:
    """Random bytes, sometimes behind the record magic or a zip signature (to pass the first check)."""
    body = rng.randbytes(rng.choice((0, 1, 7, 8, 87, 88, 89, 200, 1000)))
    return rng.choice((b"", b"", RECORD_MAGIC, b"PK\x03\x04", b"HELRDATA", b"HELRCKPT", b"{")) + body


def fuzz_input(rng: random.Random, target: Target) -> bytes:
    """The next input for ``target``: mostly a mutated valid input, sometimes random bytes,
    sometimes a valid input unchanged."""
    corpus = target.corpus()
    choice = rng.random()
    if choice < 0.08:
        return random_input(rng)
    if choice < 0.1:
        return rng.choice(corpus)
    return mutate(rng, rng.choice(corpus), corpus, target.mutators)


# ---- structure-aware mutators: serialized records -----------------------------------------------------------

def _record_offsets(b: bytes | bytearray) -> list[int]:
    offsets, at = [], b.find(RECORD_MAGIC)
    while at >= 0:
        offsets.append(at)
        at = b.find(RECORD_MAGIC, at + 1)
    return offsets


def reseal(data: bytes) -> bytes:
    """Every record found in ``data`` (innermost last in the file, so inner records first) gets the
    checksum its bytes now have: a mutation then reaches the checks behind the checksum."""
    b = bytearray(data)
    for at in reversed(_record_offsets(b)):
        if len(b) - at < _RECORD_HEADER.size:
            continue
        meta_len, payload_len = struct.unpack_from("<IQ", b, at + 12)
        end = at + _RECORD_HEADER.size + meta_len + payload_len
        if end > len(b):
            continue
        h = hashlib.blake2b(digest_size=32, person=_PERSON)
        h.update(b[at:at + 56])
        h.update(b[at + 88:end])
        b[at + 56:at + 88] = h.digest()
    return bytes(b)


def mutate_resealed(rng: random.Random, data: bytes) -> bytes:
    """A byte-level mutation, then the checksums re-sealed."""
    b = bytearray(data)
    if b:
        rng.choice(BYTE_MUTATORS)(rng, b)
    return reseal(bytes(b))


def mutate_record_metadata(rng: random.Random, data: bytes) -> bytes:
    """One record's metadata JSON with a value replaced (or a field added or removed), re-encoded
    canonically, its length field updated and the checksums re-sealed."""
    offsets = [at for at in _record_offsets(data) if len(data) - at >= _RECORD_HEADER.size]
    if not offsets:
        return data
    at = rng.choice(offsets)
    meta_len = struct.unpack_from("<I", data, at + 12)[0]
    raw = data[at + 88:at + 88 + meta_len]
    try:
        meta = json.loads(raw)
    except (ValueError, RecursionError):
        return data
    text = mutate_json_value(rng, meta).encode()
    if rng.random() < 0.8:
        text += b" " * (-len(text) % 8)
    b = bytearray(data[:at + 88] + text + data[at + 88 + meta_len:])
    struct.pack_into("<I", b, at + 12, len(text))
    return reseal(bytes(b))


def mutate_seeded_ciphertext(rng: random.Random, data: bytes) -> bytes:
    """One ciphertext record (rlwe or CKKS) moved between its whole and seeded forms, or given
    another seed, its lengths updated and checksums re-sealed: a whole degree-1 record made seeded
    (its payload cut to c_0, a random uniform_seed added) or a seeded one given a random seed --
    both load, c_1 the new seed's expansion -- or the seed dropped (c_1 missing) or the component
    count changed beside it (both refused)."""
    offsets = [at for at in _record_offsets(data) if len(data) - at >= _RECORD_HEADER.size
               and struct.unpack_from("<H", data, at + 10)[0] in (3, 10)]
    if not offsets:
        return data
    at = rng.choice(offsets)
    meta_len, payload_len = struct.unpack_from("<IQ", data, at + 12)
    try:
        meta = json.loads(data[at + 88:at + 88 + meta_len])
        components = meta["shape"][0]
    except (ValueError, RecursionError, KeyError, IndexError, TypeError):
        return data
    if not isinstance(meta["shape"], list):  # an earlier mutation made it a string (indexable, not assignable)
        return data
    payload = data[at + 88 + meta_len:at + 88 + meta_len + payload_len]
    choice = rng.random()
    if choice < 0.6:
        if "uniform_seed" not in meta and components == 2:
            payload = payload[:len(payload) // 2]
        meta["uniform_seed"] = rng.randbytes(32).hex()
    elif choice < 0.8:
        meta.pop("uniform_seed", None)
    else:
        meta["shape"][0] = rng.choice((1, 3))
    text = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    end = at + 88 + meta_len + payload_len
    b = bytearray(data[:at + 88] + text + payload + data[end:])
    struct.pack_into("<IQ", b, at + 12, len(text), len(payload))
    return reseal(bytes(b))


RECORD_MUTATORS = (mutate_resealed, mutate_resealed, mutate_record_metadata, mutate_record_metadata,
                   mutate_seeded_ciphertext)


def mutate_prefixed_json(rng: random.Random, data: bytes) -> bytes:
    """A file of an 8-byte magic, a uint32 length and that many bytes of JSON (an encrypted
    dataset's header) with one JSON value replaced and the length updated."""
    if len(data) < 12:
        return data
    length = struct.unpack_from("<I", data, 8)[0]
    try:
        doc = json.loads(data[12:12 + length])
    except (ValueError, RecursionError):
        return data
    text = mutate_json_value(rng, doc).encode()
    return data[:8] + struct.pack("<I", len(text)) + text + data[12 + length:]


# ---- structure-aware mutators: JSON ------------------------------------------------------------------------

_JSON_VALUES = (None, True, False, 0, -1, 1, 2, 3, 1023, 1024, 2 ** 31, 2 ** 63, 2 ** 70, -(2 ** 70), 0.5, 1e308,
                -0.0, "", "a", "0x1p+40", "0x1.0000000000000p+40", [], [0], [1, 2], [[0, 1]], {}, {"a": 1})
_RAW_JSON = ("1e999", "-1e999", "NaN", "Infinity", "9" * 5000, "[" * 3000 + "]" * 3000, "[" * 100000 + "]" * 100000,
             '{"a":' * 50000 + "1" + "}" * 50000, '"\\ud800"', "1" + "0" * 400)


def _paths(value: object, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys and indices) to a value inside a JSON document, the root included, down to
    64 levels (Python 3.12's json parses documents nested thousands deep: no recursion past that)."""
    out = [prefix]
    if len(prefix) >= 64:
        return out
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value[:64]):
            out += _paths(v, prefix + (i,))
    return out


def mutate_json_value(rng: random.Random, doc: object) -> str:
    """``doc`` with one value replaced, a key added or deleted, serialized as canonical JSON;
    sometimes with raw text no JSON encoder writes (1e999, NaN, deep nesting, huge numbers)."""
    doc = json.loads(json.dumps(doc))
    path = rng.choice(_paths(doc))
    raw = rng.random() < 0.15
    marker = "\u0000RAW\u0000"
    replacement = marker if raw else rng.choice(_JSON_VALUES)
    if not path:
        doc = replacement
    else:
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and rng.random() < 0.15:
            del parent[path[-1]]
        elif isinstance(parent, dict) and rng.random() < 0.1:
            parent["extra"] = replacement
        elif isinstance(parent, list) and rng.random() < 0.2:
            parent.append(replacement)
        else:
            parent[path[-1]] = replacement
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return text.replace(json.dumps(marker), rng.choice(_RAW_JSON)) if raw else text


def mutate_json_text(rng: random.Random, data: bytes) -> bytes:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return data
    return mutate_json_value(rng, doc).encode()


# ---- structure-aware mutators: npz archives ----------------------------------------------------------------

_DTYPES = ("bool", "int8", "uint8", "int32", "int64", "uint64", "float16", "float32", "float64", "complex128",
           "<U4", "S3", "<M8[s]", ">i8", ">f8")


def _npz_arrays(data: bytes) -> dict[str, np.ndarray] | None:
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except Exception:
        return None
    return {name: a for name, a in arrays.items() if isinstance(a, np.ndarray)}


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _mutated_array(rng: random.Random, a: np.ndarray) -> np.ndarray:
    choice = rng.randrange(6)
    if choice == 0:
        try:
            with np.errstate(all="ignore"):    # NaN or inf cast to an integer type: that is the point
                return a.astype(rng.choice(_DTYPES))
        except (TypeError, ValueError, OverflowError):
            return a
    if choice == 1:
        return a.reshape(-1) if a.ndim != 1 else a.reshape(1, -1)
    if choice == 2:
        return a[: rng.randrange(len(a) + 1)] if a.ndim else a
    if choice == 3:
        return np.concatenate([a, a]) if a.ndim else a
    if choice == 4:
        return np.asarray(rng.choice((0, -1, 1, 2 ** 40, 2 ** 63 - 1, -(2 ** 63), float("nan"), float("inf"), 1e300)))
    out = a.copy()
    if out.size and out.dtype.kind in "biuf":
        flat = out.reshape(-1)
        value = rng.choice((0, 1, -1, 2, 3, 255, 2 ** 31, 2 ** 62, -(2 ** 63), float("nan"), float("-inf"), 1e30))
        try:
            with np.errstate(all="ignore"):
                flat[rng.randrange(flat.size)] = value
        except (ValueError, OverflowError, TypeError):
            pass
    return out


def mutate_npz(rng: random.Random, data: bytes) -> bytes:
    """An npz archive rewritten with one array (or the JSON header array) changed, dropped,
    duplicated under another name, or replaced."""
    arrays = _npz_arrays(data)
    if not arrays:
        return data
    name = rng.choice(sorted(arrays))
    choice = rng.random()
    if name == "header" and choice < 0.7:
        text = mutate_json_text(rng, arrays["header"].tobytes())
        arrays["header"] = np.frombuffer(text, dtype=np.uint8)
    elif choice < 0.1:
        del arrays[name]
    elif choice < 0.15:
        arrays["extra"] = arrays[name]
    else:
        arrays[name] = _mutated_array(rng, arrays[name])
    return _npz_bytes(arrays)


def forge_npy_shape(rng: random.Random, data: bytes) -> bytes:
    """A stored (uncompressed) npz member whose ``.npy`` header claims a large shape while the member
    holds only a few bytes: an allocation sized by the header would be the forged length."""
    arrays = _npz_arrays(data)
    if not arrays:
        return data
    name = rng.choice(sorted(arrays))
    dtype = arrays[name].dtype if arrays[name].dtype.kind != "O" else np.dtype("int64")
    shape = rng.choice(((1 << 28,), (1 << 20, 1 << 20), (1 << 62,), (7, 1 << 40), (2 ** 31 - 1, 3)))
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(member, header)
    member.write(rng.randbytes(rng.choice((0, 8, 64))))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        for other, array in arrays.items():
            if other == name:
                archive.writestr(f"{other}.npy", member.getvalue())
            else:
                buffer = io.BytesIO()
                np.lib.format.write_array(buffer, array, allow_pickle=False)
                archive.writestr(f"{other}.npy", buffer.getvalue())
    return out.getvalue()


NPZ_MUTATORS = (mutate_npz, mutate_npz, mutate_npz, forge_npy_shape)


# ---- the small world the valid inputs come from ----------------------------------------------------------------

@dataclass(frozen=True)
class World:
    params: object
    ctx: object
    sk: object
    pk: object
    keys: object
    pt: object
    ct: object
    ckks_ct: object


@functools.cache
def world():
    """N = 2^10, L = 3 (insecure, tests only): a key of each kind (the eval key set with the encapsulation
    pair), a plaintext, ciphertexts."""
    from fhe_core import ckks, rlwe
    from fhe_core.params import preset

    params = preset("N10QP241L3D4Insecure", allow_insecure=True)
    ctx = rlwe.RLWEContext.from_params(params)
    sk = rlwe.gen_secret_key(ctx, seed=bytes(range(32)))
    keys = rlwe.gen_eval_keys(ctx, sk, [rlwe.galois_element_for_rotation(1, params.n)], seed=bytes(32))
    ephemeral = rlwe.gen_ephemeral_secret(ctx, 32, seed=bytes(range(1, 33)))
    for key in rlwe.gen_encapsulation_keys(ctx, sk, ephemeral, seed=bytes(32)):
        keys.add(key)
    pt = ckks.Encoder(params).encode(np.linspace(-1, 1, params.slots))
    ckks_ct = ckks.Encryptor(params, sk).encrypt(pt, seed=bytes(32))
    # a seeded rlwe ciphertext (a fresh secret-key encryption: c_1 from its uniform seed)
    ct = rlwe.Ciphertext(data=ckks_ct.data, level=ckks_ct.level, params_id=ckks_ct.params_id,
                         uniform_seed=ckks_ct.uniform_seed)
    return World(params, ctx, sk, rlwe.gen_public_key(ctx, sk, seed=bytes(32)), keys, pt, ct, ckks_ct)


@functools.cache
def linear_world():
    """The same parameters with linear key switching (their own params_id) and an eval key set of that method."""
    from fhe_core import rlwe
    from fhe_core.params import Params, preset_literal

    literal = dataclasses.replace(preset_literal("N10QP241L3D4Insecure"), key_switching="linear")
    params = Params.from_literal(literal, allow_insecure=True)
    ctx = rlwe.RLWEContext.from_params(params)
    sk = rlwe.gen_secret_key(ctx, seed=bytes(range(32)))
    return params, rlwe.gen_eval_keys(ctx, sk, [rlwe.galois_element_for_rotation(1, params.n)], seed=bytes(32))


def _params_of(params_id: str):
    """The world's parameters whose params_id this is (a record's or an object's): linear or the default."""
    params = linear_world()[0]
    return params if params_id == params.params_id else world().params


# ---- comparing what was read -------------------------------------------------------------------------------

def same(a: object, b: object, where: str = "") -> None:
    """AssertionError unless ``a`` and ``b`` are the same value (tensors and arrays exactly, NaNs
    equal; dataclasses, key sets and containers field by field)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and \
            a.device == b.device and torch.equal(a, b), f"{where}: tensors differ"
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and \
            np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), f"{where}: arrays differ"
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), f"{where}: {a!r} != {b!r}"
    elif hasattr(a, "__dataclass_fields__"):
        assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
        for name in a.__dataclass_fields__:
            same(getattr(a, name), getattr(b, name), f"{where}.{name}")
    elif type(a).__name__ == "EvalKeySet":
        assert type(b) is type(a) and a.params_id == b.params_id and a.has_relin == b.has_relin and \
            a.galois_elements == b.galois_elements and \
            a.encapsulation_directions == b.encapsulation_directions, f"{where}: key sets hold different keys"
        if a.has_relin:
            same(a.relin_key("fuzz"), b.relin_key("fuzz"), f"{where}.relin")
        for k in a.galois_elements:
            same(a.galois_key(k, "fuzz"), b.galois_key(k, "fuzz"), f"{where}.galois[{k}]")
        for d in a.encapsulation_directions:
            same(a.encapsulation_key(d, "fuzz"), b.encapsulation_key(d, "fuzz"), f"{where}.encapsulation[{d}]")
    elif isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), f"{where}: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


# ---- fhe_core.serialize ------------------------------------------------------------------------------------

def _serialize_corpus() -> list[bytes]:
    from fhe_core import serialize

    w = world()
    objects = [w.params, w.pt, w.ct, w.ckks_ct, w.pk, w.keys.relin_key("fuzz"), w.keys,
               *(w.keys.encapsulation_key(d, "fuzz") for d in sorted(w.keys.encapsulation_directions))]
    blobs = [serialize.dumps(o) for o in objects]
    blobs += [serialize.dumps(o, packed=True) for o in (w.ct, w.ckks_ct, w.keys)]
    blobs += [serialize.dumps(o, compress=False) for o in (w.ct, w.ckks_ct, w.keys)]  # ciphertexts: c_1 in full
    linear_keys = linear_world()[1]  # linear keys (their preprocessed form), read with their parameters
    blobs += [serialize.dumps(linear_keys.relin_key("fuzz"), packed=True), serialize.dumps(linear_keys, compress=False)]
    return blobs


def _record_flags(data: bytes) -> dict[str, bool]:
    """How a record was written (compress, packed), read from its metadata: a round trip writes
    the object back the same way."""
    meta = json.loads(data[88:88 + struct.unpack_from("<I", data, 12)[0]])
    inner = [json.loads(data[at + 88:at + 88 + struct.unpack_from("<I", data, at + 12)[0]])
             for at in _record_offsets(data)[1:]]
    first = inner[0] if "records" in meta and inner else meta
    return {"compress": bool(first.get("compressed", True)), "packed": "bits" in first}


def _serialize_roundtrip(data: bytes, obj: object) -> None:
    """Written again the same way (compressed, packed) and read back, it is the same object.
    (Not always the same bytes: a key set's members may come in another order, a packed limb
    may declare more bits than its residues need.)"""
    from fhe_core import serialize
    from fhe_core.params import Params

    w = world()
    if isinstance(obj, Params):
        assert obj.params_id == w.params.params_id, "params: another parameter set"
        return
    again = serialize.dumps(obj, **_record_flags(data))
    same(obj, serialize.loads(again, _params_of(obj.params_id), expect=type(obj)), "loads(dumps(obj))")


def _loads(data: bytes) -> object:
    from fhe_core import rlwe, serialize
    from fhe_core.errors import SerializationError

    try:  # a record of the linear world's params_id is read with those parameters
        params = _params_of(serialize.read_header(data).params_id)
    except SerializationError:
        params = world().params
    return serialize.loads(data, params, max_bytes=MAX_INPUT_BYTES,
                           expect=None if data[10:12] != b"\x04\x00" else rlwe.SecretKey)


def _loads_many(data: bytes) -> list:
    from fhe_core import serialize

    return serialize.loads_many(data, world().params, max_bytes=MAX_INPUT_BYTES, max_count=16)


def _loads_many_corpus() -> list[bytes]:
    from fhe_core import serialize

    w = world()
    return [serialize.dumps_many([w.ct, w.ckks_ct, w.pt]), serialize.dumps_many([w.keys.relin_key("f"), w.pk]),
            serialize.dumps_many([w.ckks_ct] * 3, packed=True)]


def _loads_many_roundtrip(data: bytes, objs: list) -> None:
    from fhe_core import serialize

    assert objs, "loads_many returned nothing"
    same(objs, serialize.loads_many(serialize.dumps_many(objs), world().params), "loads_many(dumps_many(objs))")


def _load_file(data: bytes) -> object:
    """serialize.load: the bytes written to a file, then memory-mapped and read."""
    from fhe_core import serialize

    with tempfile.TemporaryDirectory(prefix="fuzz-load-") as folder:
        path = Path(folder) / "record"
        path.write_bytes(data)
        return serialize.load(path, world().params, max_bytes=MAX_INPUT_BYTES)


def _load_corpus() -> list[bytes]:
    return [b for b in _serialize_corpus() if b[10:12] != b"\x04\x00"]


def _read_header(data: bytes) -> object:
    from fhe_core import serialize

    return serialize.read_header(data)


def _read_header_roundtrip(data: bytes, header) -> None:
    _, version, kind, meta_len, payload_len, raw_id, _ = _RECORD_HEADER.unpack_from(data)
    assert (header.kind, header.params_id, header.metadata_bytes, header.payload_bytes) == \
        (kind, raw_id.hex(), meta_len, payload_len), "the header fields differ from the bytes"


def _peek(data: bytes) -> object:
    from fhe_core import serialize

    return serialize.peek(data, max_bytes=MAX_INPUT_BYTES)


def _peek_roundtrip(data: bytes, info) -> None:
    assert info.size == len(data), "peek: the record size is not the input's"
    assert int(info.kind) == struct.unpack_from("<H", data, 10)[0] and isinstance(info.metadata, dict)
    assert info.params_id == data[24:56].hex()


def _params_literal(data: bytes) -> object:
    from fhe_core.params import ParamsLiteral

    return ParamsLiteral.from_json(data.decode("utf-8", "replace"))  # the service passes text


def _params_literal_roundtrip(data: bytes, literal) -> None:
    from fhe_core.params import ParamsLiteral

    same(ParamsLiteral.from_json(literal.to_json()), literal, "ParamsLiteral.from_json(to_json())")


def _params_literal_corpus() -> list[bytes]:
    from fhe_core.params import preset_literal

    return [preset_literal(name).to_json().encode() for name in ("N10QP241L3D4Insecure", "N16QP1766L30D3")]


def _params_from_literal(data: bytes) -> object:
    """What the service does with a literal from a request (``Service.params``): ParamsLiteral, then
    Params.from_literal with the 128-bit check (the service's default)."""
    from fhe_core.params import Params, ParamsLiteral

    return Params.from_literal(ParamsLiteral.from_json(data.decode("utf-8", "replace")), allow_insecure=False)


def _params_roundtrip(data: bytes, params) -> None:
    from fhe_core.params import Params

    again = Params.from_literal(params.literal)
    assert again.params_id == params.params_id, "the literal gives another parameter set"


# ---- apps ---------------------------------------------------------------------------------------------

@functools.cache
def _forest():
    import xgboost

    from apps.xgboost.encoding import PublicBinning
    from apps.xgboost.export import export_booster

    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 4)).astype(np.float32)
    x[rng.random(x.shape) < 0.05] = np.nan
    y = (np.nan_to_num(x[:, 0]) > 0).astype(int) + (np.nan_to_num(x[:, 1]) > 0.5).astype(int)
    train = xgboost.QuantileDMatrix(x, label=y, max_bin=4)
    booster = xgboost.train({"objective": "multi:softprob", "num_class": 3, "tree_method": "hist", "max_depth": 2,
                             "max_bin": 4, "seed": 0, "nthread": 1}, train, num_boost_round=2)
    return export_booster(booster, PublicBinning.from_dmatrix(train), frac_bits=8)


@functools.cache
def _private_forest():
    from apps.xgboost.grid import FixedPointGrid
    from apps.xgboost.private_forest import PrivateForest

    return PrivateForest.from_forest(_forest(), FixedPointGrid(5, 3))


def _private_forest_from_bytes(data: bytes) -> object:
    from apps.xgboost.private_forest import PrivateForest

    return PrivateForest.from_bytes(data, max_bytes=MAX_INPUT_BYTES)


def _idash_model():
    from apps.xgboost.plan import IdashModel

    rng = np.random.default_rng(1)
    return IdashModel(rng.integers(0, 2, (6, 3)).astype(np.int64), rng.integers(-50, 50, (6, 4)).astype(np.int64), 3)


def _read_archive(data: bytes) -> object:
    from apps.xgboost.archive import read_archive

    return read_archive(data, "fuzz", MAX_INPUT_BYTES, "fhe-ml/idash-model/1", ("thresholds", "leaves"))


def _read_archive_roundtrip(data: bytes, result) -> None:
    from apps.xgboost.archive import read_archive, write_archive

    header, arrays = result
    same(read_archive(write_archive(header, arrays), "fuzz", MAX_INPUT_BYTES, "fhe-ml/idash-model/1",
                      ("thresholds", "leaves")), (header, arrays), "read_archive(write_archive(...))")


def _model_roundtrip(cls_path: str) -> Callable[[bytes, object], None]:
    def roundtrip(data: bytes, model) -> None:
        same(type(model).from_bytes(model.to_bytes()), model, f"{cls_path}.from_bytes(to_bytes())")
    return roundtrip


def _idash_from_bytes(data: bytes) -> object:
    from apps.xgboost.plan import IdashModel

    return IdashModel.from_bytes(data, max_bytes=MAX_INPUT_BYTES)


def _forest_from_bytes(data: bytes) -> object:
    from apps.xgboost.export import HEForest

    return HEForest.from_bytes(data, max_bytes=MAX_INPUT_BYTES)


@functools.cache
def _private_forest():
    from apps.xgboost.grid import FixedPointGrid
    from apps.xgboost.private_forest import PrivateForest

    return PrivateForest.from_forest(_forest(), FixedPointGrid(8, 5))


def _private_forest_from_bytes(data: bytes) -> object:
    from apps.xgboost.private_forest import PrivateForest

    return PrivateForest.from_bytes(data, max_bytes=MAX_INPUT_BYTES)


def _public_model_corpus() -> list[bytes]:
    from apps.xgboost.plan import ForestPlan, named_params

    from apps.xgboost.plan import PublicModel
    from apps.xgboost.private_plan import PrivatePlan

    params = named_params("BFVN11QP335L4D5T20Insecure", allow_insecure=True)
    tiny = named_params("BFVN10QP660L7D3T20Insecure", allow_insecure=True)
    layout = PrivatePlan.build(_private_forest(), tiny, width=4).layout
    private = PublicModel.private(layout, "BFVN10QP660L7D3T20Insecure")
    return [ForestPlan.build(model, params, width=4).public_model("BFVN11QP335L4D5T20Insecure").to_json().encode()
            for model in (_forest(), _idash_model())] + [private.to_json().encode()]


def _public_model(data: bytes) -> object:
    from apps.xgboost.plan import PublicModel

    return PublicModel.from_json(data)


def _public_model_roundtrip(data: bytes, model) -> None:
    from apps.xgboost.plan import PublicModel

    same(PublicModel.from_json(model.to_json()), model, "PublicModel.from_json(to_json())")


def _json_text(data: bytes) -> object:
    from fhe_core import jsontext

    return jsontext.loads(data)


def _json_text_roundtrip(data: bytes, value) -> None:
    same(json.loads(json.dumps(value)), value, "jsontext.loads: json.dumps and back")


def _json_text_corpus() -> list[bytes]:
    from apps.logreg.config import HELRConfig

    return [HELRConfig.tiny().to_json().encode(), b'{"a": [1, 2.5, null, {"b": "c"}], "d": true}', b"[[[[]]]]"]


def _helr_config(data: bytes) -> object:
    from apps.logreg.config import HELRConfig

    return HELRConfig.from_json(data)


def _helr_config_roundtrip(data: bytes, config) -> None:
    from apps.logreg.config import HELRConfig

    same(HELRConfig.from_json(config.to_json()), config, "HELRConfig.from_json(to_json())")


def _helr_config_corpus() -> list[bytes]:
    from apps.logreg.config import HELRConfig

    return [HELRConfig.tiny().to_json().encode(), HELRConfig.secure().to_json().encode()]


def _checkpoint_corpus() -> list[bytes]:
    from apps.logreg.trainer import _CHECKPOINT_HEADER, CHECKPOINT_MAGIC, CHECKPOINT_VERSION
    from fhe_core import serialize

    w = world()
    head = _CHECKPOINT_HEADER.pack(CHECKPOINT_MAGIC, CHECKPOINT_VERSION, 3)
    return [head + serialize.dumps_many([w.ckks_ct, w.ckks_ct]),
            head + serialize.dumps_many([w.ckks_ct, w.ckks_ct], packed=True)]


def _read_checkpoint(data: bytes) -> object:
    from apps.logreg.trainer import read_checkpoint

    return read_checkpoint(data, world().params)


def _checkpoint_roundtrip(data: bytes, result) -> None:
    from apps.logreg.trainer import _CHECKPOINT_HEADER, CHECKPOINT_MAGIC, CHECKPOINT_VERSION, read_checkpoint
    from fhe_core import serialize

    iteration, w, v = result
    again = _CHECKPOINT_HEADER.pack(CHECKPOINT_MAGIC, CHECKPOINT_VERSION, iteration) + serialize.dumps_many([w, v])
    same(read_checkpoint(again, world().params), result, "read_checkpoint(checkpoint bytes)")


def _dataset_corpus() -> list[bytes]:
    from apps.logreg.dataset import EncryptedDataset

    ct = world().ckks_ct
    return [EncryptedDataset(((ct, ct), (ct,)), samples=10, features=4, batch_size=5).to_bytes()]


def _dataset(data: bytes) -> object:
    from apps.logreg.dataset import EncryptedDataset

    return EncryptedDataset.from_bytes(data, world().params, max_bytes=MAX_INPUT_BYTES)


def _dataset_roundtrip(data: bytes, dataset) -> None:
    same(type(dataset).from_bytes(dataset.to_bytes(), world().params), dataset, "EncryptedDataset round trip")


# ---- server ---------------------------------------------------------------------------------------------

def _check_record_start(data: bytes) -> object:
    """server.uploads.check_record_start on a key-set upload whose part 0 is ``data``."""
    from server.uploads import check_record_start

    with tempfile.TemporaryDirectory(prefix="fuzz-part-") as folder:
        path = Path(folder) / "part0"
        path.write_bytes(data)
        return check_record_start(path, "keyset", world().params.params_id)


def _check_record_start_roundtrip(data: bytes, result) -> None:
    assert data[:8] == RECORD_MAGIC and struct.unpack_from("<H", data, 10)[0] == 9, \
        "accepted a key-set part 0 that does not start an eval key set record"
    assert data[24:56].hex() == world().params.params_id, "accepted another parameter set's keys"


# ---- the registry -------------------------------------------------------------------------------------------

def _errors(*paths: str) -> tuple[type[BaseException], ...]:
    """The classes named by "module:Class" strings (imported when the targets are listed)."""
    import importlib

    return tuple(getattr(importlib.import_module(module), name) for module, name in (p.split(":") for p in paths))


@functools.cache
def targets() -> dict[str, Target]:
    """Every deserializer, by name."""
    serialization = _errors("fhe_core.errors:SerializationError")
    model = _errors("apps.xgboost.archive:ModelFormatError")
    listed = [
        Target("fhe_core.serialize.loads", _serialize_corpus, _loads, serialization, _serialize_roundtrip,
               RECORD_MUTATORS),
        Target("fhe_core.serialize.loads_many", _loads_many_corpus, _loads_many, serialization,
               _loads_many_roundtrip, RECORD_MUTATORS),
        Target("fhe_core.serialize.load", _load_corpus, _load_file, serialization, _serialize_roundtrip,
               RECORD_MUTATORS),
        Target("fhe_core.serialize.read_header", _serialize_corpus, _read_header, serialization,
               _read_header_roundtrip, RECORD_MUTATORS),
        Target("fhe_core.serialize.peek", _serialize_corpus, _peek, serialization, _peek_roundtrip, RECORD_MUTATORS),
        Target("fhe_core.params.ParamsLiteral.from_json", _params_literal_corpus, _params_literal,
               _errors("fhe_core.errors:ParameterError"), _params_literal_roundtrip, (mutate_json_text,)),
        Target("fhe_core.params.Params.from_literal", _params_literal_corpus, _params_from_literal,
               _errors("fhe_core.errors:ParameterError"), _params_roundtrip, (mutate_json_text,)),
        Target("apps.xgboost.archive.read_archive", lambda: [_idash_model().to_bytes()], _read_archive, model,
               _read_archive_roundtrip, NPZ_MUTATORS),
        Target("apps.xgboost.plan.IdashModel.from_bytes", lambda: [_idash_model().to_bytes()], _idash_from_bytes,
               model, _model_roundtrip("IdashModel"), NPZ_MUTATORS),
        Target("apps.xgboost.export.HEForest.from_bytes", lambda: [_forest().to_bytes()], _forest_from_bytes, model,
               _model_roundtrip("HEForest"), NPZ_MUTATORS),
        Target("apps.xgboost.private_forest.PrivateForest.from_bytes", lambda: [_private_forest().to_bytes()],
               _private_forest_from_bytes, model, _model_roundtrip("PrivateForest"), NPZ_MUTATORS),
        Target("apps.xgboost.plan.PublicModel.from_json", _public_model_corpus, _public_model,
               _errors("apps.xgboost.plan:PlanError"), _public_model_roundtrip, (mutate_json_text,)),
        Target("fhe_core.jsontext.loads", _json_text_corpus, _json_text, (ValueError,), _json_text_roundtrip,
               (mutate_json_text,)),
        Target("apps.logreg.config.HELRConfig.from_json", _helr_config_corpus, _helr_config,
               _errors("apps.logreg.config:HELRConfigError"), _helr_config_roundtrip, (mutate_json_text,)),
        Target("apps.logreg.trainer.read_checkpoint", _checkpoint_corpus, _read_checkpoint, serialization,
               _checkpoint_roundtrip, RECORD_MUTATORS),
        Target("apps.logreg.dataset.EncryptedDataset.from_bytes", _dataset_corpus, _dataset, serialization,
               _dataset_roundtrip, RECORD_MUTATORS + (mutate_prefixed_json,) * 2),
        Target("server.uploads.check_record_start", _serialize_corpus, _check_record_start,
               _errors("server.errors:UnprocessableError"), _check_record_start_roundtrip, RECORD_MUTATORS),
    ]
    return {t.name: dataclasses.replace(t, corpus=functools.cache(t.corpus)) for t in listed}


# ---- the bounded run inside the test suite ------------------------------------------------------------------

PROFILES = {"ci": 200, "long": 20_000}   # examples per target; FHE_FUZZ_PROFILE picks one


def examples_per_target() -> int:
    """FHE_FUZZ_EXAMPLES, else the examples of the FHE_FUZZ_PROFILE profile (default "ci")."""
    if os.environ.get("FHE_FUZZ_EXAMPLES"):
        return int(os.environ["FHE_FUZZ_EXAMPLES"])
    profile = os.environ.get("FHE_FUZZ_PROFILE", "ci")
    if profile not in PROFILES:
        raise ValueError(f"FHE_FUZZ_PROFILE must be one of {sorted(PROFILES)}, got {profile!r}")
    return PROFILES[profile]


def fuzz_test(name: str):
    """A hypothesis test of the target ``name``: each example is a seed that picks an input (a
    mutated valid one, or random bytes) checked by :func:`check`. The time limit per example is
    :func:`check`'s own (hypothesis' deadline would also count the first example's setup)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=examples_per_target(), deadline=None, database=None, print_blob=True,
              suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 2 ** 64 - 1))
    def test(seed: int) -> None:
        target = targets()[name]
        check(target, fuzz_input(random.Random(seed), target))

    test.__doc__ = f"{name}: typed errors or a correct round trip, in bounded time and memory."
    return test


def input_stream(target: Target, seed: int):
    """An endless, reproducible stream of inputs for ``target`` (``random.Random(seed)``)."""
    rng = random.Random(seed)
    while True:
        yield fuzz_input(rng, target)


def seed_from_env() -> int:
    """FHE_FUZZ_SEED, or a fresh one from the OS."""
    text = os.environ.get("FHE_FUZZ_SEED")
    return int(text) if text else int.from_bytes(os.urandom(8), "little")
