"""check_many: every check of loads_many without building anything or expanding a seed (what a
server runs on an uploaded key set), and the checksums computed alongside the decoding."""
from __future__ import annotations

import pytest
import torch

from fhe_core import rlwe, serialize
from fhe_core.errors import (
    ChecksumError, ParameterError, ResidueRangeError, SerializedParamsMismatchError, WrongKindError,
)
from fhe_core.rlwe import EvalKeySet, PublicKey
from fhe_core.serialize import codecs
from serialize_helpers import build, rebuild, split, with_word


def _key_set_blob(world, packed: bool) -> bytes:
    return serialize.dumps_many([world.keys, world.pk], packed=packed)


@pytest.mark.parametrize("packed", [False, True])
def test_check_many_reports_what_loads_many_loads(world, packed):
    blob = _key_set_blob(world, packed)
    infos = serialize.check_many(blob, world.params, expect=(EvalKeySet, PublicKey), max_count=2)
    loaded = serialize.loads_many(blob, world.params, expect=(EvalKeySet, PublicKey), max_count=2)
    assert [info.kind for info in infos] == [serialize.Kind.EVAL_KEY_SET, serialize.Kind.PUBLIC_KEY]
    assert sum(info.size for info in infos) == len(blob)
    members = infos[0].metadata["records"]
    assert sorted(m["galois_element"] for m in members if "galois_element" in m) == sorted(loaded[0].galois_elements)
    assert any(m["kind"] == serialize.Kind.RELIN_KEY for m in members) == loaded[0].has_relin


def test_check_many_regenerates_no_seeded_half(world, monkeypatch):
    """A server checks an uploaded key set without expanding the keys' a parts (that happens
    where the set is loaded); loading still does, into the key's one buffer."""
    blob = _key_set_blob(world, packed=True)
    calls = []
    original = codecs.switching_key_uniform
    monkeypatch.setattr(codecs, "switching_key_uniform", lambda *a, **k: calls.append(1) or original(*a, **k))
    serialize.check_many(blob, world.params, expect=(EvalKeySet, PublicKey))
    assert calls == []
    keys = serialize.loads_many(blob, world.params, expect=(EvalKeySet, PublicKey))[0]
    assert len(calls) == len(keys.galois_elements) + 1
    for k in world.keys.galois_elements:  # the lazily expanded key is the generated one, bit for bit
        assert torch.equal(keys.galois_key(k, "test").data, world.keys.galois_key(k, "test").data)
    assert torch.equal(keys.relin_key("test").data, world.keys.relin_key("test").data)


def test_switching_key_uniform_into_a_given_buffer_equals_the_default(world):
    key = world.keys.relin_key("test")
    out = torch.full_like(key.data, -1)
    rlwe.switching_key_uniform(world.ctx, key.uniform_seed, out=out[:, 1])
    assert torch.equal(out[:, 1], rlwe.switching_key_uniform(world.ctx, key.uniform_seed))
    assert torch.equal(out[:, 1], key.data[:, 1]) and bool((out[:, 0] == -1).all())
    with pytest.raises(ParameterError, match="shape"):
        rlwe.switching_key_uniform(world.ctx, key.uniform_seed, out=out[:1, 1])


def _with_bad_member_residue(blob: bytes) -> bytes:
    """The key set with the first residue of its first member set to 2^64 - 1 (>= every prime),
    the member's and the set's checksums re-sealed: only the range check can catch it."""
    outer = split(blob)
    first = outer.meta["records"][0]["length"]
    member = split(outer.payload[:first])
    bad = rebuild(outer.payload[:first], payload=with_word(member.payload, 0, (1 << 64) - 1))
    return build(kind=outer.kind, params_id=outer.params_id, meta_bytes=outer.meta_bytes,
                 payload=bad + outer.payload[first:])


def test_check_many_refuses_what_loads_many_refuses(world, world11):
    blob = serialize.dumps(world.keys)  # unpacked: a word of a payload is a residue
    bad_range = _with_bad_member_residue(blob)
    for check in (serialize.check_many, serialize.loads_many):
        with pytest.raises(ResidueRangeError):
            check(bad_range, world.params)
        flipped = bytearray(blob)
        flipped[len(blob) // 2] ^= 0x10
        with pytest.raises(ChecksumError):
            check(bytes(flipped), world.params)
        with pytest.raises(SerializedParamsMismatchError):
            check(blob, world11.params)
        with pytest.raises(WrongKindError):
            check(serialize.dumps(world.sk), world.params, expect=(EvalKeySet, PublicKey))


def test_a_bad_checksum_is_reported_before_later_checks(world, world11):
    """The checksums run alongside the decoding, yet the documented order holds: a record with
    a bad checksum and a later fault (foreign parameters, a residue out of range) reports the
    checksum."""
    bad_range = bytearray(_with_bad_member_residue(serialize.dumps(world.keys)))
    bad_range[-1] ^= 1
    foreign = bytearray(serialize.dumps(world.keys))
    foreign[-1] ^= 1
    for check in (serialize.check_many, serialize.loads_many):
        with pytest.raises(ChecksumError):
            check(bytes(bad_range), world.params)
        with pytest.raises(ChecksumError):
            check(bytes(foreign), world11.params)


def test_a_member_checksum_is_reported_before_its_metadata(world):
    """A member whose metadata was altered (its own checksum left stale, the set's re-sealed):
    its checksum reports, as the format's order has it, though members' checksums now run in a
    pool while the set is decoded."""
    blob = serialize.dumps(world.keys)
    outer = split(blob)
    first = outer.meta["records"][0]["length"]
    member = bytearray(outer.payload[:first])
    member[88] ^= 0x01  # the member's metadata JSON: '{' becomes 'z'
    altered = build(kind=outer.kind, params_id=outer.params_id, meta_bytes=outer.meta_bytes,
                    payload=bytes(member) + outer.payload[first:])
    for check in (serialize.check_many, serialize.loads_many, serialize.loads):
        with pytest.raises(ChecksumError, match="relin_key"):
            check(altered, world.params)
