"""RNS-CKKS: approximate arithmetic on vectors of complex numbers.

So far: the :class:`Encoder` (canonical embedding, exact rounding, sparse packing) and
:class:`Plaintext`. Slot j of a plaintext of n slots is m(zeta^(5^j)), zeta = exp(i*pi/N), so the
automorphism X -> X^(5^r mod 2N) rotates the slots left by r and X -> X^(2N-1) conjugates them
(see :mod:`fhe_core.ckks.encoder`).
"""
from fhe_core.ckks.encoder import Encoder, coefficients_to_slots, round_scaled, slots_to_coefficients
from fhe_core.ckks.plaintext import Plaintext

__all__ = ["Encoder", "Plaintext", "coefficients_to_slots", "slots_to_coefficients", "round_scaled"]
