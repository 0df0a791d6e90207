"""128-bit security bounds on log2(QP) and the check every parameter set passes.

Dense (uniform ternary) secrets: the Homomorphic Encryption Standard (Albrecht et al.,
"Homomorphic Encryption Security Standard", HomomorphicEncryption.org, 2018, Table 1,
uniform ternary secret, error sigma ~3.2, 128-bit classical) gives the largest log2(QP) for
N = 2^10..2^15. For N = 2^16 and 2^17 we use 1772 and 3544: the standard's 2^15 bound doubled
with N (log2 QP grows about linearly in N at fixed security), the values docs/ARCHITECTURE.md adopts.

Sparse secrets (exactly h nonzero coefficients) are easier to attack (hybrid and sparse-secret
attacks), so they get their own, stricter table, and only where a published analysis exists:
h >= 192 with log2(QP) <= 1546 at N = 2^16 and <= 768 at N = 2^15, the 128-bit bootstrapping
sets N16QP1546H192H32 and N15QP768H192H32 of Bossuat, Troncoso-Pastoriza and Hubaux,
"Bootstrapping for Approximate Homomorphic Encryption with Negligible Failure-Probability by
Using Sparse-Secret Encapsulation" (ACNS 2022, eprint 2022/024), shipped as Lattigo v6's
circuits/ckks/bootstrapping/default_parameters.go. Any fixed Hamming weight counts as sparse
here (conservative even for h = N/2); every other sparse setting is refused.

Sparse-secret encapsulation (bootstrapping with a dense main secret) adds a second check: the ephemeral
sparse secret s' is exposed only by the dense -> sparse key, at the small modulus q_0 p_0 (one q prime,
one special prime). Its bound is that of the same paper's sets (their "H32": an ephemeral weight of 32
with Lattigo's key at q_0 p_0, 60 + 61 bits, at N = 2^16): h' >= 32 and log2(q_0 p_0) <= 121. The main
secret and every other key are checked at the full QP as before (the sparse -> dense key is an RLWE sample
under the main secret at QP_L, like every key).

The bounds assume the HE Standard's error width, sigma = 8/sqrt(2 pi) ~ 3.19. Our errors are
centered binomial with parameter eta (variance eta/2), so sigma = sqrt(eta/2) reaches 3.19 from
eta = 21 on (sigma ~ 3.24, the default); narrower errors (eta <= 20) make the attacks easier
and get no 128-bit claim: they are refused unless allowed explicitly.

The bounds are integers rounded from estimates, so log2(QP) is compared after rounding to
1/100 bit: a chain of primes alternating around 2^40 sums to a hair above its nominal size
(Lattigo's N16QP1546 set measures 1546.0001 with our primes) and must not be refused for that.
"""
from __future__ import annotations

import math

from fhe_core.errors import SecurityError

# log_n -> largest log2(QP) for 128-bit security with a uniform ternary secret.
HE_STANDARD_TERNARY_128: dict[int, int] = {
    10: 27, 11: 54, 12: 109, 13: 218, 14: 438, 15: 881, 16: 1772, 17: 3544,
}

# the smallest centered-binomial eta whose sigma = sqrt(eta/2) reaches the HE Standard's 8/sqrt(2 pi)
HE_STANDARD_SIGMA = 8 / math.sqrt(2 * math.pi)
MIN_SECURE_ETA = math.ceil(2 * HE_STANDARD_SIGMA ** 2)  # 21

# log_n -> (smallest Hamming weight, largest log2(QP)) for 128-bit security with a sparse secret.
SPARSE_TERNARY_128: dict[int, tuple[int, int]] = {
    15: (192, 768),
    16: (192, 1546),
}


# log_n -> (smallest ephemeral Hamming weight, largest log2(q_0 p_0)) for sparse-secret encapsulation.
SPARSE_EPHEMERAL_128: dict[int, tuple[int, int]] = {
    16: (32, 121),
}


def check_encapsulation_security(log_n: int, log_small_modulus: float, ephemeral_weight: int) -> None:
    """Raise SecurityError unless an ephemeral secret of Hamming weight ``ephemeral_weight`` exposed at the
    modulus 2^log_small_modulus (q_0 p_0) reaches 128 bits by SPARSE_EPHEMERAL_128."""
    min_weight, bound = SPARSE_EPHEMERAL_128.get(log_n, (None, None))
    if min_weight is None:
        raise SecurityError(f"no 128-bit bound is known for an ephemeral sparse secret at N=2^{log_n}; pass "
                            "allow_insecure=True to use it anyway (tests only)")
    if ephemeral_weight < min_weight:
        raise SecurityError(f"ephemeral_weight {ephemeral_weight} is below the {min_weight} the 128-bit bound at "
                            f"N=2^{log_n} assumes")
    if round(log_small_modulus, 2) > bound:
        raise SecurityError(f"log2(q_0 p_0) = {log_small_modulus:.2f} exceeds the 128-bit bound {bound} for an "
                            f"ephemeral secret of weight {ephemeral_weight} at N=2^{log_n}")


def max_log_qp(log_n: int, hamming_weight: int) -> int | None:
    """The largest log2(QP) with 128-bit security for this ring and secret, or None if no
    bound is known (the parameters are then refused unless allowed explicitly).

    hamming_weight: 0 for a uniform ternary secret, h > 0 for exactly h nonzero coefficients.
    """
    if hamming_weight == 0:
        return HE_STANDARD_TERNARY_128.get(log_n)
    min_weight, bound = SPARSE_TERNARY_128.get(log_n, (None, None))
    if min_weight is None or hamming_weight < min_weight:
        return None
    return bound


def meets_128_bits(log_n: int, log_qp: float, hamming_weight: int, error_eta: int = MIN_SECURE_ETA) -> bool:
    """Whether (N = 2^log_n, log2(QP), secret, error width) reaches 128-bit security by the
    tables above; :func:`check_security` says why not."""
    bound = max_log_qp(log_n, hamming_weight)
    return bound is not None and round(log_qp, 2) <= bound and error_eta >= MIN_SECURE_ETA


def check_security(log_n: int, log_qp: float, hamming_weight: int, error_eta: int = MIN_SECURE_ETA) -> None:
    """Raise SecurityError unless (N = 2^log_n, log2(QP), secret, errors of centered-binomial
    parameter ``error_eta``) reaches 128-bit security."""
    bound = max_log_qp(log_n, hamming_weight)
    secret = "uniform ternary secret" if hamming_weight == 0 else f"sparse secret (h={hamming_weight})"
    if error_eta < MIN_SECURE_ETA:
        sigma = math.sqrt(error_eta / 2)
        raise SecurityError(f"error_eta = {error_eta} gives errors of sigma = {sigma:.2f}, below the HE "
                            f"Standard's {HE_STANDARD_SIGMA:.2f} that the 128-bit bounds assume; use error_eta >= "
                            f"{MIN_SECURE_ETA}, or pass allow_insecure=True to use it anyway (tests only)")
    if bound is None:
        raise SecurityError(f"no 128-bit security bound is known for N=2^{log_n} with a {secret}; "
                            "pass allow_insecure=True to use it anyway (tests only)")
    if round(log_qp, 2) > bound:
        raise SecurityError(f"log2(QP) = {log_qp:.2f} exceeds the 128-bit bound {bound} for N=2^{log_n} "
                            f"with a {secret}; pass allow_insecure=True to use it anyway (tests only)")
