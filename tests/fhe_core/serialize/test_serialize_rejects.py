"""Corrupted, truncated, oversized, foreign and hand-crafted records are refused with the error
class of the check that must catch them, and a message naming the problem. Crafted records are
re-sealed with a valid checksum (serialize_helpers) so that the deeper checks are reached."""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest
import torch

from fhe_core import rlwe, serialize
from fhe_core.errors import (
    BadMagicError, ChecksumError, MetadataError, ParamsMismatchError, ResidueRangeError, SerializationError,
    SerializedParamsMismatchError, ShapeError, SizeLimitError, TrailingDataError, TruncatedError,
    UnsupportedVersionError, WrongKindError,
)
from fhe_core.params import preset
from serialize_helpers import KINDS, meta_encoding, rebuild, split, with_word


@pytest.fixture(scope="module")
def small_pt(world):
    """A level-0, 8-slot plaintext: a record of 88 + 80 + 8192 bytes."""
    return serialize.dumps(world.encoder.encode([0.25, -0.5], level=0, slots=8))


# ---- sizes -----------------------------------------------------------------------------------------

def test_empty_input(world):
    for empty in (b"", bytearray(), memoryview(b"")):
        with pytest.raises(TruncatedError, match="empty input"):
            serialize.loads(empty, world.params)


def test_every_truncation_is_refused(world, small_pt):
    params_blob = serialize.dumps(world.params)
    for blob in (params_blob, small_pt):
        for length in range(len(blob)):
            with pytest.raises(TruncatedError):
                serialize.loads(blob[:length], world.params)


def test_sampled_truncations_of_a_key_set(world):
    blob = serialize.dumps(world.keys)
    for length in np.random.default_rng().integers(0, len(blob), 200).tolist() + [len(blob) - 1, 87, 88]:
        with pytest.raises(TruncatedError):
            serialize.loads(blob[:length], world.params)


def test_trailing_bytes_are_refused(world, small_pt):
    with pytest.raises(TrailingDataError, match="1 bytes follow"):
        serialize.loads(small_pt + b"\0", world.params)


def test_size_limits(world, small_pt):
    with pytest.raises(SizeLimitError, match=f"input of {len(small_pt)} bytes exceeds max_bytes=1000"):
        serialize.loads(small_pt, world.params, max_bytes=1000)
    huge = bytearray(small_pt)
    struct.pack_into("<Q", huge, 16, 1 << 62)          # declared payload 2^62 bytes
    with pytest.raises(SizeLimitError, match="declared size"):
        serialize.loads(bytes(huge), world.params)
    struct.pack_into("<Q", huge, 16, 1 << 20)          # below max_bytes but beyond the input
    with pytest.raises(TruncatedError, match="shorter than its declared size"):
        serialize.loads(bytes(huge), world.params)
    huge = bytearray(small_pt)
    struct.pack_into("<I", huge, 12, 1 << 31)          # declared metadata 2 GiB (limit 1 MiB)
    with pytest.raises(SizeLimitError, match="declared metadata"):
        serialize.loads(bytes(huge), world.params)


def test_file_larger_than_max_bytes_is_not_read(world, small_pt, tmp_path):
    path = tmp_path / "pt.fhe"
    path.write_bytes(small_pt)
    with pytest.raises(SizeLimitError, match="file of"):
        serialize.load(path, world.params, max_bytes=4096)


# ---- magic, version, kind, checksum -----------------------------------------------------------------

def test_wrong_magic_version_and_kind(world, small_pt):
    with pytest.raises(BadMagicError, match="not a serialized fhe_core object"):
        serialize.loads(b"PK\x03\x04" + small_pt[4:], world.params)
    with pytest.raises(UnsupportedVersionError, match="format version 2"):
        serialize.loads(rebuild(small_pt, version=2), world.params)
    with pytest.raises(WrongKindError, match="unknown object kind 99"):
        serialize.loads(rebuild(small_pt, kind=99), world.params)
    with pytest.raises(WrongKindError, match="unknown object kind 0"):
        serialize.loads(rebuild(small_pt, kind=0), world.params)


def test_a_record_relabelled_as_another_kind_fails_its_schema(world, small_pt):
    with pytest.raises(MetadataError, match="ciphertext: metadata fields missing"):
        serialize.loads(rebuild(small_pt, kind=KINDS["ciphertext"]), world.params)


def _expected_flip_errors(offset: int) -> tuple[type, ...]:
    """Which check catches a bit flip at ``offset`` of a record (table in the package docstring)."""
    if offset < 8:
        return (BadMagicError,)
    if offset < 10:
        return (UnsupportedVersionError,)
    if offset < 12:
        return (WrongKindError, ChecksumError)   # unknown kind, or another known kind: checksum
    if offset < 24:
        return (SizeLimitError, TruncatedError, TrailingDataError)
    return (ChecksumError,)                       # params_id, checksum, metadata, payload


def test_every_header_bit_flip_and_sampled_payload_flips(world, small_pt):
    rng = np.random.default_rng()
    offsets = list(range(128)) + rng.integers(128, len(small_pt), 100).tolist()
    for offset in offsets:
        for bit in range(8) if offset < 128 else [int(rng.integers(0, 8))]:
            blob = bytearray(small_pt)
            blob[offset] ^= 1 << bit
            with pytest.raises(_expected_flip_errors(offset)):
                serialize.loads(bytes(blob), world.params)


def test_flip_in_a_key_set_member_is_caught(world):
    blob = bytearray(serialize.dumps(world.keys))
    blob[len(blob) // 2] ^= 0x10
    with pytest.raises(ChecksumError):
        serialize.loads(bytes(blob), world.params)
    # re-sealing the outer record still leaves the member's own checksum wrong
    with pytest.raises(ChecksumError, match="galois_key|relin_key"):
        serialize.loads(rebuild(bytes(blob)), world.params)


# ---- params_id ---------------------------------------------------------------------------------------

def test_objects_of_other_params_are_refused(world, world11):
    for obj in (world.pt, world.ct, world.sk, world.pk, world.keys, world.params):
        with pytest.raises(SerializedParamsMismatchError, match="belongs to params_id") as info:
            serialize.loads(serialize.dumps(obj), world11.params, expect=type(obj))
        assert isinstance(info.value, ParamsMismatchError)


def test_params_literal_that_does_not_hash_to_its_id(world):
    blob = serialize.dumps(world.params)
    tampered = split(blob).payload.replace(b'"log_default_scale":40', b'"log_default_scale":41')
    with pytest.raises(SerializedParamsMismatchError, match="the literal hashes to"):
        serialize.loads(rebuild(blob, payload=tampered), allow_insecure=True)
    with pytest.raises(MetadataError, match="literal is invalid"):
        serialize.loads(rebuild(blob, payload=b'{"log_n": 10}'), allow_insecure=True)


def test_key_set_member_of_other_params(world, world11):
    foreign = serialize.dumps(world11.keys.relin_key("t"))
    meta = {"records": [{"kind": 7, "length": len(foreign)}]}
    with pytest.raises(SerializedParamsMismatchError, match="record 0 belongs to params_id"):
        serialize.loads(rebuild(serialize.dumps(world.keys), meta=meta, payload=foreign), world.params)


# ---- metadata and shapes -----------------------------------------------------------------------------

def _edit(blob: bytes, **fields) -> bytes:
    meta = dict(split(blob).meta)
    for name, value in fields.items():
        if value is None:
            meta.pop(name)
        else:
            meta[name] = value
    return rebuild(blob, meta=meta)


@pytest.mark.parametrize("fields, error, message", [
    ({"level": 4}, ShapeError, "level 4 needs 5 limbs, the parameters have L = 3"),
    ({"shape": [2, 4, 2048]}, ShapeError,
     r"shape \[2, 4, 2048\] does not match the parameters: expected \[2, 4, 1024\]"),
    ({"shape": [4, 4, 1024]}, ShapeError, "component count"),
    ({"shape": [1, 4, 1024]}, ShapeError, "component count"),
    ({"level": 2}, ShapeError, r"expected \[2, 3, 1024\]"),
    ({"level": -1}, MetadataError, "level must be in"),
    ({"level": True}, MetadataError, "level must be an integer"),
    ({"is_ntt": 1}, MetadataError, "is_ntt must be true or false"),
    ({"is_ntt": None}, MetadataError, r"missing \['is_ntt'\]"),
    ({"extra": 0}, MetadataError, r"unknown \['extra'\]"),
    ({"shape": "2x4x1024"}, ShapeError, "component count"),
])
def test_ciphertext_metadata_checks(world, fields, error, message):
    with pytest.raises(error, match=message):
        serialize.loads(_edit(serialize.dumps(world.ct), **fields), world.params)


@pytest.mark.parametrize("fields, message", [
    ({"scale": "nan"}, "scale must be a positive finite float64"),
    ({"scale": "0x1.0p+40"}, "float.hex form"),
    ({"scale": "-0x1.0000000000000p+40"}, "positive"),
    ({"scale": 1099511627776.0}, "float.hex form"),
    ({"slots": 3}, "slots must be a power of two"),
    ({"slots": 1024}, r"slots must be in \[1, 512\]"),
])
def test_plaintext_metadata_checks(world, small_pt, fields, message):
    with pytest.raises(MetadataError, match=message):
        serialize.loads(_edit(small_pt, **fields), world.params)


def test_non_canonical_metadata(world, small_pt):
    meta = split(small_pt).meta
    spaced = b'{ "is_ntt": true}'
    for raw in (meta_encoding(meta).replace(b",", b", ", 1)[:-2], b"[1, 2, 3]     ", b"\xff" * 8, spaced + b" " * 7,
                b'{"a":1,"a":1}   ', b'{"a":1e999}     ', b'{"a":NaN}       '):
        with pytest.raises(MetadataError):
            serialize.loads(rebuild(small_pt, meta_bytes=raw), world.params)
    with pytest.raises(MetadataError, match="multiple of 8"):
        serialize.loads(rebuild(small_pt, meta_bytes=meta_encoding(meta).rstrip(b" ")), world.params)


def test_key_shapes_must_match_dnum_and_alpha(world, world11):
    p = world11.params
    blob = serialize.dumps(world11.keys.relin_key("t"))
    rows = p.alpha + p.max_level + 1
    with pytest.raises(ShapeError, match=r"dnum = 3 digits over QP_L: alpha \+ L \+ 1 = 7 limbs \(alpha = 2\)"):
        serialize.loads(_edit(blob, shape=[p.dnum + 1, rows, p.n]), p)
    with pytest.raises(ShapeError, match="expected"):
        serialize.loads(_edit(blob, compressed=False), p)
    with pytest.raises(MetadataError, match="galois_element must be odd"):
        serialize.loads(_edit(serialize.dumps(world11.keys.galois_key(world11.rotate_one, "t")), galois_element=4), p)
    with pytest.raises(MetadataError, match="uniform_seed must be 64 lowercase hex digits"):
        serialize.loads(_edit(blob, uniform_seed="AB" * 32), p)
    with pytest.raises(MetadataError, match="Hamming weight 64 differs"):
        serialize.loads(_edit(serialize.dumps(world.sk), hamming_weight=64), world.params, expect=rlwe.SecretKey)


def test_payload_length_must_match_the_shape(world):
    blob = serialize.dumps(world.ct)
    payload = split(blob).payload
    with pytest.raises(ShapeError, match=f"payload is {len(payload) - 8} bytes"):
        serialize.loads(rebuild(blob, payload=payload[:-8]), world.params)


def test_key_set_record_table_checks(world):
    blob = serialize.dumps(world.keys)
    p = split(blob)
    first = p.meta["records"][0]
    cases = [
        ({"records": p.meta["records"] + [dict(p.meta["records"][1], galois_element=3)]}, ShapeError,
         "record 3 of .* bytes runs past the payload"),
        ({"records": p.meta["records"][:-1]}, ShapeError, "the records cover"),
        ({"records": [dict(first, kind=3)] + p.meta["records"][1:]}, WrongKindError, "is not a relin key"),
        ({"records": "all"}, MetadataError, "records must be a list"),
        ({"records": [first, dict(p.meta["records"][1], galois_element=world.rotate_one + 2)]
          + p.meta["records"][2:]}, MetadataError, "holds galois element"),
    ]
    for meta, error, message in cases:
        with pytest.raises(error, match=message):
            serialize.loads(rebuild(blob, meta=meta), world.params)
    relin = split(blob).payload[:first["length"]]
    with pytest.raises(MetadataError, match="repeats the relin key"):
        serialize.loads(rebuild(blob, meta={"records": [first, first]}, payload=relin + relin), world.params)


# ---- residue ranges ----------------------------------------------------------------------------------

def test_ciphertext_residue_equal_to_its_prime(world):
    p, ct = world.params, world.ct
    blob = serialize.dumps(ct, compress=False)  # both components in the payload
    limbs, n = ct.level + 1, p.n
    for value in (p.q_primes[3], (1 << 64) - 1):
        payload = with_word(split(blob).payload, (1 * limbs + 3) * n + 17, value)
        with pytest.raises(ResidueRangeError, match=rf"ciphertext: component 1, limb 3 has a residue >= q_3 "
                                                    rf"\(coefficient 17: {value} >= {p.q_primes[3]}\)"):
            serialize.loads(rebuild(blob, payload=payload), p)
    largest = with_word(split(blob).payload, 5, p.q_primes[0] - 1)   # q - 1 is still canonical
    assert serialize.loads(rebuild(blob, payload=largest), p).data[0, 0, 5].item() == p.q_primes[0] - 1


def test_key_residues_are_checked_against_p_and_q(world11):
    p = world11.params
    rows = p.alpha + p.max_level + 1
    key_blob = serialize.dumps(world11.keys.relin_key("t"))
    payload = with_word(split(key_blob).payload, (2 * rows + 1) * p.n + 3, p.p_primes[1])
    with pytest.raises(ResidueRangeError, match="relin key: digit 2 b, limb 1 has a residue >= p_1"):
        serialize.loads(rebuild(key_blob, payload=payload), p)
    raw = serialize.dumps(world11.keys.relin_key("t"), compress=False)
    payload = with_word(split(raw).payload, ((0 * 2 + 1) * rows + 4) * p.n, p.q_primes[2] + 5)
    with pytest.raises(ResidueRangeError, match="relin key: digit 0 a, limb 4 has a residue >= q_2"):
        serialize.loads(rebuild(raw, payload=payload), p)
    sk_blob = serialize.dumps(world11.sk)
    payload = split(sk_blob).payload
    payload = payload[:32] + with_word(payload[32:], 0, p.p_primes[0])
    with pytest.raises(ResidueRangeError, match="secret key: limb 0 has a residue >= p_0"):
        serialize.loads(rebuild(sk_blob, payload=payload), p, expect=rlwe.SecretKey)
    pk_blob = serialize.dumps(world11.pk)
    payload = with_word(split(pk_blob).payload, (p.max_level + 1) * p.n, p.q_primes[0])
    with pytest.raises(ResidueRangeError, match="public key: part a, limb 0 has a residue >= q_0"):
        serialize.loads(rebuild(pk_blob, payload=payload), p)


# ---- arguments ---------------------------------------------------------------------------------------

def test_bad_arguments(world, small_pt):
    with pytest.raises(SerializationError, match="expected bytes"):
        serialize.loads("not bytes", world.params)
    with pytest.raises(SerializationError, match="max_bytes must be"):
        serialize.loads(small_pt, world.params, max_bytes=10)
    with pytest.raises(SerializationError, match="params must be a Params"):
        serialize.loads(small_pt, "params")
    with pytest.raises(SerializationError, match="expect must be a class"):
        serialize.loads(small_pt, world.params, expect="Plaintext")


def test_objects_without_a_params_id_of_a_params_cannot_be_written(world):
    ctx = rlwe.RLWEContext(world.params.n, world.params.q_primes, world.params.p_primes)
    pt = world.encoder.encode([1.0])
    ct = rlwe.encrypt_sk(ctx, rlwe.gen_secret_key(ctx), pt.data, pt.level)
    with pytest.raises(SerializationError, match="params_id must be 64 lowercase hex digits"):
        serialize.dumps(ct)
    assert preset("N10QP241L3D4Insecure", allow_insecure=True).params_id == world.params.params_id


# ---- bit-packed payloads ----------------------------------------------------------------------------

def test_packed_metadata_and_length_checks(world):
    blob = serialize.dumps(world.ct, packed=True)
    widths = split(blob).meta["bits"]
    for bad in (widths[:-1], widths + [40], [65] + widths[1:], [-1] + widths[1:], "60", [True] * len(widths)):
        with pytest.raises(MetadataError, match="bits must list 4 limb widths"):
            serialize.loads(_edit(blob, bits=bad), world.params)
    with pytest.raises(ShapeError, match=r"packed at \[61, .*\] bits per residue needs"):
        serialize.loads(_edit(blob, bits=[widths[0] + 1] + widths[1:]), world.params)


def test_packed_residue_at_or_above_its_prime(world):
    """The writer does not check ranges; the reader does, after unpacking."""
    data = world.ct.data.clone()
    data.view(torch.int64)[1, 2, 9] = world.params.q_primes[2]
    bad = rlwe.Ciphertext(data=data, level=world.ct.level, params_id=world.params.params_id)
    for packed in (True, False):
        with pytest.raises(ResidueRangeError, match="component 1, limb 2 has a residue >= q_2 .coefficient 9"):
            serialize.loads(serialize.dumps(bad, packed=packed), world.params)


def test_params_record_checks_before_generating_primes(world, world11):
    blob = serialize.dumps(world.params)
    other_literal = world11.params.literal.to_json().encode()
    with pytest.raises(SerializedParamsMismatchError, match="not the one of the given parameters"):
        serialize.loads(rebuild(blob, payload=other_literal), world.params)
    many = world.params.literal.to_dict() | {"log_q": [40] * 600, "dnum": None}
    text = json.dumps(many, sort_keys=True, separators=(",", ":")).encode()
    with pytest.raises(SizeLimitError, match="asks for 601 primes"):
        serialize.loads(rebuild(blob, payload=text), allow_insecure=True)
    for payload, message in ((b"\xff\xfe", "not UTF-8"), (b"[" * 100000, "literal is invalid"),
                             (b'{"log_n": 10 }', "literal is invalid"),
                             (other_literal.replace(b",", b", "), "not in canonical JSON form")):
        with pytest.raises(MetadataError, match=message):
            serialize.loads(rebuild(blob, payload=payload), allow_insecure=True)


def test_checks_run_in_the_documented_order(world, world11, small_pt):
    """With several faults at once, the earliest check in the documented order reports."""
    bad_range = rebuild(small_pt, payload=with_word(split(small_pt).payload, 0, (1 << 64) - 1))
    foreign = rebuild(bad_range, params_id=bytes.fromhex(world11.params.params_id))
    bad_sum = bytearray(foreign)
    bad_sum[-1] ^= 1
    bad_kind = rebuild(bytes(bad_sum), kind=99, seal=False)
    bad_version = rebuild(bad_kind, version=7, seal=False)
    bad_magic = b"XXXXXXXX" + bad_version[8:]
    cases = [(bad_range, ResidueRangeError), (foreign, SerializedParamsMismatchError), (bytes(bad_sum), ChecksumError),
             (bad_kind, WrongKindError), (bad_version, UnsupportedVersionError), (bad_magic, BadMagicError),
             (bad_magic[:-1], TruncatedError)]
    for blob, error in cases:
        with pytest.raises(error):
            serialize.loads(blob, world.params)
    with pytest.raises(SizeLimitError):
        serialize.loads(bad_magic, world.params, max_bytes=len(bad_magic) - 1)


def test_seeded_ciphertext_records_are_checked(world):
    """A seed stands for c_1 of a fresh degree-1 NTT-domain encryption only; its payload is c_0
    alone; the seed is 64 hex digits."""
    p, ct = world.params, world.ct
    seeded, full = serialize.dumps(ct), serialize.dumps(ct, compress=False)
    limbs = ct.level + 1
    with pytest.raises(MetadataError, match="uniform_seed is for fresh degree-1 NTT-domain ciphertexts"):
        serialize.loads(_edit(seeded, shape=[3, limbs, p.n]), p)
    with pytest.raises(MetadataError, match="in the coefficient domain"):
        serialize.loads(_edit(seeded, is_ntt=False), p)
    with pytest.raises(MetadataError, match="uniform_seed must be 64 lowercase hex digits"):
        serialize.loads(_edit(seeded, uniform_seed="00" * 31), p)
    with pytest.raises(SerializationError, match=r"payload is \d+ bytes, shape \[1, "):  # both components sent
        serialize.loads(rebuild(seeded, payload=split(full).payload), p)
    with pytest.raises(SerializationError, match=r"shape \[2, "):  # a full record without its c_1
        serialize.loads(rebuild(full, payload=split(seeded).payload), p)
