"""loads keeps its promise: every refusal of bad or unwanted input is a SerializationError (an
insecure parameter record too, which is also a SecurityError), and a secret key is only handed
back to a caller that names SecretKey in ``expect``."""
from __future__ import annotations

import pytest

from fhe_core import rlwe, serialize
from fhe_core.errors import SecurityError, SerializationError, SerializedSecurityError, WrongKindError
from fhe_core.params import Params, preset


def test_an_insecure_params_record_is_a_serialization_error(world):
    blob = serialize.dumps(world.params)
    with pytest.raises(SerializationError, match="^params: log2\\(QP\\) = .* exceeds the 128-bit bound") as info:
        serialize.loads(blob)
    assert isinstance(info.value, SerializedSecurityError) and isinstance(info.value, SecurityError)
    assert serialize.loads(blob, allow_insecure=True).params_id == world.params.params_id


def test_narrow_errors_in_a_params_record_are_refused_too():
    literal = preset("N14QP437L8D9").literal
    literal.error_eta = 1
    narrow = Params.from_literal(literal, allow_insecure=True)
    with pytest.raises(SerializedSecurityError, match="^params: error_eta = 1"):
        serialize.loads(serialize.dumps(narrow))


def test_a_secret_key_loads_only_when_asked_for(world):
    blob = serialize.dumps(world.sk)
    for expect in (None, object, (rlwe.PublicKey, object)):
        with pytest.raises(WrongKindError, match="^loads: the record is a secret key; pass expect=rlwe.SecretKey"):
            serialize.loads(blob, world.params, expect=expect)
    with pytest.raises(WrongKindError, match="^loads_many: the record is a secret key"):
        serialize.loads_many(serialize.dumps_many([world.ct, world.sk]), world.params)
    loaded = serialize.loads(blob, world.params, expect=rlwe.SecretKey)
    assert loaded.params_id == world.params.params_id and bool((loaded.data == world.sk.data).all())
    both = serialize.loads(blob, world.params, expect=(rlwe.PublicKey, rlwe.SecretKey))
    assert isinstance(both, rlwe.SecretKey)


def test_a_file_holding_a_secret_key_needs_expect_too(world, tmp_path):
    path = tmp_path / "sk.fhe"
    serialize.dump(world.sk, path)
    with pytest.raises(WrongKindError, match="secret key"):
        serialize.load(path, world.params)
    assert isinstance(serialize.load(path, world.params, expect=rlwe.SecretKey), rlwe.SecretKey)
