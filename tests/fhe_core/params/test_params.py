"""Parameter literals -> Params: validation, determinism, primes, security, presets, digests."""
import dataclasses
import hashlib
import math

import pytest
import torch

from fhe_core.errors import ParameterError, SecurityError
from fhe_core.params import (MIN_SECURE_ETA, PRESETS, Params, ParamsLiteral, check_security, content_name,
                             meets_128_bits, preset, preset_literal)
from fhe_core.params.params import _from_canonical

TINY = ParamsLiteral(log_n=10, log_q=[60, 40, 40, 40], log_p=[61], log_default_scale=40)
SECURE_PRESETS = [name for name in PRESETS if not name.endswith("Insecure")]
INSECURE_PRESETS = [name for name in PRESETS if name.endswith("Insecure")]


def _fermat_prime(q: int) -> bool:
    """An independent probable-prime check (Fermat, 12 bases); the generator uses Miller-Rabin."""
    return all(pow(a, q - 1, q) == 1 for a in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37))


def _lit(**changes) -> ParamsLiteral:
    return dataclasses.replace(TINY, **changes)


# ---- presets and security -------------------------------------------------------------------------

@pytest.mark.parametrize("name", SECURE_PRESETS)
def test_secure_presets_pass_the_security_check(name):
    params = preset(name)
    assert content_name(params) == name
    assert params.log_qp <= {14: 438, 15: 881, 16: 1772}[params.log_n]  # HE Standard, ternary, 128-bit


@pytest.mark.parametrize("name", INSECURE_PRESETS)
def test_tiny_presets_need_allow_insecure(name):
    with pytest.raises(SecurityError, match="exceeds the 128-bit bound"):
        preset(name)
    assert content_name(preset(name, allow_insecure=True)) == name


def test_the_benchmark_preset_has_30_levels_and_dnum_3():
    params = preset("N16QP1766L30D3")
    assert (params.n, params.max_level, params.dnum, params.alpha) == (1 << 16, 30, 3, 11)


@pytest.mark.parametrize("name", list(PRESETS))
def test_special_primes_exceed_every_key_switching_digit(name):
    """HK20 noise condition: P > product of each digit of alpha q-primes."""
    params = preset(name, allow_insecure=True)
    big_p = math.prod(params.p_primes)
    q = params.q_primes
    for start in range(0, len(q), params.alpha):
        assert math.prod(q[start:start + params.alpha]) < big_p


@pytest.mark.parametrize("log_n,bound", [(10, 27), (11, 54), (12, 109), (13, 218), (14, 438), (15, 881),
                                         (16, 1772), (17, 3544)])
def test_security_bound_for_dense_ternary_secrets(log_n, bound):
    check_security(log_n, bound + 0.004, 0)  # log2(QP) is compared at 1/100 bit
    with pytest.raises(SecurityError):
        check_security(log_n, bound + 0.006, 0)


def test_too_large_q_is_refused_unless_allowed():
    lit = ParamsLiteral(log_n=14, log_q=[60] + [40] * 9, log_p=[61], log_default_scale=40)  # ~481 > 438
    with pytest.raises(SecurityError, match="481"):
        Params.from_literal(lit)
    assert Params.from_literal(lit, allow_insecure=True).max_level == 9


def _n16(log_q, log_p, h):
    return ParamsLiteral(log_n=16, log_q=log_q, log_p=log_p, log_default_scale=40, hamming_weight=h)


def test_sparse_secrets_use_the_stricter_bound():
    lattigo_set = _n16([60] + [40] * 9 + [39] * 3 + [60] * 8 + [56] * 4, [61] * 5, 192)  # N16QP1546H192H32
    assert 1546 < Params.from_literal(lattigo_set).log_qp < 1546.005
    too_big = _n16([60] + [40] * 30, [61] * 5, 192)                        # ~1565: fine dense, not sparse
    with pytest.raises(SecurityError, match="sparse secret"):
        Params.from_literal(too_big)
    Params.from_literal(dataclasses.replace(too_big, hamming_weight=0))
    with pytest.raises(SecurityError, match="no 128-bit security bound"):
        Params.from_literal(dataclasses.replace(lattigo_set, hamming_weight=191))
    small_ring = ParamsLiteral(log_n=14, log_q=[40, 40], log_p=[40], log_default_scale=30, hamming_weight=192)
    with pytest.raises(SecurityError, match="no 128-bit security bound"):
        Params.from_literal(small_ring)  # tiny Q, but no published sparse bound at N=2^14
    assert Params.from_literal(small_ring, allow_insecure=True).hamming_weight == 192


def test_presets_are_copied_out():
    lit = preset_literal("N14QP437L8D9")
    lit.log_q.append(40)
    assert PRESETS["N14QP437L8D9"].log_q == [56] + [40] * 8
    with pytest.raises(ParameterError, match="unknown preset"):
        preset_literal("N14")


# ---- validation -----------------------------------------------------------------------------------

@pytest.mark.parametrize("changes,match", [
    ({"log_n": 9}, "log_n must be in"),
    ({"log_n": 18}, "log_n must be in"),
    ({"log_n": "10"}, "log_n must be an integer"),
    ({"log_n": True}, "log_n must be an integer"),
    ({"log_q": []}, "log_q must be a non-empty list"),
    ({"log_q": 60}, "log_q must be a non-empty list"),
    ({"log_q": [62, 40]}, r"log_q\[0\] must be in"),
    ({"log_q": [60, 40.0]}, r"log_q\[1\] must be an integer"),
    ({"log_q": [60, 61]}, "scaling primes need bits"),        # a prime above 2^61 has 62 bits
    ({"log_q": [60, 19]}, r"log_q\[1\] must be in"),
    ({"log_p": []}, "log_p must be a non-empty list"),
    ({"log_default_scale": 0}, "log_default_scale must be in"),
    ({"log_default_scale": 61}, "log_default_scale must be in"),
    ({"log_q": [40], "log_default_scale": 40}, "leaves no room"),
    ({"hamming_weight": -1}, "hamming_weight must be in"),
    ({"hamming_weight": 1025}, "hamming_weight must be in"),
    ({"error_eta": 0}, "error_eta must be in"),
    ({"error_eta": 33}, "error_eta must be in"),
    ({"dnum": 2}, "dnum=2 does not match"),                  # 4 q-primes, alpha = 1 -> dnum = 4
    ({"dnum": 0}, "dnum must be in"),
    ({"scheme": "bfv"}, "plaintext_modulus must be in"),    # BFV needs a t
    ({"scheme": "bgv"}, "is unknown"),
    ({"plaintext_modulus": 65537}, "plaintext_modulus"),
])
def test_invalid_literals_are_refused(changes, match):
    with pytest.raises(ParameterError, match=match):
        Params.from_literal(_lit(**changes), allow_insecure=True)


def test_non_literal_is_refused():
    with pytest.raises(ParameterError, match="ParamsLiteral"):
        Params.from_literal(TINY.to_dict(), allow_insecure=True)


def test_literals_beyond_the_kernels_limits_are_refused():
    """At most 63 special primes (ModDown's exact conversion) and 63 digits (the key-switching
    inner product's 128-bit accumulator), before any prime is generated."""
    with pytest.raises(ParameterError, match="at most 63 are supported"):
        Params.from_literal(_lit(log_p=[40] * 64), allow_insecure=True)
    with pytest.raises(ParameterError, match="dnum = 64 digits"):
        Params.from_literal(_lit(log_q=[50] * 64, log_p=[60]), allow_insecure=True)


def test_a_huge_insecure_literal_is_refused_before_prime_generation(monkeypatch):
    """3000 q-primes (within the kernels' limits) fail the bound on their nominal sizes: refused
    without generating a prime (a request of that size must not cost the server minutes)."""
    import fhe_core.params.params as params_module

    def no_primes(*args, **kwargs):
        raise AssertionError("primes were generated")

    monkeypatch.setattr(params_module, "generate_primes", no_primes)
    monkeypatch.setattr(params_module, "scaling_primes", no_primes)
    lit = ParamsLiteral(log_n=16, log_q=[60] * 3000, log_p=[60] * 63, log_default_scale=40)
    with pytest.raises(SecurityError, match="183780"):  # 3063 x 60 bits
        Params.from_literal(lit)


def test_too_many_primes_of_one_size_are_refused():
    with pytest.raises(ParameterError, match="only"):  # few 20-bit primes are 1 mod 2^18
        Params.from_literal(ParamsLiteral(log_n=17, log_q=[30], log_p=[20] * 8, log_default_scale=20),
                            allow_insecure=True)


# ---- determinism, identity, serialisation -------------------------------------------------------

def test_same_literal_gives_same_primes_and_id():
    first = Params.from_literal(_lit(), allow_insecure=True)
    _from_canonical.cache_clear()  # recompute from scratch
    again = Params.from_literal(ParamsLiteral.from_json(TINY.to_json()), allow_insecure=True)
    assert again is not first and again == first
    assert Params.from_literal(_lit(dnum=4), allow_insecure=True).params_id == first.params_id  # dnum derived
    other = "cuda" if torch.cuda.is_available() else "cpu"  # the device is not part of the content
    assert first.with_device(other).params_id == first.params_id


@pytest.mark.parametrize("changes", [
    {"log_n": 11}, {"log_q": [60, 40, 40]}, {"log_q": [59, 40, 40, 40]}, {"log_p": [60]},
    {"log_p": [61, 61]}, {"log_default_scale": 39}, {"hamming_weight": 64}, {"error_eta": 20},
])
def test_different_literals_give_different_ids(changes):
    base = Params.from_literal(TINY, allow_insecure=True)
    assert Params.from_literal(_lit(**changes), allow_insecure=True).params_id != base.params_id


def test_params_id_is_the_digest_of_the_canonical_content():
    params = Params.from_literal(TINY, allow_insecure=True)
    content = ('{"format":"fhe_core.params/1","literal":{"dnum":4,"error_eta":21,"hamming_weight":0,'  # noqa: UP031 (JSON braces)
               '"log_default_scale":40,"log_n":10,"log_p":[61],"log_q":[60,40,40,40],"plaintext_modulus":0,'
               '"scheme":"ckks"},"p_primes":[%d],"q_primes":[%s]}'
               % (params.p_primes[0], ",".join(map(str, params.q_primes))))
    assert params.params_id == hashlib.sha256(content.encode()).hexdigest()


def test_literal_json_round_trip_and_errors():
    lit = _lit(hamming_weight=64, dnum=4)
    assert ParamsLiteral.from_json(lit.to_json()) == lit
    params = Params.from_literal(lit, allow_insecure=True)
    assert Params.from_literal(params.literal, allow_insecure=True) == params
    for text, match in [('{"log_n": 10}', "incomplete"), ('[1, 2]', "JSON object"), ("{", "not valid JSON"),
                        (TINY.to_json()[:-1] + ',"sigma":3.2}', "unknown parameter fields")]:
        with pytest.raises(ParameterError, match=match):
            ParamsLiteral.from_json(text)


# Regression: these ids hash the normalised literal and every prime. A change means every stored
# key, ciphertext and plaintext made with these presets becomes unreadable: update deliberately.
PRESET_IDS = {
    "N14QP437L8D9": "93e0279318f34b29844389fa71cff493885236bc802c82241f71fba0ea4c0281",
    "N15QP880L16D6": "124e27364e2f65d04ecb5a376b7e0f64ebe3c8760a16d28898863bae0a6eee7c",
    "N16QP1766L30D3": "7de2e6dbd223bc03b1db6937749528eedae779fd0e677251e8404fff6da04758",
    "N10QP241L3D4Insecure": "74841bc64171529d72d5331e460621307d7b17490b94e5847e9129937e2aefcb",
    "N11QP342L4D3Insecure": "e0d39df96cfebf9806491b185cf3fc40f786cd68c46291d803f82576c9dbb7cc",
    "N12QP483L6D3Insecure": "dc0a226c9f5d0e607b6848c18ac8d0d23a198040d25b8bbfbfbb3c3c27551937",
}


def test_preset_digests_are_frozen():
    got = {name: preset(name, allow_insecure=True).params_id for name in PRESETS}
    assert got == PRESET_IDS


# ---- primes and derived quantities ----------------------------------------------------------------

@pytest.mark.parametrize("name", list(PRESETS))
def test_preset_primes(name):
    params = preset(name, allow_insecure=True)
    lit = params.literal
    primes = params.q_primes + params.p_primes
    assert len(set(primes)) == len(primes)
    assert all(q % (2 * params.n) == 1 and _fermat_prime(q) for q in primes)
    assert params.q_primes[0].bit_length() == lit.log_q[0]
    assert [p.bit_length() for p in params.p_primes] == lit.log_p
    scaling = params.q_primes[1:]
    for q, bits in zip(scaling, lit.log_q[1:]):
        assert abs(math.log2(q) - bits) < 1e-3
    sides = [q > 1 << bits for q, bits in zip(scaling, lit.log_q[1:])]
    assert sides == [i % 2 == 0 for i in range(len(scaling))]  # above, below, above, ... (one size)


def test_derived_quantities_and_bases():
    params = Params.from_literal(TINY, allow_insecure=True)
    assert (params.n, params.slots, params.max_level, params.alpha, params.dnum) == (1024, 512, 3, 1, 4)
    assert params.default_scale == 2.0 ** 40
    assert abs(params.log_qp - math.log2(math.prod(params.q_primes + params.p_primes))) < 1e-9
    basis = params.q_basis(1)
    assert basis.primes == params.q_primes[:2] and basis.device == torch.device("cpu")
    assert params.q_basis().primes == params.q_primes
    assert params.p_basis().primes == params.p_primes
    with pytest.raises(ParameterError, match="level"):
        params.q_basis(4)


# ---- the error distribution counts for security ------------------------------------------------------

@pytest.mark.parametrize("eta", [1, 8, 20])
def test_errors_narrower_than_the_standard_are_refused_unless_allowed(eta):
    literal = preset_literal("N14QP437L8D9")
    literal.error_eta = eta  # sigma = sqrt(eta / 2) < 3.19, what the 128-bit bounds assume
    with pytest.raises(SecurityError, match=f"error_eta = {eta} gives errors of sigma = {math.sqrt(eta / 2):.2f}"):
        Params.from_literal(literal)
    with pytest.raises(SecurityError, match="error_eta"):
        check_security(14, 437.0, 0, eta)
    allowed = Params.from_literal(literal, allow_insecure=True)
    assert content_name(allowed) == "N14QP437L8D9Insecure"


def test_errors_of_the_standard_width_keep_the_bound():
    assert MIN_SECURE_ETA == 21 and math.sqrt(MIN_SECURE_ETA / 2) >= 8 / math.sqrt(2 * math.pi)
    literal = preset_literal("N14QP437L8D9")
    literal.error_eta = 32  # wider errors: at least as secure
    assert content_name(Params.from_literal(literal)) == "N14QP437L8D9"
    assert meets_128_bits(14, 437.0, 0, 21) and not meets_128_bits(14, 437.0, 0, 20)


def test_key_switching_method_is_a_literal_field_in_the_id_only_when_linear():
    """hybrid (the default) leaves the literal's JSON and every existing params_id as they were; linear is part of
    the content (another params_id, the same primes) and survives the literal's round trip; others are refused."""
    hybrid = preset("N10QP241L3D4Insecure", allow_insecure=True)
    literal = preset_literal("N10QP241L3D4Insecure")
    assert "key_switching" not in literal.to_dict() and hybrid.key_switching == "hybrid"
    linear = Params.from_literal(dataclasses.replace(literal, key_switching="linear"), allow_insecure=True)
    assert linear.key_switching == "linear" and linear.params_id != hybrid.params_id
    assert (linear.q_primes, linear.p_primes) == (hybrid.q_primes, hybrid.p_primes)
    again = Params.from_literal(ParamsLiteral.from_json(linear.literal.to_json()), allow_insecure=True)
    assert again.params_id == linear.params_id
    with pytest.raises(ParameterError, match="key_switching 'klss' is unknown"):
        Params.from_literal(dataclasses.replace(literal, key_switching="klss"), allow_insecure=True)
