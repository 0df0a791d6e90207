"""CKKS encoder against independent references: a direct O(N^2) evaluation of the encoded
polynomial at zeta^(5^j), exact rounding with Python fractions, exact CRT with Python integers,
and the ring-homomorphism / automorphism properties the evaluator relies on."""
import math
import random
from fractions import Fraction

import numpy as np
import pytest
import torch

from fhe_core import ops
from fhe_core.ckks import Encoder, Plaintext, coefficients_to_slots, round_scaled, slots_to_coefficients
from fhe_core.errors import EncodingError
from fhe_core.params import ParamsLiteral, Params, preset
from fhe_reference import DEVICES, crt, fresh_rng

TINY = "N10QP241L3D4Insecure"  # N = 2^10, q = 60 + 3 * 40 bits


def _params(device="cpu", name=TINY) -> Params:
    return preset(name, allow_insecure=True, device=device)


def _random_message(rng, count, real=False):
    z = rng.uniform(-1, 1, count)
    return z if real else z + 1j * rng.uniform(-1, 1, count)


def _bits(got, want) -> float:
    """Precision in bits: -log2 of the largest absolute error."""
    return -math.log2(max(np.abs(np.asarray(got) - np.asarray(want)).max(), 2.0 ** -200))


def _integer_coefficients(pt: Plaintext, params: Params) -> list[int]:
    """The plaintext's N integer coefficients, centred mod Q_level, by Python-integer CRT."""
    basis = params.q_basis(pt.level)
    residues = basis.intt(pt.data).cpu().numpy().astype(np.uint64).T.tolist()
    big_q = basis.modulus
    lifted = (crt([int(r) for r in column], list(basis.primes)) for column in residues)
    return [x - big_q if x > big_q // 2 else x for x in lifted]


def _direct_slots(coefficients: list[int], n_slots: int, scale: float) -> np.ndarray:
    """m(zeta^(5^j)) / scale for j < n_slots, zeta = exp(i pi / N), by an O(N * n) evaluation."""
    n = len(coefficients)
    exponents = np.array([pow(5, j, 2 * n) for j in range(n_slots)])
    powers = np.outer(exponents, np.arange(n)) % (2 * n)                  # 5^j * k mod 2N
    points = np.exp(1j * np.pi * powers / n)
    scaled = np.array([float(Fraction(c) / Fraction(scale)) for c in coefficients])
    return points @ scaled


# ---- the embedding ------------------------------------------------------------------------------

@pytest.mark.parametrize("slots", [1, 2, 8, 64, 512])
def test_embedding_matches_direct_evaluation_at_the_rotation_group(slots):
    rng, _ = fresh_rng()
    c = rng.uniform(-1, 1, 2 * slots)
    xi_exponents = np.outer([pow(5, j, 4 * slots) for j in range(slots)], np.arange(2 * slots)) % (4 * slots)
    direct = np.exp(1j * np.pi * xi_exponents / (2 * slots)) @ c          # m'(xi^(5^j)), xi^(4n) = 1
    assert _bits(coefficients_to_slots(c), direct) > 40
    assert _bits(slots_to_coefficients(direct), c) > 40


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("slots", [512, 32, 1])
def test_encoded_polynomial_evaluates_to_the_message(device, slots):
    """Full path: the integer polynomial (CRT of the NTT-domain output) evaluated at zeta^(5^j)."""
    rng, _ = fresh_rng()
    params = _params(device)
    z = _random_message(rng, slots)
    pt = Encoder(params).encode(z, slots=slots)
    assert (pt.level, pt.scale, pt.slots, pt.is_ntt, pt.params_id) == (3, 2.0 ** 40, slots, True, params.params_id)
    assert pt.data.shape == (4, 1024) and pt.data.dtype == torch.int64 and pt.data.device.type == device
    coefficients = _integer_coefficients(pt, params)
    gap = 1024 // (2 * slots)
    assert all(c == 0 for k, c in enumerate(coefficients) if k % gap)  # m(X) = m'(X^gap)
    direct = _direct_slots(coefficients, 512, pt.scale)
    assert _bits(direct, np.tile(z, 512 // slots)) > 30                # the n values repeat N/2n times


# ---- round trips --------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("slots,level,log_scale,min_bits", [
    (512, 3, 40, 30), (128, 2, 40, 30), (4, 1, 40, 30), (512, 0, 40, 30),
    (512, 3, 55, 45), (512, 3, 60, 45), (16, 2, 60, 45), (512, 0, 30, 20),
])
def test_round_trip_precision(device, slots, level, log_scale, min_bits):
    rng, _ = fresh_rng()
    encoder = Encoder(_params(device))
    for real in (False, True):
        z = _random_message(rng, slots, real)
        got = encoder.decode(encoder.encode(z, level=level, scale=2.0 ** log_scale, slots=slots))
        bits = _bits(got, z)
        print(f"slots={slots} level={level} scale=2^{log_scale} real={real}: {bits:.1f} bits")
        assert got.shape == (slots,) and bits >= min_bits


def test_short_vectors_are_zero_padded():
    rng, _ = fresh_rng()
    encoder = Encoder(_params())
    z = _random_message(rng, 100)
    got = encoder.decode(encoder.encode(z))
    assert got.shape == (512,) and _bits(got[:100], z) > 30 and _bits(got[100:], 0) > 30
    assert _bits(encoder.decode(encoder.encode(z, slots=128))[:100], z) > 30


def test_round_trip_at_the_benchmark_preset():
    rng, _ = fresh_rng()
    params = preset("N16QP1766L30D3")
    encoder = Encoder(params)
    z = _random_message(rng, params.slots)
    bits = _bits(encoder.decode(encoder.encode(z)), z)
    print(f"N=2^16, L=30, scale 2^40: {bits:.1f} bits")
    assert bits > 28


# ---- exact rounding and reconstruction ---------------------------------------------------------

def _from_digits(digits: np.ndarray) -> list[int]:
    return [sum(int(d) << (52 * k) for k, d in enumerate(column)) for column in digits.T]


def _round_half_up(v: float, scale: float) -> int:
    return math.floor(Fraction(v) * Fraction(scale) + Fraction(1, 2))


def test_round_scaled_is_exact():
    rng, _ = fresh_rng()
    magnitudes = np.exp2(rng.uniform(-70, 70, 3000))
    values = magnitudes * rng.choice([-1.0, 1.0], magnitudes.size)
    for scale in (2.0 ** 55, 2.0 ** 60, float(rng.uniform(1, 2)) * 2.0 ** 59, 1.0, 3.0, float(2 ** 61 - 1)):
        got = _from_digits(round_scaled(values, scale))
        assert got == [_round_half_up(v, scale) for v in values], f"scale = {scale!r}"


def test_round_scaled_handles_ties_and_near_ties():
    rng, _ = fresh_rng()
    scale = 2.0 ** 60
    halves = (rng.integers(-2 ** 40, 2 ** 40, 200) + 0.5) / scale   # exact ties k + 1/2
    near = np.concatenate([np.nextafter(halves, np.inf), np.nextafter(halves, -np.inf)])
    big = np.ldexp(rng.uniform(0.5, 1, 50), rng.integers(100, 900, 50)) / scale  # up to 2^900
    values = np.concatenate([halves, near, big, [0.0, -0.0, 5e-324, -1e-300]])
    digits = round_scaled(values, scale)
    assert digits.dtype == np.int64 and np.abs(digits).max() < 2 ** 53
    assert _from_digits(digits) == [_round_half_up(v, scale) for v in values]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("scale", [2.0 ** 55, 2.0 ** 60, 1.5 * 2.0 ** 59 + 2.0 ** 7])
def test_encoding_rounds_exactly_at_high_scales(device, scale):
    """The integer polynomial equals floor(scale * c + 1/2) in exact arithmetic, where c are the
    float64 coefficients of the inverse embedding."""
    rng, _ = fresh_rng()
    params = _params(device)
    slots = 64
    z = _random_message(rng, slots) * 8
    pt = Encoder(params).encode(z, level=2, scale=scale, slots=slots)
    expected = [0] * params.n
    for k, c in enumerate(slots_to_coefficients(z)):
        expected[k * params.n // (2 * slots)] = _round_half_up(float(c), scale)
    assert _integer_coefficients(pt, params) == expected


@pytest.mark.parametrize("name,level", [(TINY, 3), ("N16QP1766L30D3", 30)])
def test_decoding_reconstructs_big_coefficients_exactly(name, level):
    """Coefficient-domain plaintexts holding random integers of 1..1000 bits (and, where Q is
    small enough for float64, values next to +-Q/2) decode like the exact integers."""
    rng, _ = fresh_rng()
    params = _params(name=name)
    basis = params.q_basis(level)
    slots, big_q = 8, basis.modulus
    bits = random.Random(int(rng.integers(2 ** 62)))
    sizes = rng.integers(1, min(1000, big_q.bit_length() - 2), 2 * slots)
    values = [int(rng.choice([-1, 1])) * (bits.getrandbits(int(b)) | 1 << int(b - 1)) for b in sizes]  # b bits
    if big_q.bit_length() < 1000:
        values[:4] = [big_q // 2, -(big_q // 2), big_q // 2 - 12345, -(big_q // 2) + 1]
    data = torch.zeros(level + 1, params.n, dtype=torch.int64)
    gap = params.n // (2 * slots)
    for k, x in enumerate(values):
        data[:, k * gap] = torch.tensor([x % q for q in basis.primes], dtype=torch.int64)
    scale = 2.0 ** 40
    got = Encoder(params).decode(Plaintext(data, level, scale, params.params_id, slots, is_ntt=False))
    want = coefficients_to_slots(np.array([float(Fraction(x, 2 ** 40)) for x in values]))
    assert np.allclose(got, want, rtol=0, atol=np.abs(want).max() * 2.0 ** -48)


# ---- ring structure the evaluator relies on -----------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("slots", [512, 16])
def test_product_of_encodings_encodes_the_slotwise_product(device, slots):
    """pt1 * pt2 mod (X^N + 1) (NTT-domain product = negacyclic convolution) decodes at
    scale^2 to z1 * z2: the slot map is a ring homomorphism."""
    rng, _ = fresh_rng()
    params = _params(device)
    encoder = Encoder(params)
    z1, z2 = _random_message(rng, slots), _random_message(rng, slots)
    pt1, pt2 = encoder.encode(z1, slots=slots), encoder.encode(z2, slots=slots)
    product = ops.mul(pt1.data, pt2.data, params.q_basis(3).moduli)
    got = encoder.decode(Plaintext(product, 3, pt1.scale * pt2.scale, params.params_id, slots))
    bits = _bits(got, z1 * z2)
    print(f"slots={slots}: product precision {bits:.1f} bits")
    assert bits > 28


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("slots", [512, 64])
def test_automorphisms_rotate_and_conjugate_slots(device, slots):
    """X -> X^(5^r) rotates left by r; X -> X^(2N-1) conjugates (the contract rlwe uses)."""
    rng, _ = fresh_rng()
    params = _params(device)
    encoder = Encoder(params)
    z = _random_message(rng, slots)
    pt = encoder.encode(z, slots=slots)
    moduli = params.q_basis(3).moduli
    for r in [1, 5, int(rng.integers(2, slots)) if slots > 2 else 1, slots - 1]:
        rotated = ops.automorphism_ntt(pt.data, moduli, pow(5, r, 2 * params.n))
        got = encoder.decode(Plaintext(rotated, 3, pt.scale, params.params_id, slots))
        assert _bits(got, np.roll(z, -r)) > 30, f"r = {r}"
    conjugated = ops.automorphism_ntt(pt.data, moduli, 2 * params.n - 1)
    assert _bits(encoder.decode(Plaintext(conjugated, 3, pt.scale, params.params_id, slots)), np.conj(z)) > 30


# ---- errors --------------------------------------------------------------------------------------

@pytest.mark.parametrize("values,kwargs,match", [
    (np.zeros(513), {}, "do not fit in 512 slots"),
    (np.zeros(9), {"slots": 8}, "do not fit in 8 slots"),
    ([1.0, np.nan], {}, "finite"),
    ([np.inf], {}, "finite"),
    ([complex(0, np.inf)], {}, "finite"),
    (["a"], {}, "real or complex numbers"),
    (np.zeros((2, 2)), {}, "1-D"),
    ([1.0], {"level": 4}, "level must be"),
    ([1.0], {"level": -1}, "level must be"),
    ([1.0], {"level": 1.0}, "level must be"),
    ([1.0], {"slots": 3}, "slots must be"),
    ([1.0], {"slots": 1024}, "slots must be"),
    ([1.0], {"slots": 0}, "slots must be"),
    ([1.0], {"scale": 0.5}, "scale must be"),
    ([1.0], {"scale": float("nan")}, "scale must be"),
    ([1.0], {"scale": 2.0 ** 513}, "scale must be"),
    (np.full(512, 2.0 ** 20), {"level": 0}, "beyond Q_0/2"),   # c_0 = 2^20: 2^60 at a 60-bit q_0
    ([1e300], {"scale": 2.0 ** 40}, "beyond"),
])
def test_encode_refuses_bad_input(values, kwargs, match):
    with pytest.raises(EncodingError, match=match):
        Encoder(_params()).encode(values, **kwargs)


def test_decode_and_plaintext_refuse_inconsistent_metadata():
    params = _params()
    pt = Encoder(params).encode([1.0])
    other = Params.from_literal(ParamsLiteral(log_n=10, log_q=[60, 40, 40, 40], log_p=[60], log_default_scale=40),
                                allow_insecure=True)
    with pytest.raises(EncodingError, match="params_id"):
        Encoder(other).decode(pt)
    with pytest.raises(EncodingError, match="level"):
        Plaintext(pt.data, 2, pt.scale, pt.params_id, pt.slots)
    with pytest.raises(EncodingError, match="slots"):
        Plaintext(pt.data, 3, pt.scale, pt.params_id, 3)
    with pytest.raises(EncodingError, match="scale"):
        Plaintext(pt.data, 3, float("inf"), pt.params_id, 8)
