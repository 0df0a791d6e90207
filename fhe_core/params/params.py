"""Validated, immutable parameter sets: primes generated from a literal, security checked."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from dataclasses import dataclass

import torch

from fhe_core.errors import ParameterError
from fhe_core.params.literal import ParamsLiteral
from fhe_core.params.security import MIN_SECURE_ETA, check_security, max_log_qp
from fhe_core.ring.basis import MAX_LOG_N, MIN_LOG_N, RNSBasis, resolve_device
from fhe_core.ring.primes import MAX_PRIME_BITS, MIN_PRIME_BITS, generate_primes, is_prime, scaling_primes

MAX_LOG_SCALE = 60      # exact encoding is tested up to 2^60
MAX_ERROR_ETA = 32      # the centered-binomial sampler's limit
MAX_PLAINTEXT_BITS = 60  # BFV's t: below the q primes (at most 61 bits)
MAX_DIGITS = 63         # dnum: the key-switching inner product accumulates dnum 122-bit products in 128 bits
MAX_SPECIAL_PRIMES = 63  # alpha: ModDown's exact P -> Q conversion accumulates alpha + 1 products
_ID_FORMAT = "fhe_core.params/1"
KEY_SWITCHING_METHODS = ("hybrid", "linear")


@dataclass(frozen=True)
class Params:
    """A validated parameter set. Build it with :meth:`from_literal`, never directly.

    Attributes:
        log_n: log2 of the ring degree N.
        log_q, log_p: the literal's prime bit sizes.
        q_primes: q_0..q_L; level l uses q_0..q_l (l + 1 limbs), rescaling drops q_l.
        p_primes: the special primes p_0..p_(alpha-1) of hybrid key switching.
        log_default_scale: log2 of the default scale.
        hamming_weight: 0 (uniform ternary secret) or the fixed number of nonzero coefficients.
        error_eta: centered-binomial error parameter (variance eta/2).
        scheme, plaintext_modulus: "ckks" with 0, or "bfv" with t (prime, t = 1 mod 2N, below
            every q prime); BFV's q primes are the largest of their sizes (no scaling primes) and
            its log_default_scale is 0.
        key_switching: "hybrid" or "linear" (the literal's field; see :class:`ParamsLiteral`).
        params_id: hex SHA-256 of the canonical content (normalised literal and primes); ciphertexts,
            plaintexts and keys carry it. The device is not part of it.
        device: where objects made for these parameters live (tables, plaintexts, ciphertexts).
    """

    log_n: int
    log_q: tuple[int, ...]
    log_p: tuple[int, ...]
    q_primes: tuple[int, ...]
    p_primes: tuple[int, ...]
    log_default_scale: int
    hamming_weight: int
    error_eta: int
    scheme: str
    plaintext_modulus: int
    key_switching: str
    params_id: str
    device: torch.device

    @staticmethod
    def from_literal(literal: ParamsLiteral, *, allow_insecure: bool = False,
                     device: torch.device | str = "cpu") -> Params:
        """Validate ``literal``, generate its primes and check 128-bit security.

        Raises ParameterError for malformed or inconsistent fields, SecurityError (a
        ParameterError) for parameters below 128-bit security (modulus too large for N, or
        errors narrower than the HE Standard's) unless ``allow_insecure``, and DeviceError for
        a device that is malformed or not present.
        The same literal always gives the same primes and params_id.
        """
        if not isinstance(literal, ParamsLiteral):
            raise ParameterError(f"expected a ParamsLiteral, got {type(literal).__name__}")
        normal = _normalise(literal)
        device = resolve_device(device, "Params.from_literal")
        if not allow_insecure:  # refuse before generating primes when even the smallest outcome is insecure
            sizes = normal.log_q + normal.log_p  # every b-bit prime exceeds 2^(b-1)
            bound = max_log_qp(normal.log_n, normal.hamming_weight)
            if bound is None or sum(sizes) - len(sizes) > bound or normal.error_eta < MIN_SECURE_ETA:
                check_security(normal.log_n, float(sum(sizes)), normal.hamming_weight,  # raises (nominal size)
                               normal.error_eta)
        params = _from_canonical(normal.to_json(), str(device))
        if not allow_insecure:
            check_security(params.log_n, params.log_qp, params.hamming_weight, params.error_eta)
        return params

    def with_device(self, device: torch.device | str) -> Params:
        """The same parameters (same params_id) for objects on another device."""
        return dataclasses.replace(self, device=resolve_device(device, "Params.with_device"))

    @property
    def literal(self) -> ParamsLiteral:
        """The normalised literal (dnum filled in) that reproduces these parameters."""
        return ParamsLiteral(log_n=self.log_n, log_q=list(self.log_q), log_p=list(self.log_p),
                             log_default_scale=self.log_default_scale, hamming_weight=self.hamming_weight,
                             error_eta=self.error_eta, dnum=self.dnum, scheme=self.scheme,
                             plaintext_modulus=self.plaintext_modulus, key_switching=self.key_switching)

    @property
    def n(self) -> int:
        """The ring degree N."""
        return 1 << self.log_n

    @property
    def slots(self) -> int:
        """N/2: the number of complex slots of a fully packed CKKS plaintext."""
        return self.n // 2

    @property
    def max_level(self) -> int:
        """L = len(q_primes) - 1: the level of a fresh ciphertext."""
        return len(self.q_primes) - 1

    @property
    def alpha(self) -> int:
        """Primes per key-switching digit, = the number of special primes (HK20)."""
        return len(self.p_primes)

    @property
    def dnum(self) -> int:
        """Number of key-switching digits at the top level: ceil((L + 1) / alpha)."""
        return -(-len(self.q_primes) // self.alpha)

    @property
    def default_scale(self) -> float:
        """2^log_default_scale."""
        return float(2 ** self.log_default_scale)

    @property
    def log_qp(self) -> float:
        """log2 of Q * P, the modulus the security bound applies to."""
        return sum(math.log2(q) for q in (*self.q_primes, *self.p_primes))

    def q_basis(self, level: int | None = None) -> RNSBasis:
        """The RNS basis q_0..q_level on this device (default: the top level); its tables are
        views of the full chain's, built once."""
        level = self.max_level if level is None else level
        if not 0 <= level <= self.max_level:
            raise ParameterError(f"level must be in [0, {self.max_level}], got {level}")
        return RNSBasis.get(self.q_primes, self.n, self.device).prefix(level + 1)

    def p_basis(self) -> RNSBasis:
        """The RNS basis of the special primes on this device."""
        return RNSBasis.get(self.p_primes, self.n, self.device)

    def __repr__(self) -> str:
        message = f"t={self.plaintext_modulus}" if self.scheme == "bfv" else f"scale=2^{self.log_default_scale}"
        return (f"Params({self.scheme}, N=2^{self.log_n}, L={self.max_level}, log_q={list(self.log_q)}, "
                f"log_p={list(self.log_p)}, dnum={self.dnum}, logQP={self.log_qp:.1f}, "
                f"h={self.hamming_weight}, {message}, {self.key_switching}, id={self.params_id[:12]}, "
                f"device={self.device})")


# ---- validation ---------------------------------------------------------------------------------

def _int_field(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterError(f"{name} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise ParameterError(f"{name} must be in [{low}, {high}], got {value}")
    return value


def _sizes_field(name: str, value: object, low: int, high: int) -> list[int]:
    if not isinstance(value, (list, tuple)) or not value:
        raise ParameterError(f"{name} must be a non-empty list of bit sizes, got {value!r}")
    return [_int_field(f"{name}[{i}]", v, low, high) for i, v in enumerate(value)]


def _plaintext_modulus(scheme: str, t: object, log_n: int, log_q: list[int]) -> int:
    """CKKS: t = 0. BFV: t prime with t = 1 (mod 2N) (batching: Z_t[X]/(X^N + 1) splits into N
    slots) and fewer bits than every q prime (a plaintext coefficient is its own residue mod q_i)."""
    if scheme == "ckks":
        if t != 0:
            raise ParameterError(f"CKKS takes no plaintext_modulus, got {t!r}")
        return 0
    n = 1 << log_n
    t = _int_field("plaintext_modulus", t, 2, (1 << MAX_PLAINTEXT_BITS) - 1)
    if not is_prime(t) or t % (2 * n) != 1:
        raise ParameterError(f"BFV batching needs a prime plaintext_modulus t = 1 mod 2N (N={n}), got {t}")
    if t.bit_length() >= min(log_q):
        raise ParameterError(f"plaintext_modulus t ({t.bit_length()} bits) must be smaller than every q prime "
                             f"(smallest {min(log_q)} bits)")
    return t


def _normalise(lit: ParamsLiteral) -> ParamsLiteral:
    """A checked copy of ``lit`` with plain-int fields and dnum filled in."""
    if lit.scheme not in ("ckks", "bfv"):
        raise ParameterError(f"scheme {lit.scheme!r} is unknown; expected 'ckks' or 'bfv'")
    log_n = _int_field("log_n", lit.log_n, MIN_LOG_N, MAX_LOG_N)
    log_q = _sizes_field("log_q", lit.log_q, MIN_PRIME_BITS, MAX_PRIME_BITS)
    log_p = _sizes_field("log_p", lit.log_p, MIN_PRIME_BITS, MAX_PRIME_BITS)
    t = _plaintext_modulus(lit.scheme, lit.plaintext_modulus, log_n, log_q)
    if lit.scheme == "bfv":  # BFV has no scale: the field must be 0
        scale = _int_field("log_default_scale", lit.log_default_scale, 0, 0)
    else:
        scale = _int_field("log_default_scale", lit.log_default_scale, 1, MAX_LOG_SCALE)
    if scale >= sum(log_q):
        raise ParameterError(f"log_default_scale {scale} leaves no room in log2(Q) = {sum(log_q)}")
    weight = _int_field("hamming_weight", lit.hamming_weight, 0, 1 << log_n)
    eta = _int_field("error_eta", lit.error_eta, 1, MAX_ERROR_ETA)
    if len(log_p) > MAX_SPECIAL_PRIMES:
        raise ParameterError(f"log_p has {len(log_p)} special primes; at most {MAX_SPECIAL_PRIMES} are supported")
    dnum = -(-len(log_q) // len(log_p))
    if dnum > MAX_DIGITS:
        raise ParameterError(f"{len(log_q)} q-primes in digits of alpha = {len(log_p)} make dnum = {dnum} digits; at "
                             f"most {MAX_DIGITS} are supported (add special primes or use fewer, larger q-primes)")
    if lit.key_switching not in KEY_SWITCHING_METHODS:
        raise ParameterError(f"key_switching {lit.key_switching!r} is unknown; expected one of {KEY_SWITCHING_METHODS}")
    if lit.dnum is not None and _int_field("dnum", lit.dnum, 1, len(log_q)) != dnum:
        raise ParameterError(f"dnum={lit.dnum} does not match {len(log_q)} q-primes in digits of "
                             f"alpha = len(log_p) = {len(log_p)} primes (dnum = {dnum}); "
                             f"use len(log_p) = ceil({len(log_q)} / {lit.dnum})")
    return ParamsLiteral(log_n=log_n, log_q=log_q, log_p=log_p, log_default_scale=scale,
                         hamming_weight=weight, error_eta=eta, dnum=dnum, scheme=lit.scheme,
                         plaintext_modulus=t, key_switching=lit.key_switching)


@functools.lru_cache(maxsize=64)
def _from_canonical(literal_json: str, device: str) -> Params:
    """Primes and params_id of a normalised literal (cached: prime generation is the slow part)."""
    lit = ParamsLiteral.from_json(literal_json)
    n = 1 << lit.log_n
    if lit.scheme == "bfv":  # no scaling: the largest primes of each size, as SEAL's CoeffModulus::Create
        q_primes = generate_primes(lit.log_q, n)
    else:
        first = generate_primes(lit.log_q[:1], n)
        q_primes = first + scaling_primes(lit.log_q[1:], n, exclude=first)
    p_primes = generate_primes(lit.log_p, n, exclude=q_primes)
    content = {"format": _ID_FORMAT, "literal": lit.to_dict(), "q_primes": q_primes, "p_primes": p_primes}
    digest = hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return Params(log_n=lit.log_n, log_q=tuple(lit.log_q), log_p=tuple(lit.log_p), q_primes=tuple(q_primes),
                  p_primes=tuple(p_primes), log_default_scale=lit.log_default_scale,
                  hamming_weight=lit.hamming_weight, error_eta=lit.error_eta, scheme=lit.scheme,
                  plaintext_modulus=lit.plaintext_modulus, key_switching=lit.key_switching,
                  params_id=digest, device=torch.device(device))
