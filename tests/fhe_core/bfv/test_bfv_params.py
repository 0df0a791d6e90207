"""BFV parameters: plaintext-modulus validation, presets equal to SEAL's 128-bit defaults."""
import math

import pytest

from fhe_core import bfv
from fhe_core.errors import ParameterError, SchemeMismatchError, SecurityError
from fhe_core.params import BFV_PRESETS, Params, ParamsLiteral, content_name, preset

# SEAL's 128-bit BFV defaults (CoeffModulus::BFVDefault), copied from
# seal:native/src/seal/util/globals.cpp (GetDefaultCoeffModulus128): the q primes then the
# special prime. Our presets must generate exactly these.
SEAL_DEFAULT_128 = {
    "BFVN13QP218L3D4T17": [0x7fffffd8001, 0x7fffffc8001, 0xfffffffc001, 0xffffff6c001, 0xfffffebc001],
    "BFVN14QP438L7D8T17": [0xfffffffd8001, 0xfffffffa0001, 0xfffffff00001, 0x1fffffff68001, 0x1fffffff50001,
                           0x1ffffffee8001, 0x1ffffffea0001, 0x1ffffffe88001, 0x1ffffffe48001],
    "BFVN15QP881L14D15T17": [0x7fffffffe90001, 0x7fffffffbf0001, 0x7fffffffbd0001, 0x7fffffffba0001,
                             0x7fffffffaa0001, 0x7fffffffa50001, 0x7fffffff9f0001, 0x7fffffff7e0001,
                             0x7fffffff770001, 0x7fffffff380001, 0x7fffffff330001, 0x7fffffff2d0001,
                             0x7fffffff170001, 0x7fffffff150001, 0x7ffffffef00001, 0xfffffffff70001],
}


def _lit(**changes) -> ParamsLiteral:
    fields = dict(log_n=10, log_q=[50, 50, 50], log_p=[55], log_default_scale=0, scheme="bfv",
                  plaintext_modulus=65537)
    fields.update(changes)
    return ParamsLiteral(**fields)


@pytest.mark.parametrize("name", list(SEAL_DEFAULT_128))
def test_secure_presets_are_seals_defaults(name):
    params = preset(name)  # no allow_insecure: passes the 128-bit check
    assert list(params.q_primes + params.p_primes) == SEAL_DEFAULT_128[name]
    assert params.scheme == "bfv" and params.plaintext_modulus == 65537 and params.alpha == 1
    assert content_name(params) == name


@pytest.mark.parametrize("name,chain_of", [("BFVN13QP218L3D4T20", "BFVN13QP218L3D4T17"),
                                           ("BFVN14QP438L7D8T20", "BFVN14QP438L7D8T17")])
def test_secure_t20_presets_keep_seals_chain(name, chain_of):
    params = preset(name)  # no allow_insecure: passes the 128-bit check
    assert list(params.q_primes + params.p_primes) == SEAL_DEFAULT_128[chain_of]
    t = params.plaintext_modulus
    assert t == 786433 and t % (2 * params.n) == 1 and all(t % d for d in range(2, math.isqrt(t) + 1))
    assert content_name(params) == name


@pytest.mark.parametrize("name", [n for n in BFV_PRESETS if n.endswith("Insecure")])
def test_tiny_presets_need_allow_insecure(name):
    with pytest.raises(SecurityError):
        preset(name)
    params = preset(name, allow_insecure=True)
    assert content_name(params) == name
    t = params.plaintext_modulus
    assert t % (2 * params.n) == 1 and all(pow(a, t - 1, t) == 1 for a in (2, 3, 5, 7))
    assert t < min(params.q_primes)


def test_a_valid_literal_round_trips_and_t_is_part_of_the_id():
    params = Params.from_literal(_lit(), allow_insecure=True)
    assert Params.from_literal(params.literal, allow_insecure=True) == params
    other = Params.from_literal(_lit(plaintext_modulus=786433), allow_insecure=True)
    assert other.params_id != params.params_id and other.q_primes == params.q_primes
    # BFV takes the largest primes of each size (SEAL), not CKKS's scaling primes near 2^bits
    assert list(params.q_primes) == sorted(params.q_primes, reverse=True)
    assert all(math.log2(q) < 50 for q in params.q_primes)


@pytest.mark.parametrize("changes,match", [
    ({"plaintext_modulus": 0}, "plaintext_modulus must be in"),
    ({"plaintext_modulus": 1 + 2048 * 33}, "prime plaintext_modulus"),   # 67585 = 5 * 13517
    ({"plaintext_modulus": 7681}, "prime plaintext_modulus"),            # prime, 1 mod 512 but not mod 2048
    ({"plaintext_modulus": 65537, "log_n": 17}, "prime plaintext_modulus"),  # not 1 mod 2^18
    ({"plaintext_modulus": (1 << 60) + 1}, "plaintext_modulus must be in"),  # 61 bits
    ({"plaintext_modulus": 1125899906826241, "log_q": [50, 50, 50]}, "smaller than every q prime"),
    ({"log_default_scale": 40}, "log_default_scale must be in"),
    ({"plaintext_modulus": True}, "plaintext_modulus must be an integer"),
])
def test_invalid_bfv_literals_are_refused(changes, match):
    with pytest.raises(ParameterError, match=match):
        Params.from_literal(_lit(**changes), allow_insecure=True)


def test_ckks_still_refuses_a_plaintext_modulus_and_bfv_context_refuses_ckks():
    with pytest.raises(ParameterError, match="CKKS takes no plaintext_modulus"):
        Params.from_literal(_lit(scheme="ckks", log_default_scale=40), allow_insecure=True)
    with pytest.raises(SchemeMismatchError, match="BFVContext: these are CKKS parameters"):
        bfv.BFVContext(preset("N10QP241L3D4Insecure", allow_insecure=True))


# Regression: the ids hash the normalised literal (t included) and every prime; a change makes
# every stored BFV key and ciphertext unreadable: update deliberately.
BFV_PRESET_IDS = {
    "BFVN13QP218L3D4T17": "283dd393176b8aa43a8e412d9d54d6e96fad7c0eab4083b7115df5eb7671f666",
    "BFVN14QP438L7D8T17": "4d41234e975d5ac0ad0c61c333404422bba2ba6b5ab67617d3adbcb15d08bd39",
    "BFVN15QP881L14D15T17": "9bb9a02218df60bad042e5209b7e3db16689357c38f25c233958313af3fd4ef6",
    "BFVN13QP218L3D4T20": "263e48c4f691a1b7665bcbaac1b0374f4d6811e844b5b17c96a4c4aad083d9d9",
    "BFVN14QP438L7D8T20": "b1d77c7e87a7dc19d6c17fea35916e64f512ec1db3dbfd6a69cfa269f13b8f66",
    "BFVN10QP205L2D3T17Insecure": "2465755dec1110bed71efcc0666934e109ff82e069d8b486988d9aff5f7d82b6",
    "BFVN11QP335L4D5T20Insecure": "6f098eceb0dbb8b1f2f409d7ea025e79a8a2bbd3c88c08acdba847fb644eb90c",
    "BFVN10QP660L7D3T20Insecure": "09304dbf3919c06ac50b66d873e6f711dad04ca8d9727c8da29b6b3e28ae34dd",
    "BFVN12QP660L7D3T20Insecure": "86f3196d1d20bf33438c9814b7b39317f630583f39fbf6c0a4abbadee0224aa6",
}


def test_bfv_preset_digests_are_frozen():
    assert {name: preset(name, allow_insecure=True).params_id for name in BFV_PRESETS} == BFV_PRESET_IDS
