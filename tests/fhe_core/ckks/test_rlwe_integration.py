"""CKKS message path across the layers: Params -> Encoder -> rlwe encryption, rotations and
conjugation through key switching -> decryption -> decoding, against numpy on fresh random
inputs. Precision is -log2 of the largest slot error."""
import numpy as np
import pytest

from fhe_core import rlwe
from fhe_core.ckks import Encoder, Plaintext
from fhe_core.params import preset

PRESET = "N12QP483L6D3Insecure"  # N = 2^12, scale 2^40, dnum = 3


@pytest.fixture(scope="module", params=[pytest.param("cpu"), pytest.param("cuda", marks=pytest.mark.gpu)])
def setup(request):
    params = preset(PRESET, allow_insecure=True, device=request.param)
    ctx = rlwe.RLWEContext.from_params(params, device=request.param)
    sk = rlwe.gen_secret_key(ctx)
    steps = [1, 7, params.slots - 3]
    galois = [rlwe.galois_element_for_rotation(r, params.n) for r in steps]
    conj = rlwe.galois_element_for_conjugation(params.n)
    keys = rlwe.gen_eval_keys(ctx, sk, galois + [conj])
    return params, ctx, Encoder(params), sk, keys, steps, galois, conj


def _message(params):
    rng = np.random.default_rng()
    return rng.uniform(-1, 1, params.slots) + 1j * rng.uniform(-1, 1, params.slots)


def _decrypt(setup, ct, like: Plaintext):
    params, ctx, encoder, sk, *_ = setup
    m = rlwe.decrypt(ctx, sk, ct)
    return encoder.decode(Plaintext(data=m, level=ct.level, scale=like.scale, params_id=like.params_id,
                                    slots=like.slots))


def _bits(got, expected):
    return -np.log2(np.max(np.abs(got - expected)))


def test_secret_and_public_key_encryption_precision(setup):
    params, ctx, encoder, sk, *_ = setup
    z = _message(params)
    pt = encoder.encode(z)
    pk = rlwe.gen_public_key(ctx, sk)
    assert _bits(_decrypt(setup, rlwe.encrypt_sk(ctx, sk, pt.data, pt.level), pt), z) >= 28
    assert _bits(_decrypt(setup, rlwe.encrypt_pk(ctx, pk, pt.data, pt.level), pt), z) >= 22


def test_rotations_and_conjugation_precision(setup):
    params, ctx, encoder, sk, keys, steps, galois, conj = setup
    z = _message(params)
    pt = encoder.encode(z)
    ct = rlwe.encrypt_sk(ctx, sk, pt.data, pt.level)
    for r, k in zip(steps, galois):
        assert _bits(_decrypt(setup, rlwe.apply_galois(ctx, ct, k, keys), pt), np.roll(z, -r)) >= 20, f"step {r}"
    assert _bits(_decrypt(setup, rlwe.apply_galois(ctx, ct, conj, keys), pt), np.conj(z)) >= 20
    hoisted = rlwe.apply_galois_hoisted(ctx, ct, galois, keys)
    for r, k in zip(steps, galois):
        assert _bits(_decrypt(setup, hoisted[k], pt), np.roll(z, -r)) >= 20, f"hoisted step {r}"
