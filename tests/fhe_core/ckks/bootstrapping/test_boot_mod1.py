"""EvalMod (L3): the scaled cosine with double angles.

Plaintext (numpy): the depth formula, the implemented map (``reference``: polynomial, double
angles, factor R / 2pi) against the ideal (R / 2pi) sin(2 pi y) on a dense grid of [-K, K]
within the stated approximation bound, and against m for y = m / R + I.

Homomorphic (secret-key reference, N = 2^11, h = 32, R = q_0 / Delta = 2^15, full 1024 real
slots, m uniform in [-1, 1], I uniform integers in [-K+1, K-1]); precision = -log2 of the
largest absolute slot error against m (in brackets: measured on CPU over 9 runs, the minimum
of the max / the minimum of the mean):

  45-bit chain, input scale 2^45, K = 16, degree 31, r = 4 (depth 10)   max >= 11.5 [13.7],  mean >= 17 [18.9]
  55-bit chain, input scale 2^55, K = 8,  degree 31, r = 3 (depth 9)    max >= 23   [25.6],  mean >= 27 [28.8]

The 45-bit chain is noise-limited: the polynomial's output carries ~2^-33 of CKKS noise at
scale ~2^46, which the double angles (4^r) and the factor R / 2pi (2^12.35) amplify by ~2^20;
the 55-bit chain is limited by sin(x) ~ x (relative (2 pi m / R)^2 / 6 = 2^-27.3 at |m| = 1).
Levels consumed equal ``EvalModParameters.depth`` and the SimEvaluator plan; the output scale
is the requested one to 1e-9.
"""
import math

import numpy as np
import pytest

from fhe_core.ckks import ScaleMismatchError
from fhe_core.ckks.bootstrapping import EvalModEvaluator, EvalModParameters
from fhe_core.ckks.polynomial import SimCiphertext, SimEvaluator
from fhe_core.errors import LevelMismatchError, ParameterError
from fhe_core.params import ParamsLiteral

from boot_common import SecretKeySetup


def chain(bits: int) -> ParamsLiteral:
    """N = 2^11, L = 11 levels of ``bits`` above a 60-bit q_0, scale 2^45, h = 32."""
    return ParamsLiteral(log_n=11, log_q=[60] + [bits] * 11, log_p=[61] * 3, log_default_scale=45, hamming_weight=32)


@pytest.mark.parametrize("k, degree, r, expected", [(16, 31, 4, 10), (8, 31, 3, 9), (16, 63, 3, 10), (1, 15, 2, 6),
                                                    (4, 7, 0, 4)])
def test_depth(k, degree, r, expected):
    p = EvalModParameters(k=k, degree=degree, double_angles=r)
    assert p.depth == expected == math.ceil(math.log2(degree + 1)) + (k != 1) + r


@pytest.mark.parametrize("k, degree, r", [(16, 31, 4), (8, 31, 3), (12, 47, 3)])
def test_reference_approximates_the_sine_and_the_message(k, degree, r):
    p = EvalModParameters(k=k, degree=degree, double_angles=r)
    y = np.linspace(-k, k, 200001)
    assert np.abs(p.reference(y) - p.target(y)).max() <= p.approximation_error <= 2.0 ** -20
    rng = np.random.default_rng()
    m = rng.uniform(-1, 1, 4096)
    y = m / p.message_ratio + rng.integers(-k + 1, k, m.size)
    cubic = (2 * np.pi / p.message_ratio) ** 2 / 6  # sin x = x (1 - x^2/6 + ...)
    assert np.abs(p.reference(y) - m).max() <= cubic + p.approximation_error


def test_parameters_are_checked():
    for bad in (dict(k=0.5), dict(degree=0), dict(double_angles=-1), dict(message_ratio=1.0), dict(input_scale=0.5)):
        with pytest.raises(ParameterError, match="^EvalModParameters: "):
            EvalModParameters(**bad)


CASES = {  # chain bits, input scale, (K, degree, r), required max bits, required mean bits
    "45-bit": (45, 2.0 ** 45, (16, 31, 4), 11.5, 17),
    "55-bit": (55, 2.0 ** 55, (8, 31, 3), 23, 27),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    bits, scale, (k, degree, r), need_max, need_mean = CASES[request.param]
    setup = SecretKeySetup(chain(bits), relin=True)
    p = EvalModParameters(k=k, degree=degree, double_angles=r, input_scale=scale, output_scale=2.0 ** 45)
    return setup, p, need_max, need_mean


def test_eval_mod_removes_the_integer_part(case):
    s, p, need_max, need_mean = case
    n, k = s.params.slots, int(p.k)
    m = s.rng.uniform(-1, 1, n)
    y = m / p.message_ratio + s.rng.integers(-k + 1, k, n)
    ct = s.encrypt(y, scale=p.input_scale)
    out = EvalModEvaluator(s.evaluator, p).evaluate(ct)
    assert ct.level - out.level == p.depth
    assert abs(out.scale - p.output_scale) <= 1e-9 * p.output_scale
    sim = EvalModEvaluator(SimEvaluator(s.params), p).evaluate(SimCiphertext(ct.level, ct.scale))
    assert (sim.level, sim.scale) == (out.level, out.scale)
    got = s.decrypt(out)
    error = np.abs(got - m)
    print(f"K={p.k} degree={p.degree} r={p.double_angles} scale 2^{math.log2(p.input_scale):.0f}: "
          f"max {-np.log2(error.max()):.2f} bits, mean {-np.log2(error.mean()):.2f} bits, "
          f"vs reference {-np.log2(np.abs(got - p.reference(y)).max()):.2f} bits")
    assert -np.log2(error.max()) >= need_max
    assert -np.log2(error.mean()) >= need_mean


def test_eval_mod_checks_level_and_scale(case):
    s, p, _, _ = case
    ev = EvalModEvaluator(s.evaluator, p)
    with pytest.raises(LevelMismatchError, match="^eval_mod: "):
        ev.evaluate(s.encrypt([0.5], level=p.depth - 1, scale=p.input_scale))
    with pytest.raises(ScaleMismatchError, match="^eval_mod: "):
        ev.evaluate(s.encrypt([0.5], scale=p.input_scale * 2))
