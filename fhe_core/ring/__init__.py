"""The ring layer: NTT-friendly primes, RNS bases with their device tables, basis conversion.

Layer: imports ops (and errors); params and everything above build on it.
"""
from fhe_core.ring.basis import (
    BasisConverter,
    RNSBasis,
    modulus_table,
    resolve_device,
    shoup_constants,
    words_tensor,
)
from fhe_core.ring.primes import generate_primes, is_prime, ntt_primes, primitive_root_2n, scaling_primes

__all__ = [
    "BasisConverter", "RNSBasis", "modulus_table", "resolve_device", "shoup_constants", "words_tensor",
    "generate_primes", "is_prime", "ntt_primes", "primitive_root_2n", "scaling_primes",
]
