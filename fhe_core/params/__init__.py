"""Parameter sets: unchecked literals -> validated, frozen :class:`Params` with a params_id;
named presets; the 128-bit security table (HE Standard, plus a stricter sparse-secret bound).

Levels: a fresh ciphertext is at level L = ``max_level`` and holds the L + 1 primes q_0..q_L;
each rescaling drops the last prime. Key switching is hybrid (HK20): alpha = len(p_primes)
special primes, dnum = ceil((L + 1) / alpha) digits.

Layer: imports ring (and errors); rlwe, the schemes and serialize take a Params.
"""
from fhe_core.params.literal import ParamsLiteral
from fhe_core.params.params import Params
from fhe_core.params.presets import BFV_PRESETS, PRESETS, content_name, preset, preset_literal
from fhe_core.params.security import (
    HE_STANDARD_TERNARY_128, MIN_SECURE_ETA, SPARSE_EPHEMERAL_128, SPARSE_TERNARY_128, check_encapsulation_security,
    check_security, max_log_qp, meets_128_bits,
)

__all__ = [
    "ParamsLiteral", "Params", "PRESETS", "BFV_PRESETS", "preset", "preset_literal", "content_name",
    "HE_STANDARD_TERNARY_128", "SPARSE_TERNARY_128", "SPARSE_EPHEMERAL_128", "MIN_SECURE_ETA", "check_security",
    "check_encapsulation_security", "max_log_qp", "meets_128_bits",
]
