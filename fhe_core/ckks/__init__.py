"""RNS-CKKS: approximate arithmetic on vectors of complex numbers.

The :class:`Encoder` (canonical embedding, exact rounding, sparse packing) and :class:`Plaintext`;
the :class:`Ciphertext` (an RLWE ciphertext with its scale and slot count), the
:class:`Encryptor` / :class:`Decryptor` pair (client side), and the :class:`Evaluator` (add, sub,
negate, multiply with relinearization, rescale, level drop, rotations, conjugation, hoisted
rotations, rotate-and-sum, inner products; evaluation keys only). Slot j of a plaintext of n
slots is m(zeta^(5^j)), zeta = exp(i*pi/N), so the automorphism X -> X^(5^r mod 2N) rotates the
slots left by r and X -> X^(2N-1) conjugates them (see :mod:`fhe_core.ckks.encoder`).

Layer: imports rlwe, params, ring and ops, never bfv; serialize reads its plaintexts and
ciphertexts.
"""
from fhe_core.ckks.ciphertext import (
    Ciphertext,
    Decryptor,
    Encryptor,
    ScaleMismatchError,
    SlotMismatchError,
    rlwe_context,
)
from fhe_core.ckks.encoder import Encoder, coefficients_to_slots, round_scaled, slots_to_coefficients
from fhe_core.ckks.evaluator import Evaluator, galois_elements
from fhe_core.ckks.lintrans import LinearTransform
from fhe_core.ckks.plaintext import Plaintext
from fhe_core.ckks.polynomial import Polynomial, PolynomialEvaluator, SimEvaluator, chebyshev_interpolant, depth, plan  # noqa: F401

__all__ = ["Encoder", "Plaintext", "coefficients_to_slots", "slots_to_coefficients", "round_scaled",
           "Ciphertext", "Encryptor", "Decryptor", "ScaleMismatchError", "SlotMismatchError", "rlwe_context",
           "Evaluator", "galois_elements"]
__all__ += ["LinearTransform"]
