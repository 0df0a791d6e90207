"""CKKS linear transforms (L3 circuit): encrypt -> LinearTransform.evaluate -> decrypt against
numpy ``M @ z`` on fresh random matrices and vectors; the BSGS plan and its Galois keys; the
hoisted BSGS result against the naive diagonal method; the fused multiply-accumulate
(ops.ks_inner_product) against the mul/mul_add loop, bit for bit; typed errors before any work.

Precision is -log2 of the largest absolute slot error, at scale 2^40 on N = 2^12 (preset
N12QP483L6D3Insecure), with fresh keys and inputs on every run. M and z are uniform in the
unit square, so |M z| reaches ~sqrt(n) (~80 for n = 2048). The error is the baby-step
rotations' key-switching noise (a single rotation at full packing leaves ~2^-22.5, see
test_evaluator) plus the fresh-encryption noise, weighted by the matrix entries and summed over
a row: it grows like sqrt(#terms per row). Sparse packing gains more: decoding n < N/2 slots
reads only 2n of the N noise coefficients. The giant-step key switches act at scale ~2^80 and
the diagonals are rounded at scale q_l ~ 2^40: both negligible.
The choice of n1 shows it: on 16 slots n1 = 1 (15 giant rotations, all at scale 2^80) gives
~32 bits, n1 = 16 (15 hoisted baby rotations at scale 2^40) ~28.
Thresholds (2 to 3 bits under the minimum measured over 10 runs; [min, mean]):
  dense, 2048 slots   >= 16  [18.4, 19.6]      dense, 64 slots   >= 23  [25.4, 26.6]
  dense, 16 slots     >= 25  [27.4, 28.9]      dense, 4 slots    >= 28  [30.8, 32.1]
  banded (5 diagonals) and permutation-like (one entry per row), 2048 slots  >= 19  [21.6, 23.6]
  10 random diagonals, 2048 slots (5 runs): naive method >= 18 [20.9, 22.1], BSGS >= 18
  [22.4, 23.2], their difference >= 18 [20.9, 22.1]. BSGS beats the naive method here: the
  naive one key-switches all 10 rotations at scale 2^40, BSGS only the <= n1 - 1 baby steps.
"""
import dataclasses
import math

import numpy as np
import pytest
import torch

from fhe_core import ckks, rlwe
from fhe_core.ckks import Decryptor, Encoder, Encryptor, Evaluator, LinearTransform, SlotMismatchError
from fhe_core.ckks.lintrans import _fused_multiply_accumulate, _multiply_accumulate, matrix_diagonals
from fhe_core.errors import (
    LevelMismatchError, MissingKeyError, ParameterError, ParamsMismatchError, ResidueError, UnsupportedMethodError,
)
from fhe_core.params import Params, preset, preset_literal
from fhe_core.rlwe import switching
from fhe_reference import DEVICES, fresh_rng, random_residues

PRESET = "N12QP483L6D3Insecure"  # N = 2^12, L = 6, 40-bit scaling primes, scale 2^40, dnum = 3
FULL = 2048                      # N/2: full packing

# minimum bits (absolute error) per slot count for dense random matrices; see the module docstring
PRECISION = {2048: 16, 64: 23, 16: 25, 4: 28}
DICT_PRECISION = 19  # full packing, a few diagonals


class Setup:
    """Client side (encoder, encryptor, decryptor) and a key factory for the server's evaluator."""

    def __init__(self, device: str):
        self.params = params = preset(PRESET, allow_insecure=True, device=device)
        self.rng, _ = fresh_rng()
        self.ctx = ckks.rlwe_context(params)
        self.sk = rlwe.gen_secret_key(self.ctx)
        self.encoder = Encoder(params)
        self.encryptor = Encryptor(params, self.sk)
        self.decryptor = Decryptor(params, self.sk)

    def evaluator(self, galois_elements, cls=Evaluator) -> Evaluator:
        """An evaluator holding exactly the Galois keys of ``galois_elements`` (no relin key)."""
        return cls(self.params, rlwe.gen_eval_keys(self.ctx, self.sk, galois_elements, relin=False))

    def vector(self, n: int) -> np.ndarray:
        return self.rng.uniform(-1, 1, n) + 1j * self.rng.uniform(-1, 1, n)

    def matrix(self, n: int, *, real: bool = False) -> np.ndarray:
        m = self.rng.uniform(-1, 1, (n, n))
        return m if real else m + 1j * self.rng.uniform(-1, 1, (n, n))

    def encrypt(self, z, *, level: int | None = None):
        return self.encryptor.encrypt(self.encoder.encode(z, level=level, slots=len(z)))

    def decrypt(self, ct) -> np.ndarray:
        return self.encoder.decode(self.decryptor.decrypt(ct))


@pytest.fixture(scope="module", params=DEVICES)
def s(request) -> Setup:
    return Setup(request.param)


class RecordingEvaluator(Evaluator):
    """An evaluator that records every rotation step it performs (hoisted or not)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.hoisted_calls: list[list[int]] = []
        self.rotations: list[int] = []

    def rotate_hoisted(self, ct, steps):
        steps = list(steps)
        self.hoisted_calls.append(steps)
        return super().rotate_hoisted(ct, steps)

    def rotate(self, ct, steps):
        self.rotations.append(steps)
        return super().rotate(ct, steps)


def bits(got, expected) -> float:
    return float(-np.log2(np.max(np.abs(np.asarray(got) - np.asarray(expected)))))


def dense_from_diagonals(diagonals: dict[int, np.ndarray], n: int) -> np.ndarray:
    """The numpy reference matrix: M[j, (j + k) mod n] = d_k[j] (independent of the module)."""
    m = np.zeros((n, n), dtype=np.complex128)
    rows = np.arange(n)
    for k, d in diagonals.items():
        m[rows, (rows + k) % n] += d
    return m


def check_apply(s: Setup, transform: LinearTransform, m: np.ndarray, need: float) -> None:
    """Encrypt a fresh z, evaluate with exactly the reported keys, compare with M @ z."""
    n = m.shape[0]
    z = s.vector(n)
    ct = s.encrypt(z)
    out = transform.evaluate(s.evaluator(transform.galois_elements()), ct)
    assert (out.level, out.slots, out.degree) == (ct.level - 1, n, 1)
    assert abs(out.scale / ct.scale - 1) < 1e-15  # default scale q_l: the rescale restores it
    precision = bits(s.decrypt(out), m @ z)
    print(f"slots={n} diagonals={len(transform.diagonals)} n1={transform.baby_step}: {precision:.2f} bits")
    assert precision >= need


# ---- dense matrices -------------------------------------------------------------------------------

@pytest.mark.parametrize("slots", [FULL, 64, 4])
def test_dense_complex_matrix(s, slots):
    m = s.matrix(slots)
    transform = LinearTransform(s.params, m)
    assert len(transform.diagonals) == slots
    check_apply(s, transform, m, PRECISION[slots])


def test_dense_real_matrix_sparse_slots(s):
    m = s.matrix(64, real=True)
    check_apply(s, LinearTransform(s.params, m), m, PRECISION[64])


def test_dense_matrix_with_zero_diagonals_keeps_only_the_others(s):
    """An upper-triangular band: the zero diagonals are dropped, so fewer keys are needed."""
    n = 64
    a = s.matrix(n)
    m = np.triu(a) - np.triu(a, 5)  # nonzero only on diagonals 0..4 (no wrap-around)
    transform = LinearTransform(s.params, m)
    assert sorted(transform.diagonals) == [0, 1, 2, 3, 4]
    check_apply(s, transform, m, PRECISION[64])


# ---- diagonal dictionaries ------------------------------------------------------------------------

def test_banded_matrix_from_diagonals(s):
    """A pentadiagonal (cyclic) band given as {-2..2: d_k}: 5 diagonals instead of N/2."""
    diagonals = {k: s.vector(FULL) for k in (-2, -1, 0, 1, 2)}
    transform = LinearTransform(s.params, diagonals)
    assert sorted(transform.diagonals) == [0, 1, 2, FULL - 2, FULL - 1]
    check_apply(s, transform, dense_from_diagonals(diagonals, FULL), DICT_PRECISION)


def test_permutation_like_matrix_from_diagonals(s):
    """One nonzero per row, on one of 6 random diagonals: a scaled generalized permutation."""
    offsets = [int(k) for k in s.rng.choice(FULL, 6, replace=False)]
    choice = s.rng.integers(0, len(offsets), FULL)
    values = s.vector(FULL)
    diagonals = {k: np.where(choice == i, values, 0) for i, k in enumerate(offsets)}
    transform = LinearTransform(s.params, diagonals)
    m = dense_from_diagonals(diagonals, FULL)
    assert np.count_nonzero(m, axis=1).max() == 1
    check_apply(s, transform, m, DICT_PRECISION)


@pytest.mark.parametrize("baby_step", [1, 4, 16])
def test_any_baby_step_gives_the_product(s, baby_step):
    """n1 = 1 (only giant steps), n1 = sqrt(n), n1 = n (only baby steps) on 16 slots."""
    m = s.matrix(16)
    transform = LinearTransform(s.params, m, baby_step=baby_step)
    assert transform.baby_steps == list(range(baby_step))
    assert transform.giant_steps == list(range(0, 16, baby_step))
    check_apply(s, transform, m, PRECISION[16])


# ---- the plan and its keys ------------------------------------------------------------------------

def test_matrix_diagonals_round_trip(s):
    """Extracting the diagonals of a dense matrix and scattering them back gives the matrix."""
    m = s.matrix(32)
    m[:, 5] = 0                      # a zero column: every diagonal keeps one zero, none vanishes
    m[np.arange(32), (np.arange(32) + 7) % 32] = 0  # diagonal 7 vanishes
    diagonals = matrix_diagonals(m)
    assert sorted(diagonals) == [k for k in range(32) if k != 7]
    np.testing.assert_array_equal(dense_from_diagonals(diagonals, 32), m)


def test_default_plan_for_a_dense_matrix(s):
    """Full slots: n1 = 2^ceil(11/2) = 64 baby steps and 32 giant steps, 63 + 31 keys."""
    transform = LinearTransform(s.params, {k: np.ones(FULL) for k in range(FULL)})
    assert transform.baby_step == 64 and transform.depth == 1
    assert transform.rotation_steps() == list(range(1, 64)) + list(range(64, FULL, 64))
    assert transform.galois_elements() == ckks.galois_elements(s.params.n, transform.rotation_steps())
    assert len(transform.galois_elements()) == 63 + 31


def test_default_plan_follows_the_stride_of_the_diagonals(s):
    """A DFT factor's shape: 63 diagonals k = 32 m (m in -31..31, taken mod n). n1 = 32 * 8:
    baby steps 32 j (j < 8) and giant steps 0, +-256, +-512, +-768, -1024: 7 + 7 keys (n1 = 8 alone would
    make all 62 nonzero diagonals giant steps). The product is still M z."""
    n = FULL
    diagonals = {(32 * m) % n: s.vector(n) for m in range(-31, 32)}
    transform = LinearTransform(s.params, diagonals)
    assert transform.baby_step == 256
    assert transform.baby_steps == [32 * j for j in range(8)]
    assert transform.giant_steps == [0, 256, 512, 768] + [n - 256 * g for g in range(4, 0, -1)]
    assert len(transform.rotation_steps()) == 14
    check_apply(s, transform, dense_from_diagonals(diagonals, n), DICT_PRECISION - 2)


def scattered_transform(s: Setup, n: int = 256) -> tuple[LinearTransform, dict]:
    """12 random diagonals of n slots: n1 = 4 baby steps and most diagonals their own giant step."""
    ks = sorted(int(k) for k in s.rng.choice(n, 12, replace=False))
    diagonals = {k: s.vector(n) for k in ks}
    transform = LinearTransform(s.params, diagonals)
    n1 = transform.baby_step
    assert n1 == 4
    assert transform.baby_steps == sorted({k % n1 for k in ks})
    assert transform.giant_steps == sorted({k - k % n1 for k in ks})
    return transform, diagonals


def test_reported_steps_are_the_steps_used(s):
    """Single hoisting: the evaluator sees one hoisted call with the baby steps, then one rotation
    per nonzero giant step, and nothing else."""
    n = 256
    transform, diagonals = scattered_transform(s, n)
    evaluator = s.evaluator(transform.galois_elements(), RecordingEvaluator)
    z = s.vector(n)
    out = transform.evaluate(evaluator, s.encrypt(z), double_hoisting=False)
    assert evaluator.hoisted_calls == [transform.baby_steps]
    assert evaluator.rotations == [g for g in transform.giant_steps if g]
    used = {r for r in evaluator.hoisted_calls[0] + evaluator.rotations if r}
    assert sorted(used) == transform.rotation_steps()
    assert bits(s.decrypt(out), dense_from_diagonals(diagonals, n) @ z) >= DICT_PRECISION


def test_double_hoisting_counts_its_mod_ups_and_mod_downs(s, monkeypatch):
    """Double hoisting (the default): one ModUp for the baby steps and one per nonzero giant step;
    one one-component ModDown per nonzero giant step and one two-component ModDown at the end;
    one inner product per nonzero baby and giant step, each with the key of its own step; the
    result agrees with M z and with single hoisting to within the noise."""
    n = 256
    transform, diagonals = scattered_transform(s, n)
    evaluator = s.evaluator(transform.galois_elements())
    calls = {"mod_up": 0, "mod_down": [], "keys": []}
    real = {name: getattr(switching, name)
            for name in ("decompose_mod_up", "mod_down", "inner_product", "inner_product_into",
                         "inner_product_babies_into")}

    def mod_up(ctx, d, level, *args):  # (the unchecked step: the public one and the batched giant steps call it)
        calls["mod_up"] += 1
        return real["decompose_mod_up"](ctx, d, level, *args)

    def mod_down(ctx, c, level, *args, **kwargs):
        calls["mod_down"].append(tuple(c.shape[:-2]))
        return real["mod_down"](ctx, c, level, *args, **kwargs)

    def inner_product(ctx, digits, key, level):
        calls["keys"].append(key.galois_element)
        return real["inner_product"](ctx, digits, key, level)

    def inner_product_into(ctx, digits, key, level, out, **fused):  # the fused circuit's giant steps
        calls["keys"].append(key.galois_element)
        return real["inner_product_into"](ctx, digits, key, level, out, **fused)

    def inner_product_babies_into(ctx, digits, keys, *args, **kwargs):  # the fused circuit: the babies at once
        calls["keys"] += [key.galois_element for key in keys]
        return real["inner_product_babies_into"](ctx, digits, keys, *args, **kwargs)

    for name, fn in (("decompose_mod_up", mod_up), ("mod_down", mod_down), ("inner_product", inner_product),
                     ("inner_product_into", inner_product_into),
                     ("inner_product_babies_into", inner_product_babies_into)):
        monkeypatch.setattr(switching, name, fn)
    z = s.vector(n)
    ct = s.encrypt(z)
    out = transform.evaluate(evaluator, ct)
    monkeypatch.undo()
    giants = [g for g in transform.giant_steps if g]
    babies = [j for j in transform.baby_steps if j]
    assert calls["mod_up"] == 1 + len(giants)
    *giant_mod_downs, final = calls["mod_down"]  # one component per nonzero giant step (fused circuit: one batch)
    assert final == (2,) and sum(math.prod(shape) for shape in giant_mod_downs) == len(giants)
    assert calls["keys"] == ckks.galois_elements(s.params.n, babies + giants)
    expected = dense_from_diagonals(diagonals, n) @ z
    got = s.decrypt(out)
    assert bits(got, expected) >= DICT_PRECISION
    assert bits(got, s.decrypt(transform.evaluate(evaluator, ct, double_hoisting=False))) >= DICT_PRECISION


def test_missing_key_raises_before_any_work(s):
    n = 64
    transform = LinearTransform(s.params, s.matrix(n))
    steps = transform.rotation_steps()
    dropped = int(s.rng.choice(steps))
    partial = ckks.galois_elements(s.params.n, [r for r in steps if r != dropped])
    evaluator = s.evaluator(partial, RecordingEvaluator)
    ct = s.encrypt(s.vector(n))
    expected = rf"^LinearTransform.evaluate: missing Galois keys for rotation steps \[{dropped}\]"
    with pytest.raises(MissingKeyError, match=expected):
        transform.evaluate(evaluator, ct)
    assert evaluator.hoisted_calls == [] and evaluator.rotations == []
    with pytest.raises(MissingKeyError, match="^LinearTransform: "):
        transform.check_keys(Evaluator(s.params))
    transform.check_keys(s.evaluator(transform.galois_elements()))  # all present: no error


def test_sparse_slots_accept_keys_of_the_negative_steps(s):
    """On n < N/2 slots a rotation by r equals one by r - n: keys generated for the negative
    steps serve the transform too (as they serve Evaluator.rotate)."""
    n = 16
    m = s.matrix(n)
    transform = LinearTransform(s.params, m)
    negative = [r - n for r in transform.rotation_steps()]
    evaluator = s.evaluator(ckks.galois_elements(s.params.n, negative))
    assert set(evaluator.keys.galois_elements).isdisjoint(transform.galois_elements())
    z = s.vector(n)
    assert bits(s.decrypt(transform.evaluate(evaluator, s.encrypt(z))), m @ z) >= PRECISION[n]


# ---- against the naive diagonal method ------------------------------------------------------------

def test_bsgs_equals_naive_diagonal_method(s):
    """sum_k encode(d_k) * rotate(ct, k), then one rescale (no BSGS, no hoisting), on the same
    ciphertext: both agree with each other and with M @ z to within the noise."""
    n = FULL
    ks = sorted(int(k) for k in s.rng.choice(n, 10, replace=False))
    diagonals = {k: s.vector(n) for k in ks}
    transform = LinearTransform(s.params, diagonals)
    evaluator = s.evaluator(ckks.galois_elements(s.params.n, set(ks + transform.rotation_steps()) - {0}))
    z = s.vector(n)
    ct = s.encrypt(z)
    q_l = float(s.params.q_primes[ct.level])
    naive = None
    for k, d in diagonals.items():
        term = evaluator.mul(evaluator.rotate(ct, k), s.encoder.encode(d, level=ct.level, scale=q_l, slots=n))
        naive = term if naive is None else evaluator.add(naive, term)
    naive = evaluator.rescale(naive)
    bsgs = transform.evaluate(evaluator, ct)
    assert (bsgs.level, bsgs.scale) == (naive.level, naive.scale)
    expected = dense_from_diagonals(diagonals, n) @ z
    got_bsgs, got_naive = s.decrypt(bsgs), s.decrypt(naive)
    assert bits(got_naive, expected) >= 18
    assert bits(got_bsgs, expected) >= 18
    assert bits(got_bsgs, got_naive) >= 18


# ---- the fused multiply-accumulate ----------------------------------------------------------------

@pytest.mark.parametrize("baby_step", [8, 4])
def test_fused_and_unfused_mac_give_the_same_residues(s, baby_step):
    """Single hoisting: ops.ks_inner_product over the stacked baby steps (the fused circuit) and the mul/mul_add
    loop (the reference plan) compute the same sums mod q: identical ciphertexts. Diagonals 0..7 with n1 = 8 use
    consecutive rows of the stack (a view); scattered ones with n1 = 4 need a gathered copy."""
    n = 64
    ks = range(8) if baby_step == 8 else sorted(int(k) for k in s.rng.choice(n, 12, replace=False))
    diagonals = {k: s.vector(n) for k in ks}
    transform = LinearTransform(s.params, diagonals, baby_step=baby_step)
    evaluator = s.evaluator(transform.galois_elements())
    z = s.vector(n)
    ct = s.encrypt(z)
    fused = transform.evaluate(evaluator, ct, rescale=False, double_hoisting=False)
    composed = ckks.Evaluator(evaluator.params, evaluator.keys, plan=evaluator.plan.replace(fused_circuit=False))
    loop = transform.evaluate(composed, ct, rescale=False, double_hoisting=False)
    assert torch.equal(fused.data, loop.data)
    assert bits(s.decrypt(evaluator.rescale(fused)), dense_from_diagonals(diagonals, n) @ z) >= PRECISION[n]


def test_fused_mac_chunks_beyond_63_terms(s):
    """70 terms (more than a 128-bit accumulator holds at once): the fused sum is computed in
    chunks and equals the loop and a Python big-integer reference, on random residues."""
    terms, level = 70, 2
    primes = s.params.q_primes[:level + 1]
    rng = np.random.default_rng(int(s.rng.integers(2 ** 63)))
    shape = (level + 1, s.params.n)
    pts = torch.stack([random_residues(rng, primes, n=s.params.n, device=s.params.device) for _ in range(terms)])
    cts = [random_residues(rng, primes, (2,), n=s.params.n, device=s.params.device) for _ in range(terms)]
    assert pts.shape == (terms, *shape)
    moduli = ckks.rlwe_context(s.params).q_at(level).moduli
    fused = _fused_multiply_accumulate(pts, torch.stack(cts), moduli)
    loop = _multiply_accumulate(pts, cts, moduli)
    assert torch.equal(fused, loop)
    for c, i, x in [(0, 0, 0), (1, level, s.params.n - 1), (1, 1, int(rng.integers(s.params.n)))]:
        expected = sum(int(pts[j, i, x]) * int(cts[j][c, i, x]) for j in range(terms)) % primes[i]
        assert int(fused[c, i, x]) == expected


# ---- levels, scales and the rescale flag ----------------------------------------------------------

def test_fixed_level_unrescaled_and_lower_levels(s):
    """Diagonals pre-encoded at level 3: a ciphertext above is dropped to 3, one below uses the
    first limbs of the diagonals (scale q_3 / q_l then stays in the bookkeeping)."""
    n = 16
    m = s.matrix(n)
    transform = LinearTransform(s.params, m, level=3)
    assert transform.encoded_levels == [3]
    evaluator = s.evaluator(transform.galois_elements())
    q = s.params.q_primes
    z = s.vector(n)
    high = s.encrypt(z)
    raw = transform.evaluate(evaluator, high, rescale=False)
    assert raw.level == 3 and raw.scale == high.scale * q[3]
    assert bits(s.decrypt(raw), m @ z) >= PRECISION[n]
    out = transform.evaluate(evaluator, high)
    assert out.level == 2 and abs(out.scale / high.scale - 1) < 1e-15
    assert bits(s.decrypt(out), m @ z) >= PRECISION[n]
    low = s.encrypt(z, level=2)
    out = transform.evaluate(evaluator, low)
    assert out.level == 1 and abs(out.scale / (low.scale * q[3] / q[2]) - 1) < 1e-15
    assert bits(s.decrypt(out), m @ z) >= PRECISION[n]


def test_lazy_encoding_per_level(s):
    """Without a fixed level the diagonals are encoded at each ciphertext's level (cached), and
    the default scale q_l restores the input scale at every level."""
    n = 16
    m = s.matrix(n)
    transform = LinearTransform(s.params, m)
    evaluator = s.evaluator(transform.galois_elements())
    for level in (6, 4, 6, 1):
        z = s.vector(n)
        ct = s.encrypt(z, level=level)
        out = transform.evaluate(evaluator, ct)
        assert out.level == level - 1 and abs(out.scale / ct.scale - 1) < 1e-15
        assert bits(s.decrypt(out), m @ z) >= PRECISION[n]
    assert transform.encoded_levels == [1, 4, 6]


def test_one_slot_needs_no_key(s):
    """A 1 x 1 matrix is a plaintext multiplication: no rotation, an evaluator without keys."""
    transform = LinearTransform(s.params, [[0.5 - 2j]])
    assert transform.rotation_steps() == [] and transform.galois_elements() == []
    z = s.vector(1)
    out = transform.evaluate(Evaluator(s.params), s.encrypt(z))
    assert bits(s.decrypt(out), (0.5 - 2j) * z) >= PRECISION[4]


def test_explicit_scale(s):
    n = 16
    m = s.matrix(n)
    transform = LinearTransform(s.params, m, scale=2.0 ** 30)
    z = s.vector(n)
    ct = s.encrypt(z)
    out = transform.evaluate(s.evaluator(transform.galois_elements()), ct)
    assert abs(out.scale / (ct.scale * 2.0 ** 30 / s.params.q_primes[ct.level]) - 1) < 1e-15
    assert bits(s.decrypt(out), m @ z) >= 20  # the diagonals' rounding error is now 2^-30


# ---- errors ---------------------------------------------------------------------------------------

def test_construction_errors(s):
    p = s.params
    with pytest.raises(ParameterError, match="square"):
        LinearTransform(p, np.ones((4, 8)))
    with pytest.raises(ParameterError, match="power of two"):
        LinearTransform(p, np.ones((6, 6)))
    with pytest.raises(ParameterError, match="power of two"):
        LinearTransform(p, np.ones((2 * FULL, 2 * FULL)))
    with pytest.raises(ParameterError, match="zero"):
        LinearTransform(p, np.zeros((8, 8)))
    with pytest.raises(ParameterError, match="finite"):
        LinearTransform(p, {0: [1.0, np.nan]})
    with pytest.raises(ParameterError, match="lengths"):
        LinearTransform(p, {0: np.ones(8), 1: np.ones(4)})
    with pytest.raises(ParameterError, match="repeats"):
        LinearTransform(p, {-1: np.ones(8), 7: np.ones(8)})
    with pytest.raises(ParameterError, match="empty"):
        LinearTransform(p, {})
    with pytest.raises(ParameterError, match="baby_step"):
        LinearTransform(p, np.eye(8), baby_step=3)
    with pytest.raises(ParameterError, match="baby_step"):
        LinearTransform(p, np.eye(8), baby_step=16)
    with pytest.raises(LevelMismatchError, match="level 0"):
        LinearTransform(p, np.eye(8), level=0)


def test_evaluation_errors(s):
    transform = LinearTransform(s.params, s.matrix(8))
    evaluator = s.evaluator(transform.galois_elements())
    with pytest.raises(SlotMismatchError, match="^LinearTransform.evaluate: "):
        transform.evaluate(evaluator, s.encrypt(s.vector(16)))
    with pytest.raises(LevelMismatchError, match="^LinearTransform.evaluate: "):
        transform.evaluate(evaluator, s.encrypt(s.vector(8), level=0))
    other = preset("N10QP241L3D4Insecure", allow_insecure=True, device=s.params.device)
    with pytest.raises(ParamsMismatchError, match="^LinearTransform.evaluate: "):
        transform.evaluate(Evaluator(other), s.encrypt(s.vector(8)))


@pytest.mark.parametrize("double_hoisting", [True, False])
def test_a_hand_built_ciphertext_is_checked_before_any_work(s, double_hoisting):
    """Residues outside [0, q_i) are refused with the transform's name on both paths (the
    double-hoisted one hands the data straight to the key-switching pieces, no evaluator call
    checks it), before the result could be marked canonical."""
    transform = LinearTransform(s.params, s.matrix(8))
    evaluator = s.evaluator(transform.galois_elements())
    ct = s.encrypt(s.vector(8))
    data = ct.data.clone()
    data[1, 0, 3] = s.params.q_primes[0]
    with pytest.raises(ResidueError, match=r"^LinearTransform.evaluate: the ciphertext has a residue outside"):
        transform.evaluate(evaluator, dataclasses.replace(ct, data=data), double_hoisting=double_hoisting)


@pytest.mark.gpu
def test_evaluation_is_captured_in_a_cuda_graph():
    """After one eager evaluation (keys looked up, gather indices built), a double-hoisted
    evaluation with scattered diagonals (baby steps gathered from the stack) is captured in a
    CUDA graph; its replay on new data equals the eager result bit for bit."""
    s = Setup("cuda")
    transform, _ = scattered_transform(s)
    evaluator = s.evaluator(transform.galois_elements())
    static = s.encrypt(s.vector(256))
    transform.evaluate(evaluator, static)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = transform.evaluate(evaluator, static)
    fresh = s.encrypt(s.vector(256))
    static.data.copy_(fresh.data)
    graph.replay()
    assert torch.equal(captured.data, transform.evaluate(evaluator, fresh).data)


def test_linear_key_switching_parameters_are_refused_with_a_clear_error():
    """The double-hoisted transforms (and bootstrapping, built on them) share hybrid's ModUp: a LinearTransform of
    linear-key-switching parameters is refused at construction, not half-way through an evaluation."""
    literal = dataclasses.replace(preset_literal("N10QP241L3D4Insecure"), key_switching="linear")
    params = Params.from_literal(literal, allow_insecure=True)
    with pytest.raises(UnsupportedMethodError, match="run on hybrid key switching; these parameters switch keys by "
                                                     "the linear method"):
        LinearTransform(params, np.eye(params.slots // 64))
