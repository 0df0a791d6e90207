"""CKKS evaluator (L2): encrypt -> operation -> decrypt -> decode against numpy float64 on fresh
random inputs, with the precision each operation must reach stated in bits (-log2 of the largest
absolute slot error); exact scale and level bookkeeping; rescale against a Python big-integer
reference; typed errors naming the operation.

Thresholds at scale 2^40 on N = 2^12 (in brackets: the minimum over 5 fresh key sets on CPU):
fresh secret-key encryption >= 28 [30.6], public-key >= 22 [23.8], add/sub/negate/constants
>= 27 [30.3], mul + relin + rescale (ct-ct, ct-pt, ct-constant) >= 24 [27.5], rotations,
conjugation and hoisted rotations >= 20 [22.5], a chain of six multiplications down to level 0
>= 22 [26.5, values up to ~10], rotate-and-sum and inner product over all 2048 slots (absolute,
sums up to ~2^6) >= 15.5 and >= 16 [19.1].
"""
import dataclasses
from fractions import Fraction

import numpy as np
import pytest
import torch

from fhe_core import ckks, rlwe
from fhe_core.ckks import Ciphertext, Decryptor, Encoder, Encryptor, Evaluator, ScaleMismatchError, SlotMismatchError
from fhe_core.errors import (
    EncodingError, LevelMismatchError, MissingKeyError, ParameterError, ParamsMismatchError, ScaleOverflowError,
)
from fhe_core.params import Params, preset, preset_literal
from fhe_reference import DEVICES, crt, fresh_rng

PRESET = "N12QP483L6D3Insecure"  # N = 2^12, L = 6, 40-bit scaling primes, scale 2^40, dnum = 3
SPARSE = 64                      # slots of the sparse-packing tests


class Setup:
    """Client (encoder, encryptors, decryptor) and server (evaluator with evaluation keys only)."""

    def __init__(self, device: str, key_switching: str = "hybrid"):
        literal = dataclasses.replace(preset_literal(PRESET), key_switching=key_switching)
        self.params = params = Params.from_literal(literal, allow_insecure=True, device=device)
        self.rng, _ = fresh_rng()
        ctx = ckks.rlwe_context(params)
        sk = rlwe.gen_secret_key(ctx)
        self.random_steps = [int(s) for s in self.rng.choice(np.arange(3, params.slots - 1), 3, replace=False)]
        self.steps = Evaluator.rotation_steps_for_sum(params.slots) + self.random_steps + [-1, 3]
        self.keys = rlwe.gen_eval_keys(ctx, sk, ckks.galois_elements(params.n, self.steps, conjugate=True))
        self.encoder = Encoder(params)
        self.encryptor, self.pk_encryptor = Encryptor(params, sk), Encryptor(params, rlwe.gen_public_key(ctx, sk))
        self.decryptor = Decryptor(params, sk)
        self.evaluator = Evaluator(params, self.keys)

    def message(self, slots: int | None = None) -> np.ndarray:
        n = slots or self.params.slots
        return self.rng.uniform(-1, 1, n) + 1j * self.rng.uniform(-1, 1, n)

    def encrypt(self, z, *, level: int | None = None, slots: int | None = None, scale: float | None = None):
        return self.encryptor.encrypt(self.encoder.encode(z, level=level, slots=slots, scale=scale))

    def decrypt(self, ct: Ciphertext) -> np.ndarray:
        return self.encoder.decode(self.decryptor.decrypt(ct))


# both methods of key switching on every device (linear's CUDA words equal the CPU's: rlwe/test_rlwe_gpu.py)
@pytest.fixture(scope="module", params=[*DEVICES, pytest.param("cpu-linear", id="cpu-linear"),
                                        pytest.param("cuda-linear", id="cuda-linear", marks=pytest.mark.gpu)])
def s(request) -> Setup:
    device, _, method = request.param.partition("-")
    return Setup(device, method or "hybrid")


def bits(got, expected) -> float:
    return float(-np.log2(np.max(np.abs(np.asarray(got) - np.asarray(expected)))))


def window_sums(z: np.ndarray, n: int) -> np.ndarray:
    """slot j -> sum_(t < n) z_(j + t mod len(z)), the numpy reference of rotate_and_sum."""
    return sum(np.roll(z, -t) for t in range(n))


# ---- encryption -----------------------------------------------------------------------------------

def test_encrypt_decrypt_secret_and_public_key(s):
    z = s.message()
    pt = s.encoder.encode(z)
    for encryptor, need in ((s.encryptor, 28), (s.pk_encryptor, 22)):
        ct = encryptor.encrypt(pt)
        assert isinstance(ct, Ciphertext) and ct.degree == 1 and ct.is_ntt
        assert (ct.level, ct.scale, ct.slots, ct.params_id) == (pt.level, pt.scale, pt.slots, pt.params_id)
        assert tuple(ct.data.shape) == (2, s.params.max_level + 1, s.params.n)
        assert bits(s.decrypt(ct), z) >= need


def test_encrypt_sparse_low_level_and_other_scale(s):
    z = s.message(SPARSE)
    ct = s.encrypt(z, level=2, slots=SPARSE, scale=2.0 ** 35)
    assert (ct.level, ct.slots, ct.scale) == (2, SPARSE, 2.0 ** 35)
    assert bits(s.decrypt(ct), z) >= 24


def test_encryption_objects_check_their_inputs(s):
    other = preset("N10QP241L3D4Insecure", allow_insecure=True)
    other_sk = rlwe.gen_secret_key(ckks.rlwe_context(other))
    with pytest.raises(ParamsMismatchError, match="^Encryptor: "):
        Encryptor(s.params, other_sk)
    with pytest.raises(ParamsMismatchError, match="^Decryptor: "):
        Decryptor(s.params, other_sk)
    with pytest.raises(ParameterError, match="^Decryptor: "):
        Decryptor(s.params, s.keys)
    with pytest.raises(ParamsMismatchError, match="^encrypt: "):
        s.encryptor.encrypt(Encoder(other).encode([1.0]))
    ct = s.encrypt(s.message())
    with pytest.raises(ParameterError, match="scale"):
        ct.replace(scale=0.0)
    with pytest.raises(ParameterError, match="slots"):
        ct.replace(slots=3)


# ---- addition, subtraction, negation --------------------------------------------------------------

def test_add_sub_negate_ciphertexts_and_plaintexts(s):
    ev, z, w = s.evaluator, s.message(), s.message()
    a, b, pw = s.encrypt(z), s.encrypt(w), s.encoder.encode(w)
    assert bits(s.decrypt(ev.add(a, b)), z + w) >= 27
    assert bits(s.decrypt(ev.sub(a, b)), z - w) >= 27
    assert bits(s.decrypt(ev.negate(a)), -z) >= 27
    assert bits(s.decrypt(ev.add(a, pw)), z + w) >= 27
    assert bits(s.decrypt(ev.sub(a, pw)), z - w) >= 27
    assert ev.add(a, b).scale == a.scale and ev.add(a, b).level == a.level


@pytest.mark.parametrize("constant", [0.75, -3, 0.3 - 1.7j, 2j, np.float64(1e-3)])
def test_add_sub_constant(s, constant):
    ev, z = s.evaluator, s.message()
    a = s.encrypt(z)
    assert bits(s.decrypt(ev.add(a, constant)), z + constant) >= 27
    assert bits(s.decrypt(ev.sub(a, constant)), z - constant) >= 27


def test_constant_is_encoded_as_the_encoder_encodes_it(s):
    """add(ct, c) and add(ct, encode([c] * slots)) give the same residues."""
    ev, a = s.evaluator, s.encrypt(s.message(), level=4)
    c = complex(s.rng.uniform(-2, 2), s.rng.uniform(-2, 2))
    pt = s.encoder.encode(np.full(s.params.slots, c), level=4)
    assert torch.equal(ev.add(a, c).data, ev.add(a, pt).data)


def test_constant_products_equal_the_plaintext_product(s):
    """mul(ct, c) (one Shoup product per limb and half-ring, see Evaluator._constant_halves) gives
    the residues of mul(ct, encode([c] * slots)) at the constant's scale, for complex, real and
    Gaussian-integer c; and the filled NTT-domain constant is NTT(re + im X^(N/2)) exactly."""
    ev, a = s.evaluator, s.encrypt(s.message(), level=4)
    q4 = float(s.params.q_primes[4])
    for c in (complex(s.rng.uniform(-2, 2), s.rng.uniform(-2, 2)), complex(s.rng.uniform(-2, 2), 0), 3 - 2j):
        scale = 1.0 if c == 3 - 2j else q4
        pt = s.encoder.encode(np.full(s.params.slots, c), level=4, scale=scale)
        assert torch.equal(ev.mul(a, c, constant_scale=scale).data, ev.mul(a, pt).data)
    basis = s.params.q_basis(4)
    re, im = int(s.rng.integers(-2 ** 62, 2 ** 62)) * 2 ** 20, int(s.rng.integers(-2 ** 62, 2 ** 62))
    poly = torch.zeros((5, s.params.n), dtype=torch.int64, device=a.data.device)
    poly[:, 0] = torch.tensor([re % q for q in basis.primes])
    poly[:, s.params.n // 2] = torch.tensor([im % q for q in basis.primes])
    assert torch.equal(ev._constant_ntt(re, im, 4), basis.ntt(poly))


def test_addition_aligns_levels(s):
    ev, z, w = s.evaluator, s.message(), s.message()
    high, low = s.encrypt(z), s.encrypt(w, level=3)
    for out in (ev.add(high, low), ev.add(low, high)):
        assert out.level == 3 and out.data.shape[1] == 4
        assert bits(s.decrypt(out), z + w) >= 27
    assert bits(s.decrypt(ev.sub(low, s.encoder.encode(z))), w - z) >= 27  # plaintext above the ciphertext
    dropped = ev.drop_level(high, 1)
    assert dropped.level == 1 and dropped.scale == high.scale
    assert bits(s.decrypt(dropped), z) >= 28


def test_addition_checks_scales(s):
    ev, z = s.evaluator, s.message()
    a = s.encrypt(z)
    close = a.replace(scale=a.scale * (1 + 1e-11))
    assert ev.add(a, close).scale == a.scale  # within 1e-9: accepted, a's scale kept
    other = s.encrypt(z, scale=2.0 ** 39)
    with pytest.raises(ScaleMismatchError, match="^add: "):
        ev.add(a, other)
    with pytest.raises(ScaleMismatchError, match="^sub: "):
        ev.sub(a, s.encoder.encode(z, scale=2.0 ** 41))
    with pytest.raises(ScaleMismatchError, match="^add: "):
        ev.add(a, a.replace(scale=a.scale * (1 + 1e-8)))


# ---- multiplication and rescale -------------------------------------------------------------------

def test_mul_relin_rescale(s):
    ev, z, w = s.evaluator, s.message(), s.message()
    a, b = s.encrypt(z), s.encrypt(w)
    top = s.params.max_level
    product = ev.mul_relin(a, b)
    assert (product.degree, product.level, product.scale) == (1, top, 2.0 ** 80)
    out = ev.rescale(product)
    q_last = s.params.q_primes[top]
    assert out.level == top - 1 and out.scale == float(Fraction(2 ** 80, q_last))  # correctly rounded
    assert bits(s.decrypt(out), z * w) >= 24
    # the explicit steps give the same residues, and an unrelinearized product decrypts too
    tensor = ev.tensor(a, b)
    assert tensor.degree == 2 and torch.equal(ev.relinearize(tensor).data, product.data)
    # rescaling before relinearization: the rounding error of d2 is multiplied by s^2
    assert bits(s.decrypt(ev.rescale(tensor)), z * w) >= 18
    assert torch.equal(ev.mul(a, b).data, product.data)


def test_set_scale_aligns_a_fresh_ciphertext_with_a_product(s):
    """After mul + rescale the scale is 2^80 / q_L (~1e-7 from 2^40): adding a fresh ciphertext
    needs explicit alignment, which set_scale does exactly enough and at the cost of one level."""
    ev, z, w, v = s.evaluator, s.message(), s.message(), s.message()
    product = ev.rescale(ev.mul_relin(s.encrypt(z), s.encrypt(w)))
    fresh = s.encrypt(v)
    with pytest.raises(ScaleMismatchError, match="^add: "):
        ev.add(product, fresh)
    aligned = ev.set_scale(fresh, product.scale)
    ratio = round(Fraction(product.scale) * s.params.q_primes[-1] / 2 ** 40)
    assert aligned.level == product.level and aligned.scale == 2.0 ** 40 * ratio / s.params.q_primes[-1]
    assert abs(aligned.scale / product.scale - 1) < 1e-12
    assert bits(s.decrypt(aligned), v) >= 24
    assert bits(s.decrypt(ev.add(product, aligned)), z * w + v) >= 24
    with pytest.raises(LevelMismatchError, match="^set_scale: "):
        ev.set_scale(s.encrypt(v, level=0), 2.0 ** 40)
    for bad in (float("nan"), float("inf"), -1.0, 0.0, "2^40"):  # typed errors, none from Fraction()
        with pytest.raises(ParameterError, match="^set_scale: "):
            ev.set_scale(fresh, bad)
    with pytest.raises(ScaleOverflowError, match="^set_scale: "):
        ev.set_scale(fresh, 1e300)


def test_mul_levels_align(s):
    ev, z, w = s.evaluator, s.message(), s.message()
    out = ev.rescale(ev.mul(s.encrypt(z), s.encrypt(w, level=2)))
    assert out.level == 1
    assert bits(s.decrypt(out), z * w) >= 24


def test_mul_plaintext(s):
    ev, z, w = s.evaluator, s.message(), s.message()
    a, pw = s.encrypt(z), s.encoder.encode(w, level=5)
    out = ev.mul(a, pw)
    assert out.level == 5 and out.scale == 2.0 ** 80
    assert bits(s.decrypt(ev.rescale(out)), z * w) >= 24


@pytest.mark.parametrize("constant", [3, -2.0, 1 - 2j, -5j])
def test_mul_integer_constant_keeps_level_and_scale(s, constant):
    ev, z = s.evaluator, s.message()
    a = s.encrypt(z)
    out = ev.mul(a, constant)
    assert (out.level, out.scale) == (a.level, a.scale)
    assert bits(s.decrypt(out), z * constant) >= 26


@pytest.mark.parametrize("constant", [0.1234567, -1.5, 0.3 + 0.9j, np.pi * 1j])
def test_mul_non_integer_constant(s, constant):
    ev, z = s.evaluator, s.message()
    a = s.encrypt(z, level=4)
    out = ev.mul(a, constant)
    assert out.scale == a.scale * s.params.q_primes[4]  # exact: 2^40 * q_4 fits in 53 bits
    rescaled = ev.rescale(out)
    assert rescaled.scale == a.scale and rescaled.level == 3  # the scale comes back exactly
    assert bits(s.decrypt(rescaled), z * constant) >= 26
    explicit = ev.mul(a, constant, constant_scale=2.0 ** 30)
    assert explicit.scale == 2.0 ** 70
    assert bits(s.decrypt(explicit), z * constant) >= 26
    for bad in ("x", [1], 1j, 0.5, float("nan")):  # typed errors, not float()'s ValueError / TypeError
        with pytest.raises(ParameterError, match="^mul: constant_scale must be a finite float >= 1"):
            ev.mul(a, constant, constant_scale=bad)


def test_multiplication_chain_down_to_level_zero(s):
    """x <- rescale(x * fresh factor) six times, from level L = 6 to level 0 (the factors stay at
    level L and are dropped automatically), with the scale tracked against exact rationals."""
    ev = s.evaluator
    expected = s.message()
    x, scale = s.encrypt(expected), Fraction(2 ** 40)
    for level in range(s.params.max_level, 0, -1):
        z = s.message()
        x = ev.rescale(ev.mul_relin(x, s.encrypt(z)))
        expected, scale = expected * z, scale * 2 ** 40 / s.params.q_primes[level]
        assert x.level == level - 1 and abs(Fraction(x.scale) / scale - 1) < 1e-14
        assert bits(s.decrypt(x), expected) >= 22, f"level {level - 1}"


def test_rescale_matches_big_integer_rounding():
    """rescale = round(c / q_l) coefficient-wise, checked exactly with Python integers on random
    residues (degree 2, so every component is covered) at N = 2^10."""
    params = preset("N10QP241L3D4Insecure", allow_insecure=True)
    rng, _ = fresh_rng()
    ev, ctx = Evaluator(params), ckks.rlwe_context(params)
    level, q = 3, params.q_primes[:4]
    coeffs = np.stack([rng.integers(0, p, size=(3, params.n), dtype=np.uint64) for p in q], axis=1)
    data = ctx.q_at(level).ntt(torch.from_numpy(coeffs.astype(np.int64)))
    ct = Ciphertext(data=data, level=level, params_id=params.params_id, scale=2.0 ** 40, slots=params.slots)
    out = ev.rescale(ct)
    assert out.level == 2 and out.scale == 2.0 ** 40 / q[3]
    got = ctx.q_at(2).intt(out.data).numpy().astype(np.uint64)
    for c in range(3):
        for i in rng.choice(params.n, 48, replace=False):
            x = crt([int(coeffs[c, j, i]) for j in range(4)], list(q))
            expected = (x + q[3] // 2) // q[3]
            assert [int(got[c, j, i]) for j in range(3)] == [expected % p for p in q[:3]]


# ---- rotations ------------------------------------------------------------------------------------

def test_rotate_random_steps_and_conjugate(s):
    ev, z = s.evaluator, s.message()
    a = s.encrypt(z)
    for r in s.random_steps + [-1, 1, 3]:
        out = ev.rotate(a, r)
        assert (out.level, out.scale, out.slots) == (a.level, a.scale, a.slots)
        assert bits(s.decrypt(out), np.roll(z, -r)) >= 20, f"step {r}"
    assert bits(s.decrypt(ev.rotate(a, s.params.slots)), z) >= 28  # a full turn needs no key
    assert bits(s.decrypt(ev.conjugate(a)), np.conj(z)) >= 20


def test_rotate_hoisted(s):
    ev, z = s.evaluator, s.message()
    a = s.encrypt(z, level=3)
    steps = s.random_steps + [-1, 0]
    out = ev.rotate_hoisted(a, steps)
    assert list(out) == steps
    for r in steps:
        assert out[r].level == 3 and out[r].scale == a.scale
        assert bits(s.decrypt(out[r]), np.roll(z, -r)) >= 20, f"hoisted step {r}"


def test_sparse_slots_rotate_multiply_sum(s):
    """64 slots: step 67 uses the key of 3, step -1 the key of -1 (= 63 mod 64)."""
    ev, z, w = s.evaluator, s.message(SPARSE), s.message(SPARSE)
    a, b = s.encrypt(z, slots=SPARSE), s.encrypt(w, slots=SPARSE)
    assert bits(s.decrypt(ev.rotate(a, 67)), np.roll(z, -3)) >= 20
    assert bits(s.decrypt(ev.rotate(a, -1)), np.roll(z, 1)) >= 20
    assert bits(s.decrypt(ev.rescale(ev.mul(a, b))), z * w) >= 24
    assert bits(s.decrypt(ev.rotate_and_sum(a, SPARSE)), np.full(SPARSE, z.sum())) >= 18
    with pytest.raises(SlotMismatchError, match="^add: "):
        ev.add(a, s.encrypt(w))


@pytest.mark.parametrize("n", [1, 2, 16, "all"])
def test_rotate_and_sum(s, n):
    ev, z = s.evaluator, s.message()
    n = s.params.slots if n == "all" else n
    out = ev.rotate_and_sum(s.encrypt(z), n)
    assert out.level == s.params.max_level
    # each of the log2(n) rotations adds ~2^-22 of key-switching noise to values growing like n
    assert bits(s.decrypt(out), window_sums(z, n)) >= 22 - np.log2(n) / 2 - 1


def test_inner_product(s):
    ev, z, w = s.evaluator, s.message(), s.message()
    out = ev.inner_product(s.encrypt(z), s.encrypt(w), s.params.slots)
    assert out.level == s.params.max_level - 1
    assert out.scale == float(Fraction(2 ** 80, s.params.q_primes[-1]))
    got = s.decrypt(out)
    assert bits(got, np.full(s.params.slots, np.sum(z * w))) >= 16  # |<z, w>| ~ 2^6
    part = ev.inner_product(s.encrypt(z), s.encrypt(w), 8)
    assert bits(s.decrypt(part)[0], np.sum(z[:8] * w[:8])) >= 20


# ---- errors ---------------------------------------------------------------------------------------

def test_missing_keys_are_named(s):
    z = s.message()
    a = s.encrypt(z)
    bare = Evaluator(s.params)
    assert bits(s.decrypt(bare.rescale(bare.mul(a, 0.5))), z * 0.5) >= 26  # keyless operations work
    assert bits(s.decrypt(bare.rotate_hoisted(a, [0, s.params.slots])[0]), z) >= 28
    calls = {"mul_relin": lambda: bare.mul_relin(a, a), "rotate": lambda: bare.rotate(a, 1),
             "conjugate": lambda: bare.conjugate(a), "relinearize": lambda: bare.relinearize(bare.tensor(a, a)),
             "rotate_and_sum": lambda: bare.rotate_and_sum(a, 4), "inner_product": lambda: bare.inner_product(a, a, 4)}
    for op, call in calls.items():
        with pytest.raises(MissingKeyError, match=f"^{op}: "):
            call()
    rotations_only = rlwe.EvalKeySet(s.params.params_id, galois=[])
    with pytest.raises(MissingKeyError, match="^mul: .*relinearization"):
        Evaluator(s.params, rotations_only).mul(a, a)
    missing = [r for r in (5, 6, 7) if r not in s.steps]
    with pytest.raises(MissingKeyError, match=rf"^rotate_hoisted: .*steps \[{missing[0]}, {missing[1]}"):
        s.evaluator.rotate_hoisted(a, [1] + missing)
    with pytest.raises(MissingKeyError, match=rf"^rotate: .*\[{missing[0]}\]"):
        s.evaluator.rotate(a, missing[0])


def test_params_level_and_type_errors(s):
    ev, z = s.evaluator, s.message()
    a = s.encrypt(z)
    foreign = a.replace(params_id="another-parameter-set")
    with pytest.raises(ParamsMismatchError, match="^add: "):
        ev.add(a, foreign)
    with pytest.raises(ParamsMismatchError, match="^rescale: "):
        ev.rescale(foreign)
    pt = s.encoder.encode(z)
    with pytest.raises(ParamsMismatchError, match="^mul: "):
        ev.mul(a, ckks.Plaintext(pt.data, pt.level, pt.scale, "another-parameter-set", pt.slots))
    with pytest.raises(LevelMismatchError, match="^rescale: "):
        ev.rescale(s.encrypt(z, level=0))
    with pytest.raises(LevelMismatchError, match="^mul: "):
        ev.mul(s.encrypt(z, level=0), 0.5)
    with pytest.raises(LevelMismatchError, match="^drop_level: "):
        ev.drop_level(s.encrypt(z, level=2), 3)
    with pytest.raises(ParameterError, match="^rotate: "):
        ev.rotate(ev.tensor(a, a), 1)
    with pytest.raises(ParameterError, match="^mul: .*degree"):
        ev.mul(ev.tensor(a, a), a)
    with pytest.raises(LevelMismatchError, match="^inner_product: "):
        ev.inner_product(a, s.encrypt(z, level=0), 4)
    with pytest.raises(ParameterError, match="^add: "):
        ev.add(a, ev.tensor(a, a))
    with pytest.raises(ParameterError, match="^add: "):
        ev.add(a, "1.0")
    with pytest.raises(ParameterError, match="^rotate: "):
        ev.rotate(a, 1.5)
    with pytest.raises(EncodingError, match="^add: "):
        ev.add(a, float("nan"))
    with pytest.raises(ParamsMismatchError, match="^Evaluator: "):
        Evaluator(preset("N10QP241L3D4Insecure", allow_insecure=True), s.keys)


# ---- CPU and CUDA agree bit for bit ---------------------------------------------------------------

@pytest.mark.gpu
def test_cpu_and_cuda_give_identical_ciphertexts():
    seed = bytes(range(32))
    results = []
    for device in ("cpu", "cuda"):
        params = preset(PRESET, allow_insecure=True, device=device)
        ctx = ckks.rlwe_context(params)
        sk = rlwe.gen_secret_key(ctx, seed=seed)
        keys = rlwe.gen_eval_keys(ctx, sk, ckks.galois_elements(params.n, [1, 5], conjugate=True), seed=seed)
        ev, enc = Evaluator(params, keys), Encryptor(params, sk)
        z = np.linspace(-1, 1, params.slots) * (1 + 0.5j)
        a = enc.encrypt(Encoder(params).encode(z), seed=seed)
        b = ev.add(ev.mul(a, 0.25), 1.5)
        out = ev.rescale(ev.mul_relin(ev.rotate(a, 5), ev.conjugate(ev.rescale(b))))
        hoisted = ev.rotate_hoisted(out, [1, 5])
        results.append([t.cpu() for t in (out.data, hoisted[1].data, hoisted[5].data)])
    for cpu, cuda in zip(*results):
        assert torch.equal(cpu, cuda)
