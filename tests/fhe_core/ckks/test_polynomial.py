"""Polynomial evaluation (L2/L3): Chebyshev interpolation against numpy, the baby-step
giant-step evaluation against numpy float64 on fresh random inputs uniform on the interval,
with the precision stated in bits (-log2 of the largest absolute slot error against the
polynomial itself, not against the interpolated function), levels consumed against
:func:`depth` and the :func:`plan` simulation, exact output scales, and typed errors.

Thresholds at scale 2^40 (absolute error against the polynomial itself; in brackets the
minimum measured on CPU over 10 fresh key sets, 8 for the lines marked *, 4 for the sweep):

  N = 2^12, L = 6 (preset N12QP483L6D3Insecure)
    Chebyshev interpolants on [-1, 1], degrees 3, 7, 15        >= 24  [27.0, 26.8, 26.3]
    sigmoid interpolant on [-8, 8], degree 15 (depth 5)        >= 23  [26.0]
    cos on [0, 1], degree 15, level 4 -> 0                     >= 24  [26.7]
    every degree 1..15, both bases, decaying random coeffs     >= 22  [24.5]
    random Chebyshev coefficients on [-2, 2], degree 15 *      >= 19  [21.8]
    random power-basis degree 7 on [-1, 1]                     >= 22  [24.8]
    cubic sigmoid on [-8, 8]                                   >= 19  [21.9]
    cubic sigmoid of a product (scale 2^80 / q_L) *            >= 19  [22.6]
  N = 2^11, L = 8 (a literal)
    Chebyshev on [-1, 1], degrees 31, 63                       >= 22  [25.2, 25.7]
    sigmoid interpolant on [-8, 8], degree 63 (depth 7)        >= 22  [27.3]
"""
import math

import numpy as np
import pytest
from numpy.polynomial import Chebyshev

from fhe_core import ckks, rlwe
from fhe_core.ckks import Decryptor, Encoder, Encryptor, Evaluator
from fhe_core.ckks.polynomial import (Polynomial, PolynomialEvaluator, SimCiphertext, SimEvaluator,
                                      chebyshev_interpolant, chebyshev_nodes, depth, plan, split)
from fhe_core.errors import LevelMismatchError, MissingKeyError, ParameterError
from fhe_core.params import Params, ParamsLiteral, preset
from fhe_reference import DEVICES, fresh_rng

PRESET = "N12QP483L6D3Insecure"  # N = 2^12, L = 6, scale 2^40
DEEP = ParamsLiteral(log_n=11, log_q=[60] + [40] * 8, log_p=[61] * 3, log_default_scale=40)  # L = 8


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


CUBIC_SIGMOID = Polynomial([0.5, -0.0843, 0.0, 0.0002], "power", (-8.0, 8.0))  # the logistic-regression app's


class Setup:
    """Client (encoder, encryptor, decryptor) and server (evaluator with the relinearization key)."""

    def __init__(self, params: Params):
        self.params = params
        self.rng, _ = fresh_rng()
        ctx = ckks.rlwe_context(params)
        sk = rlwe.gen_secret_key(ctx)
        self.encoder, self.encryptor, self.decryptor = Encoder(params), Encryptor(params, sk), Decryptor(params, sk)
        self.evaluator = Evaluator(params, rlwe.gen_eval_keys(ctx, sk, []))
        self.poly = PolynomialEvaluator(self.evaluator)

    def uniform(self, a: float, b: float) -> np.ndarray:
        return self.rng.uniform(a, b, self.params.slots)

    def encrypt(self, x, *, level: int | None = None):
        return self.encryptor.encrypt(self.encoder.encode(x, level=level))

    def decrypt(self, ct) -> np.ndarray:
        return self.encoder.decode(self.decryptor.decrypt(ct))


@pytest.fixture(scope="module", params=DEVICES)
def s(request) -> Setup:
    return Setup(preset(PRESET, allow_insecure=True, device=request.param))


@pytest.fixture(scope="module", params=DEVICES)
def deep(request) -> Setup:
    return Setup(Params.from_literal(DEEP, allow_insecure=True, device=request.param))


def bits(got, expected) -> float:
    return float(-np.log2(np.max(np.abs(np.asarray(got) - np.asarray(expected)))))


# ---- plaintext: polynomials and interpolation -----------------------------------------------------

def test_polynomial_call_matches_numpy():
    rng, _ = fresh_rng()
    c, x = rng.normal(size=8), rng.uniform(-3, 5, 100)
    np.testing.assert_allclose(Polynomial(c, "chebyshev", (-3, 5))(x), Chebyshev(c, domain=[-3, 5])(x), rtol=1e-13)
    np.testing.assert_allclose(Polynomial(c, "power")(x), np.polyval(c[::-1], x), rtol=1e-12)
    assert CUBIC_SIGMOID(4.0) == pytest.approx(0.5 - 0.0843 * 4 + 0.0002 * 64)
    assert Polynomial([1.0, 2.0, 0.0, 0.0]).degree == 1 and Polynomial([0.0]).degree == 0


def test_interpolant_matches_numpy_and_reproduces_polynomials():
    rng, _ = fresh_rng()
    for f in (np.sin, sigmoid):
        p, _ = chebyshev_interpolant(f, -8, 8, 11)
        np.testing.assert_allclose(p.coefficients, Chebyshev.interpolate(f, 11, domain=[-8, 8]).coef, atol=1e-14)
    exact = Chebyshev(rng.normal(size=6), domain=[-2, 3])  # degree 5, interpolated at degree 9
    p, estimate = chebyshev_interpolant(exact, -2, 3, 9)
    np.testing.assert_allclose(p.coefficients[:6], exact.coef, atol=1e-13)
    assert np.max(np.abs(p.coefficients[6:])) < 1e-13 and estimate < 1e-12
    nodes = chebyshev_nodes(-2, 3, 10)
    np.testing.assert_allclose(np.sort(nodes), np.sort(Chebyshev.basis(10, domain=[-2, 3]).roots()), atol=1e-12)


@pytest.mark.parametrize("name, f, degrees", [
    ("sin", np.sin, (3, 7, 15, 23)),
    ("exp", np.exp, (3, 7, 15, 23)),
    ("sigmoid", sigmoid, (3, 7, 15, 31, 63)),
])
def test_interpolation_error_decreases_and_matches_the_estimate(name, f, degrees):
    """On [-8, 8]: the measured max error (fresh uniform points plus a dense grid) decreases with
    the degree and lies between estimate / 4 and the estimate (measured ratios 1.1 to 2.3)."""
    rng, _ = fresh_rng()
    x = np.concatenate([rng.uniform(-8, 8, 20000), np.linspace(-8, 8, 100001)])
    errors = []
    for d in degrees:
        p, estimate = chebyshev_interpolant(f, -8, 8, d)
        assert p.basis == "chebyshev" and p.interval == (-8.0, 8.0) and p.coefficients.shape == (d + 1,)
        err = float(np.max(np.abs(p(x) - f(x))))
        assert estimate / 4 <= err <= estimate, (name, d, err, estimate)
        errors.append(err)
    assert all(later < earlier for earlier, later in zip(errors, errors[1:])), errors


@pytest.mark.parametrize("basis", ["power", "chebyshev"])
def test_split_reconstructs_the_polynomial(basis):
    """p = q * B_G + r, checked by evaluating both sides at random points."""
    rng, _ = fresh_rng()
    x = rng.uniform(-1, 1, 200)
    for d, giant in ((15, 8), (12, 8), (9, 8), (5, 4), (3, 2), (1, 1)):
        p = Polynomial(rng.normal(size=d + 1), basis)
        q, r = split(p, giant)
        b_giant = Polynomial(np.eye(giant + 1)[giant], basis)
        assert q.degree == d - giant and len(r.coefficients) == giant
        np.testing.assert_allclose(q(x) * b_giant(x) + r(x), p(x), atol=1e-12)
    with pytest.raises(ParameterError, match="^split: "):
        split(Polynomial(np.ones(5)), 2)


def test_polynomial_rejects_bad_input():
    with pytest.raises(ParameterError, match="basis"):
        Polynomial([1.0, 2.0], "legendre")
    with pytest.raises(ParameterError, match="interval"):
        Polynomial([1.0, 2.0], "chebyshev", (1.0, -1.0))
    with pytest.raises(ParameterError, match="finite"):
        Polynomial([1.0, np.nan])
    with pytest.raises(ParameterError, match="^chebyshev_interpolant: "):
        chebyshev_interpolant(np.sin, 0, 1, -1)
    with pytest.raises(ParameterError, match="^chebyshev_interpolant: "):
        with np.errstate(invalid="ignore"):
            chebyshev_interpolant(np.log, -1, 1, 4)  # nan at the negative nodes


# ---- depth and the level/scale simulator ----------------------------------------------------------

@pytest.mark.parametrize("degree, interval, basis, expected", [
    (1, (-1, 1), "chebyshev", 1), (3, (-1, 1), "power", 2), (4, (-1, 1), "chebyshev", 3),
    (7, (-1, 1), "chebyshev", 3), (8, (-1, 1), "power", 4), (15, (-1, 1), "chebyshev", 4),
    (63, (-1, 1), "chebyshev", 6), (3, (-8, 8), "power", 2),       # power basis: the interval maps nothing
    (15, (0, 1), "chebyshev", 4), (15, (-0.5, 0.5), "chebyshev", 4),  # alpha = 2 and 2: integer, free
    (15, (-8, 8), "chebyshev", 5), (31, (0, 3), "chebyshev", 6),       # alpha = 1/8, 2/3: one more level
])
def test_depth(degree, interval, basis, expected):
    p = Polynomial(np.arange(1, degree + 2, dtype=float), basis, interval)
    assert depth(p) == expected


def test_plan_consumes_exactly_depth_levels_for_every_degree():
    """The simulator runs the real algorithm: every degree 1..64 in both bases lands at
    level L - depth with the input scale, and nonscalar products stay near 2 sqrt(d) + log2 d."""
    params = Params.from_literal(DEEP, allow_insecure=True)
    rng, _ = fresh_rng()
    for basis, interval in (("chebyshev", (-1, 1)), ("power", (-1, 1)), ("chebyshev", (-8, 8))):
        for d in range(1, 65 if interval == (-1, 1) else 32):
            p = Polynomial(rng.normal(size=d + 1), basis, interval)
            result = plan(params, p)
            assert result.depth == depth(p), (basis, d, result)
            assert result.output_level == params.max_level - depth(p)
            assert abs(result.output_scale / params.default_scale - 1) < 1e-14
            assert result.counts.get("mul_relin", 0) <= 2 * math.sqrt(d + 1) + math.log2(d + 1) + 3, (d, result.counts)


def test_plan_raises_when_levels_run_out_and_sim_checks_scales():
    params = preset(PRESET, allow_insecure=True)
    p = Polynomial(np.ones(16), "chebyshev")
    assert plan(params, p, level=4).output_level == 0
    with pytest.raises(LevelMismatchError, match="^evaluate_polynomial: .*needs 4 levels.*level 3"):
        plan(params, p, level=3)
    sim = SimEvaluator(params)
    a = SimCiphertext(3, 2.0 ** 40)
    with pytest.raises(ckks.ScaleMismatchError, match="^add: "):
        sim.add(a, SimCiphertext(3, 2.0 ** 40 * (1 + 1e-8)))
    with pytest.raises(LevelMismatchError, match="^rescale: "):
        sim.rescale(SimCiphertext(0, 2.0 ** 40))
    assert sim.rescale(sim.mul_relin(a, a)) == SimCiphertext(2, 2.0 ** 80 / params.q_primes[3])


# ---- homomorphic evaluation -----------------------------------------------------------------------

def _check_evaluation(s: Setup, p: Polynomial, need_bits: float, *, level: int | None = None) -> float:
    """Encrypt fresh uniform inputs on p.interval, evaluate, and check level, scale and precision."""
    x = s.uniform(*p.interval)
    ct = s.encrypt(x, level=level)
    expected_plan = plan(s.params, p, ct.level, ct.scale)
    out = s.poly.evaluate(ct, p)
    assert ct.level - out.level == depth(p) == expected_plan.depth
    assert out.scale == pytest.approx(ct.scale, rel=1e-14) and out.scale == pytest.approx(expected_plan.output_scale,
                                                                                          rel=1e-14)
    assert out.degree == 1 and out.slots == ct.slots
    got = bits(s.decrypt(out), p(x))
    assert got >= need_bits, (p.degree, p.interval, got)
    return got


@pytest.mark.parametrize("f, degree", [(np.exp, 3), (lambda x: np.sin(3 * x), 7), (lambda x: np.exp(-4 * x * x), 15)])
def test_evaluate_chebyshev_on_the_unit_interval(s, f, degree):
    p, _ = chebyshev_interpolant(f, -1, 1, degree)
    _check_evaluation(s, p, 24)


def test_evaluate_sigmoid_on_a_wide_interval(s):
    """[-8, 8]: alpha = 1/8 costs one level more than ceil(log2(16)) = 4."""
    p, estimate = chebyshev_interpolant(sigmoid, -8, 8, 15)
    assert depth(p) == 5
    _check_evaluation(s, p, 23)
    x = s.uniform(-8, 8)
    out = s.decrypt(s.poly.evaluate(s.encrypt(x), p)).real
    assert np.max(np.abs(out - sigmoid(x))) <= estimate  # and the function itself within the estimate


def test_evaluate_with_integer_affine_map_and_below_the_top_level(s):
    p, _ = chebyshev_interpolant(np.cos, 0, 1, 15)   # t = 2x - 1: free
    _check_evaluation(s, p, 24, level=4)           # 4 levels exactly: ends at level 0


def test_evaluate_power_basis_and_cubic_sigmoid(s):
    assert _check_evaluation(s, CUBIC_SIGMOID, 19) > 0
    assert depth(CUBIC_SIGMOID) == 2
    rng, _ = fresh_rng()
    _check_evaluation(s, Polynomial(rng.uniform(-1, 1, 8), "power"), 22)  # degree 7: 3 levels


@pytest.mark.parametrize("basis", ["chebyshev", "power"])
def test_evaluate_every_degree_up_to_15(s, basis):
    """Each degree has its own split tree: all of them land at level L - depth, on the input
    scale, with decaying random coefficients (values below ~2)."""
    for d in range(1, 16):
        p = Polynomial(s.rng.normal(size=d + 1) / (1 + np.arange(d + 1)), basis)
        _check_evaluation(s, p, 22)


def test_evaluate_random_chebyshev_coefficients(s):
    """Not an interpolant: random coefficients (values up to ~3) on [-2, 2] (alpha = 1/2: depth 5)."""
    p = Polynomial(s.rng.normal(size=16) / 4, "chebyshev", (-2, 2))
    _check_evaluation(s, p, 19)


def test_cubic_sigmoid_of_a_product_keeps_its_odd_scale(s):
    """The logistic-regression pattern: sigmoid(x * w) right after mul + rescale, whose scale is
    2^80 / q_L, not 2^40; the evaluation lands exactly on that scale two levels lower."""
    ev, x, w = s.evaluator, s.uniform(-1, 1), s.uniform(-8, 8)
    t = ev.rescale(ev.mul_relin(s.encrypt(x), s.encrypt(w)))
    assert t.scale != 2.0 ** 40
    out = s.poly.evaluate(t, CUBIC_SIGMOID)
    assert out.level == t.level - 2 and out.scale == pytest.approx(t.scale, rel=1e-14)
    assert bits(s.decrypt(out), CUBIC_SIGMOID(x * w)) >= 19


def test_evaluate_output_scale(s):
    p = Polynomial([0.25, -1.0, 0.5, 0.125], "chebyshev")
    x = s.uniform(-1, 1)
    out = s.poly.evaluate(s.encrypt(x), p, output_scale=2.0 ** 35)
    assert out.level == s.params.max_level - 2 and out.scale == pytest.approx(2.0 ** 35, rel=1e-14)
    assert bits(s.decrypt(out), p(x)) >= 19


@pytest.mark.parametrize("degree", [31, 63])
def test_evaluate_deep_chebyshev(deep, degree):
    p, _ = chebyshev_interpolant(lambda x: np.sin(10 * x) * np.exp(x), -1, 1, degree)
    _check_evaluation(deep, p, 22)


def test_evaluate_deep_sigmoid(deep):
    p, _ = chebyshev_interpolant(sigmoid, -8, 8, 63)
    assert depth(p) == 7
    _check_evaluation(deep, p, 22)


class CountingEvaluator:
    """Delegates to a real Evaluator and counts the calls the polynomial evaluator makes."""

    def __init__(self, evaluator: Evaluator):
        self.params, self.plan, self._evaluator, self.calls = evaluator.params, evaluator.plan, evaluator, []

    def __getattr__(self, name):
        method = getattr(self._evaluator, name)

        def counted(*args, **kwargs):
            first = args[0][0][0] if isinstance(args[0], list) else args[0]  # linear_combination: the first term's
            self.calls.append((name, first.level))
            return method(*args, **kwargs)
        return counted


def test_real_evaluation_makes_the_planned_calls(s):
    """The plan is the same code path: the real run makes the simulator's ct-ct products and
    rescales, at the same levels. Degree 15: 4 relinearized products for the powers T_2, T_3,
    T_4, T_8 and 4 giant-step products left degree 2, relinearized 3 times (the two products
    summed at one level share one relinearization): 7 key switches instead of 8."""
    p, _ = chebyshev_interpolant(sigmoid, -8, 8, 15)
    counting = CountingEvaluator(s.evaluator)
    PolynomialEvaluator(counting).evaluate(s.encrypt(s.uniform(-8, 8)), p)
    planned = plan(s.params, p)
    calls = [name for name, _ in counting.calls]
    assert calls.count("mul_relin") == planned.counts["mul_relin"] == 4
    assert calls.count("tensor") == planned.counts["tensor"] == 4
    assert calls.count("relinearize") == planned.counts["relinearize"] == 3
    assert calls.count("rescale") == planned.counts["rescale"]
    assert calls.count("add") + calls.count("sub") == planned.counts.get("add", 0) + planned.counts.get("sub", 0)
    assert calls.count("linear_combination") == planned.counts.get("linear_combination", 0)  # (the fused passes)
    assert sorted(level for name, level in counting.calls if name == "rescale")[0] == s.params.max_level - 4


def test_evaluation_errors_name_the_operation(s):
    p = Polynomial(np.ones(8), "chebyshev")
    ct = s.encrypt(s.uniform(-1, 1), level=2)
    with pytest.raises(LevelMismatchError, match="^evaluate_polynomial: .*needs 3 levels.*level 2"):
        s.poly.evaluate(ct, p)
    with pytest.raises(ParameterError, match="^evaluate_polynomial: the polynomial is constant"):
        s.poly.evaluate(ct, Polynomial([3.0, 0.0]))
    with pytest.raises(ParameterError, match="^depth: "):
        depth(Polynomial([3.0]))
    with pytest.raises(ParameterError, match="^evaluate_polynomial: "):
        s.poly.evaluate(ct, np.ones(4))
    with pytest.raises(ParameterError, match="^evaluate_polynomial: output_scale"):
        s.poly.evaluate(ct, Polynomial([0.0, 1.0]), output_scale=0.5)
    no_keys = PolynomialEvaluator(Evaluator(s.params))
    with pytest.raises(MissingKeyError, match="^mul_relin: "):
        no_keys.evaluate(s.encrypt(s.uniform(-1, 1)), p)


@pytest.mark.gpu
def test_cpu_and_cuda_evaluate_to_identical_ciphertexts():
    seed = bytes(range(32))
    p, _ = chebyshev_interpolant(sigmoid, -8, 8, 15)
    results = []
    for device in ("cpu", "cuda"):
        params = preset(PRESET, allow_insecure=True, device=device)
        ctx = ckks.rlwe_context(params)
        sk = rlwe.gen_secret_key(ctx, seed=seed)
        evaluator = PolynomialEvaluator(Evaluator(params, rlwe.gen_eval_keys(ctx, sk, [], seed=seed)))
        x = np.linspace(-8, 8, params.slots)
        ct = Encryptor(params, sk).encrypt(Encoder(params).encode(x), seed=seed)
        results.append(evaluator.evaluate(ct, p).data.cpu())
    assert np.array_equal(results[0].numpy(), results[1].numpy())
