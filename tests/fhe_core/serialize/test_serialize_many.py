"""Sequences of records (dumps_many / loads_many): a batch of ciphertexts travels as one blob."""
import numpy as np
import pytest

from fhe_core import rlwe, serialize
from fhe_core.ckks import Ciphertext, Decryptor, Encoder, Encryptor, rlwe_context
from fhe_core.errors import (ChecksumError, SerializationError, SerializedParamsMismatchError, SizeLimitError,
                             TruncatedError, WrongKindError)
from fhe_core.params import preset


@pytest.fixture(scope="module")
def batch():
    params = preset("N10QP241L3D4Insecure", allow_insecure=True)
    sk = rlwe.gen_secret_key(rlwe_context(params))
    encoder = Encoder(params)
    rng = np.random.default_rng()
    messages = [rng.uniform(-1, 1, 32) for _ in range(3)]
    encryptor = Encryptor(params, sk)
    cts = [encryptor.encrypt(encoder.encode(m, slots=32, level=level)) for level, m in enumerate(messages)]
    return params, sk, encoder, messages, cts


def test_round_trip_keeps_order_levels_and_messages(batch):
    params, sk, encoder, messages, cts = batch
    blob = serialize.dumps_many(cts)
    assert len(blob) == sum(len(serialize.dumps(ct)) for ct in cts)
    loaded = serialize.loads_many(blob, params, expect=Ciphertext)
    assert [ct.level for ct in loaded] == [0, 1, 2]
    for ct, original, m in zip(loaded, cts, messages):
        assert type(ct) is Ciphertext and bool((ct.data == original.data).all())
        assert np.abs(encoder.decode(Decryptor(params, sk).decrypt(ct)) - m).max() < 2.0**-15


def test_refuses_empty_truncated_corrupt_foreign_and_unexpected_input(batch):
    params, sk, _, _, cts = batch
    blob = serialize.dumps_many(cts)
    with pytest.raises(SerializationError, match="empty"):
        serialize.dumps_many([])
    with pytest.raises(TruncatedError):
        serialize.loads_many(b"", params)
    with pytest.raises(TruncatedError):
        serialize.loads_many(blob[:-5], params)
    corrupt = bytearray(blob)
    corrupt[-1] ^= 1
    with pytest.raises(ChecksumError):
        serialize.loads_many(bytes(corrupt), params)
    with pytest.raises(SizeLimitError, match="max_count"):
        serialize.loads_many(blob, params, max_count=2)
    with pytest.raises(SizeLimitError):
        serialize.loads_many(blob, params, max_bytes=len(blob) - 1)
    with pytest.raises(WrongKindError):   # a secret key slipped into a batch of ciphertexts
        serialize.loads_many(blob + serialize.dumps(sk), params, expect=Ciphertext)
    with pytest.raises(WrongKindError):   # parameters are never part of a sequence
        serialize.loads_many(serialize.dumps(params) + blob, params)
    other = preset("N11QP342L4D3Insecure", allow_insecure=True)
    with pytest.raises(SerializedParamsMismatchError):
        serialize.loads_many(blob, other)


def test_read_header_from_a_records_first_bytes(batch):
    """A receiver can tell a record's kind and parameters from its first 88 bytes (no checksum)."""
    params, sk, _, _, cts = batch
    head = serialize.read_header(serialize.dumps(cts[1])[:serialize.HEADER_BYTES])
    assert head.kind == serialize.Kind.CKKS_CIPHERTEXT and head.params_id == params.params_id
    blob = serialize.dumps(sk)
    assert serialize.read_header(blob[:200]).kind == serialize.Kind.SECRET_KEY
    assert serialize.read_header(blob).payload_bytes + serialize.read_header(blob).metadata_bytes \
        + serialize.HEADER_BYTES == len(blob)
    with pytest.raises(TruncatedError):
        serialize.read_header(blob[:serialize.HEADER_BYTES - 1])
    with pytest.raises(SerializationError, match="magic"):
        serialize.read_header(b"\0" * serialize.HEADER_BYTES)
