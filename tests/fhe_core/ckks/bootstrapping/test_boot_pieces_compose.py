"""The pieces compose into a bootstrap (L3, CPU, tiny insecure ring): ModRaise -> SubSum ->
CoeffsToSlots -> real/imaginary split -> EvalMod (x2) -> recombine -> SlotsToCoeffs, with the
DFT factors applied by a test-only diagonal-by-diagonal loop (hoisted rotations, one plaintext
product per diagonal, one rescale per factor; the library's BSGS ``LinearTransform`` replaces it
in the real Bootstrapper). Secret-key reference: the output decodes to the input message.

Chain (N = 2^10, h = 32): q_0 60 bits, one 45-bit level left after bootstrapping, the StC
levels at 45 bits, EvalMod's 10 levels (K = 16, degree 31, r = 4) and the CtS levels at
60 bits (EvalMod runs at scale q_0 ~ 2^60; see test_boot_mod1 for why 45 bits is not enough).
Scales: the raised ciphertext is declared at scale q_0 (free), so its slots hold
g (c / R + I) (R = q_0 / Delta); CtS, scaled by 1 / (2 g), leaves (c / R + I) / 2 in the
slots at scale q_0, the split gives Re and Im, EvalMod returns c at scale Delta.

Precision (-log2 of the largest absolute slot error against the message, real and imaginary
parts uniform in [-1, 1], or in [-8, 8] for the integer-part case;
in brackets the minimum of the max and the mean of the mean measured on CPU over 5-8 runs):
  8 slots,  1 + 1 DFT levels    max >= 23   [26.7 / 28.3]   (mean >= 25)
  64 slots, 2 + 2 DFT levels    max >= 21.5 [24.4 / 26.9]   (mean >= 24)
  512 slots (full), 3 + 3       max >= 19   [21.9 / 25.4]   (mean >= 22.5)
  64 slots, [-8, 8], 2 + 2      max >= 20   [22.9 / 24.3]   (mean >= 21.5; absolute error)
  slim order, 64 slots, 2 + 2   max >= 24   [27.0 / 28.3]   (mean >= 26; StC on the fresh input)
"""

import numpy as np
import pytest

from fhe_core import ckks
from fhe_core.ckks.bootstrapping import (EvalModEvaluator, EvalModParameters, coeffs_to_slots_factors, mod_raise,
                                         slots_to_coeffs_factors, sub_sum, sub_sum_galois_elements)
from fhe_core.params import ParamsLiteral

from boot_common import SecretKeySetup

LOG_N = 10


def apply_diagonals(s: SecretKeySetup, ct, diagonals):
    """sum_k d_k * rotate(ct, k), diagonals encoded at the scale q_l of the rescale: one level,
    scale unchanged. The plain loop the BSGS linear transform optimises."""
    ev, q = s.evaluator, float(s.params.q_primes[ct.level])
    rotated = ev.rotate_hoisted(ct, list(diagonals))
    acc = None
    for k, d in diagonals.items():
        term = ev.mul(rotated[k], s.encoder.encode(d, slots=ct.slots, level=ct.level, scale=q))
        acc = term if acc is None else ev.add(acc, term)
    return ev.rescale(acc)


def refresh(s: SecretKeySetup, ct, cts, mod: EvalModParameters):
    """ModRaise -> SubSum -> CoeffsToSlots -> Re/Im split -> EvalMod x 2 -> recombine: a level-0
    ciphertext whose coefficients pack u = c_k + i c_(k+n) (at scale Delta) -> a ciphertext at
    level L - depth(CtS) - depth(EvalMod) whose slots hold BitRev(u) (at scale Delta)."""
    params, ev = s.params, s.evaluator
    q0 = params.q_primes[0]
    y = sub_sum(ev, mod_raise(params, ct)).replace(scale=float(q0))  # slots: g E (c / R + I)
    for factor in cts.factors:
        y = apply_diagonals(s, y, factor)                   # slots: BitRev(c / R + I) / 2 (complex-packed)
    conj = ev.conjugate(y)
    real, imag = ev.add(y, conj), ev.mul(ev.sub(y, conj), -1j)  # Gaussian-integer constant: no level
    evalmod = EvalModEvaluator(ev, mod)
    return ev.add(evalmod.evaluate(real), ev.mul(evalmod.evaluate(imag), 1j))


def setup(slots: int, dft_levels: int, log_q: list[int]):
    n = 1 << LOG_N
    cts = coeffs_to_slots_factors(slots, dft_levels, scaling=1 / (2 * (n // (2 * slots))))
    stc = slots_to_coeffs_factors(slots, dft_levels)
    literal = ParamsLiteral(log_n=LOG_N, log_q=log_q, log_p=[61] * 4, log_default_scale=45, hamming_weight=32)
    steps = sorted(set(cts.rotation_steps()) | set(stc.rotation_steps()))
    s = SecretKeySetup(literal, sub_sum_galois_elements(n, slots) + ckks.galois_elements(n, steps, conjugate=True),
                       relin=True)
    q0, delta = s.params.q_primes[0], s.params.default_scale
    mod = EvalModParameters(k=16, degree=31, double_angles=4, message_ratio=q0 / delta, input_scale=float(q0),
                            output_scale=delta)
    return s, cts, stc, mod


@pytest.mark.parametrize("slots, dft_levels, amplitude, need_max, need_mean",
                         [(8, 1, 1, 23, 25), (64, 2, 1, 21.5, 24), (512, 3, 1, 19, 22.5), (64, 2, 8, 20, 21.5)])
def test_pieces_bootstrap_a_ciphertext(slots, dft_levels, amplitude, need_max, need_mean):
    s, cts, stc, mod = setup(slots, dft_levels, [60, 45] + [45] * dft_levels + [60] * (10 + dft_levels))
    params, ev, delta = s.params, s.evaluator, s.params.default_scale
    assert params.max_level == cts.depth + mod.depth + stc.depth + 1

    z = amplitude * (s.rng.uniform(-1, 1, slots) + 1j * s.rng.uniform(-1, 1, slots))
    u = refresh(s, s.encrypt(z, level=0, slots=slots), cts, mod)   # slots: BitRev(coefficients of z)
    for factor in stc.factors:
        u = apply_diagonals(s, u, factor)

    assert (u.level, u.slots) == (1, slots) and abs(u.scale - delta) <= 1e-9 * delta
    error = np.abs(s.decrypt(u) - z)
    print(f"{slots} slots, {dft_levels}+{dft_levels} DFT levels, |z| <= {amplitude}: "
          f"max {-np.log2(error.max()):.2f} bits, mean {-np.log2(error.mean()):.2f} bits")
    assert -np.log2(error.max()) >= need_max and -np.log2(error.mean()) >= need_mean
    # the refreshed ciphertext still multiplies
    square = ev.rescale(ev.mul_relin(u, u))
    assert np.abs(s.decrypt(square) - z * z).max() < amplitude ** 2 * 2.0 ** (-need_max + 3)


@pytest.mark.parametrize("slots, dft_levels, need_max, need_mean", [(64, 2, 24, 26)])
def test_pieces_bootstrap_in_the_slim_order(slots, dft_levels, need_max, need_mean):
    """SlotsToCoeffs first, at the bottom of the chain (it moves BitRev(z) into the coefficients),
    then ModRaise -> SubSum -> CoeffsToSlots -> EvalMod, whose output holds z in the slots: the
    bit reversals cancel in this order too, and the output level is above the StC levels."""
    s, cts, stc, mod = setup(slots, dft_levels, [60] + [45] * (dft_levels + 1) + [60] * (10 + dft_levels))
    delta = s.params.default_scale
    z = s.rng.uniform(-1, 1, slots) + 1j * s.rng.uniform(-1, 1, slots)
    ct = s.encrypt(z, level=dft_levels, slots=slots)
    for factor in stc.factors:
        ct = apply_diagonals(s, ct, factor)
    assert ct.level == 0
    out = refresh(s, ct, cts, mod)
    assert (out.level, out.slots) == (dft_levels + 1, slots) and abs(out.scale - delta) <= 1e-9 * delta
    error = np.abs(s.decrypt(out) - z)
    print(f"slim, {slots} slots, {dft_levels}+{dft_levels} DFT levels: max {-np.log2(error.max()):.2f} bits, "
          f"mean {-np.log2(error.mean()):.2f} bits")
    assert -np.log2(error.max()) >= need_max and -np.log2(error.mean()) >= need_mean
