"""The bytes against the documented layout (read with struct/hashlib in serialize_helpers, not
with the library): header fields at their offsets, canonical metadata, little-endian limb-major
payloads, the checksum's coverage; and the library's writer agrees with the helpers' writer."""
from __future__ import annotations

import json

import numpy as np
import pytest

from fhe_core import rlwe, serialize
from serialize_helpers import KINDS, MAGIC, build, checksum, split, word_at


def _objects(world):
    return {"params": world.params, "plaintext": world.pt, "ciphertext": world.ct, "secret_key": world.sk,
            "public_key": world.pk, "switching_key": rlwe.gen_switching_key(world.ctx, world.sk, world.sk),
            "relin_key": world.keys.relin_key("t"), "galois_key": world.keys.galois_key(world.rotate_one, "t"),
            "eval_key_set": world.keys}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_header_fields_at_documented_offsets(world, kind):
    blob = serialize.dumps(_objects(world)[kind])
    p = split(blob)
    assert blob[:8] == bytes.fromhex("89464845534552 0a".replace(" ", "")) == MAGIC
    assert (p.version, p.kind) == (1, KINDS[kind])
    assert p.params_id == bytes.fromhex(world.params.params_id)
    assert p.checksum == checksum(blob)
    assert len(p.meta_bytes) % 8 == 0 and (88 + len(p.meta_bytes)) % 8 == 0
    assert p.meta_bytes.rstrip(b" ") == json.dumps(p.meta, sort_keys=True, separators=(",", ":")).encode()
    # the helpers' writer, given the same fields, produces the same bytes
    assert build(kind=p.kind, params_id=p.params_id, meta_bytes=p.meta_bytes, payload=p.payload) == blob


def test_ciphertext_metadata_and_payload_layout(world):
    """payload word ((c * (l+1) + i) * N + j) is residue j of limb i of component c; seeded (a
    fresh secret-key encryption), the payload is component 0 alone and the seed is metadata."""
    ct, n = world.ct, world.params.n
    p = split(serialize.dumps(ct, compress=False))
    assert p.meta == {"is_ntt": True, "level": ct.level, "shape": [2, ct.level + 1, n]}
    assert len(p.payload) == 2 * (ct.level + 1) * n * 8
    seeded = split(serialize.dumps(ct))
    assert seeded.meta == {**p.meta, "uniform_seed": ct.uniform_seed.hex()}
    assert seeded.payload == p.payload[:len(p.payload) // 2]
    data = ct.data.numpy().view(np.uint64)
    rng = np.random.default_rng()
    for c, i, j in zip(rng.integers(0, 2, 50), rng.integers(0, ct.level + 1, 50), rng.integers(0, n, 50)):
        assert word_at(p.payload, (c * (ct.level + 1) + i) * n + j) == int(data[c, i, j])


def test_plaintext_metadata_holds_the_exact_scale(world):
    pt = world.encoder.encode([0.5], level=2, scale=2.0 ** 40 * 1.5, slots=4)
    p = split(serialize.dumps(pt))
    assert p.meta == {"is_ntt": True, "level": 2, "scale": "0x1.8000000000000p+40", "slots": 4,
                      "shape": [3, world.params.n]}


def test_compressed_switching_key_stores_b_parts_and_seed(world):
    key = world.keys.galois_key(world.rotate_one, "t")
    p, pr = world.params, split(serialize.dumps(key))
    rows = p.alpha + p.max_level + 1
    assert pr.meta == {"compressed": True, "galois_element": world.rotate_one, "shape": [p.dnum, rows, p.n],
                       "uniform_seed": key.uniform_seed.hex()}
    assert pr.payload == key.data[:, 0].contiguous().numpy().astype("<i8").tobytes()
    raw = split(serialize.dumps(key, compress=False))
    assert raw.meta["shape"] == [p.dnum, 2, rows, p.n] and raw.payload == key.data.numpy().astype("<i8").tobytes()


def test_secret_key_payload_is_seed_then_residues(world):
    p = split(serialize.dumps(world.sk))
    assert p.meta == {"hamming_weight": world.params.hamming_weight,
                      "shape": [world.params.alpha + world.params.max_level + 1, world.params.n]}
    assert p.payload[:32] == world.sk.seed and p.payload[32:] == world.sk.data.numpy().astype("<i8").tobytes()


def test_key_set_payload_is_its_member_records(world):
    blob = split(serialize.dumps(world.keys))
    at = 0
    for entry in blob.meta["records"]:
        member = blob.payload[at:at + entry["length"]]
        assert split(member).kind == entry["kind"] and split(member).checksum == checksum(member)
        if entry["kind"] == KINDS["galois_key"]:
            expected = serialize.dumps(world.keys.galois_key(entry["galois_element"], "t"))
        else:
            expected = serialize.dumps(world.keys.relin_key("t"))
        assert member == expected
        at += entry["length"]
    assert at == len(blob.payload)


def test_params_record_is_fully_determined_by_the_spec(world):
    """Every byte of a params record follows from the table: header, empty metadata padded to
    8 bytes ("{}" + 6 spaces), the literal's canonical JSON, BLAKE2b over the rest."""
    literal = world.params.literal.to_json().encode()
    expected = build(kind=1, params_id=bytes.fromhex(world.params.params_id), meta_bytes=b"{}      ",
                     payload=literal)
    assert serialize.dumps(world.params) == expected


def test_serialization_is_deterministic(world):
    for obj in _objects(world).values():
        assert serialize.dumps(obj) == serialize.dumps(obj)
