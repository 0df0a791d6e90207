"""CKKS ciphertexts (scale and slots) survive a round trip and are validated on load."""
import numpy as np
import pytest

from fhe_core import rlwe, serialize
from fhe_core.ckks import Ciphertext, Decryptor, Encoder, Encryptor, rlwe_context
from fhe_core.errors import SerializationError
from fhe_core.params import preset


def test_ckks_ciphertext_round_trip_keeps_scale_slots_and_message():
    params = preset("N10QP241L3D4Insecure", allow_insecure=True)
    sk = rlwe.gen_secret_key(rlwe_context(params))
    encoder = Encoder(params)
    z = np.random.default_rng().uniform(-1, 1, 64)
    ct = Encryptor(params, sk).encrypt(encoder.encode(z, slots=64, scale=2.0 ** 33 + 0.25))
    loaded = serialize.loads(serialize.dumps(ct), params)
    assert type(loaded) is Ciphertext
    assert (loaded.scale, loaded.slots, loaded.level) == (ct.scale, ct.slots, ct.level)
    assert bool((loaded.data == ct.data).all())
    decoded = encoder.decode(Decryptor(params, sk).decrypt(loaded))
    assert -np.log2(np.max(np.abs(decoded - z))) >= 20
    blob = bytearray(serialize.dumps(ct))
    blob[-1] ^= 1
    with pytest.raises(SerializationError):
        serialize.loads(bytes(blob), params)
