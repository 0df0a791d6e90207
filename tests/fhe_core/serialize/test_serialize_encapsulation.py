"""Encapsulation keys (sparse-secret encapsulation for bootstrapping) in records: alone and in an eval key set,
compressed, raw and packed, read back equal; a record whose direction does not fit its rows is refused."""
from __future__ import annotations

import json
import struct

import pytest
import torch

from fhe_core import rlwe, serialize
from fhe_core.errors import SerializationError
from fhe_core.serialize.record import Kind, pack
from serialize_helpers import split


@pytest.fixture(scope="module")
def encapsulation(world11):
    eph = rlwe.gen_ephemeral_secret(world11.ctx, 32)
    return rlwe.gen_encapsulation_keys(world11.ctx, world11.sk, eph)


def _same_key(a: rlwe.EncapsulationKey, b: rlwe.EncapsulationKey) -> None:
    assert type(b) is rlwe.EncapsulationKey and torch.equal(a.data, b.data)
    assert (a.params_id, a.uniform_seed, a.direction, a.ephemeral_weight, a.ephemeral_id) == \
           (b.params_id, b.uniform_seed, b.direction, b.ephemeral_weight, b.ephemeral_id)


@pytest.mark.parametrize("flags", [{}, {"compress": False}, {"packed": True}], ids=["compressed", "raw", "packed"])
def test_each_key_round_trips(world11, encapsulation, flags):
    for key in encapsulation:
        blob = serialize.dumps(key, **flags)
        _same_key(key, serialize.loads(blob, world11.params))
        rows = 2 if key.direction == rlwe.DENSE_TO_SPARSE else world11.params.alpha + world11.params.max_level + 1
        assert split(blob).meta["shape"][-2] == rows


def test_key_set_with_the_pair_round_trips(world11, encapsulation):
    keys = rlwe.EvalKeySet(world11.params.params_id, relin=world11.keys.relin_key("t"), encapsulation=encapsulation)
    blob = serialize.dumps(keys)
    loaded = serialize.loads(blob, world11.params)
    for got, want in zip(loaded.encapsulation_keys("t"), encapsulation):
        _same_key(want, got)
    assert [(e["kind"], e.get("direction")) for e in split(blob).meta["records"]] == \
           [(int(Kind.RELIN_KEY), None), (int(Kind.ENCAPSULATION_KEY), rlwe.DENSE_TO_SPARSE),
            (int(Kind.ENCAPSULATION_KEY), rlwe.SPARSE_TO_DENSE)]


def _relabel(blob: bytes, **fields) -> bytes:
    """The record with metadata fields replaced, re-sealed."""
    size = struct.unpack_from("<I", blob, 12)[0]
    meta = json.loads(blob[88:88 + size])
    meta.update(fields)
    payload = blob[88 + size:]
    return pack(Kind.ENCAPSULATION_KEY, split(blob).params_id.hex(), meta, [payload])


def test_direction_must_fit_the_rows(world11, encapsulation):
    to_sparse, _ = encapsulation
    blob = serialize.dumps(to_sparse)
    with pytest.raises(SerializationError, match="shape"):
        serialize.loads(_relabel(blob, direction=rlwe.SPARSE_TO_DENSE), world11.params)
    with pytest.raises(SerializationError, match="direction"):
        serialize.loads(_relabel(blob, direction="sideways"), world11.params)
    with pytest.raises(SerializationError, match="ephemeral_weight"):
        serialize.loads(_relabel(blob, ephemeral_weight=0), world11.params)
