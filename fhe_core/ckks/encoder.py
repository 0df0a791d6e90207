"""CKKS encoding: vectors of complex slots <-> integer polynomials mod (X^N + 1, Q_level).

**Slot order (rlwe rotations depend on it).** With zeta = exp(i*pi/N), a plaintext m(X) of n
slots holds the values z_j = m(zeta^(5^j)) / scale, j = 0..n-1 (the conjugate values sit at
zeta^(-5^j)). Hence

* the automorphism X -> X^(5^r mod 2N) rotates the slots left by r: slot j receives z_(j+r mod n);
* X -> X^(2N-1) (= X^-1) conjugates every slot.

**Sparse packing.** n slots, n a power of two dividing N/2: m(X) = m'(X^g) with g = N/(2n),
m' of degree < 2n; the N/2 full-ring slots repeat the n values (period n), so rotations by r
and conjugation act on the n slots as above. Decoding reads only the coefficients of X^(g*k),
i.e. averages the repeated copies.

**Embedding.** Writing u_k = c_k + i*c_(k+n) for the real coefficients c of m' and
xi = exp(i*pi/(2n)) = zeta^g: since 5^j = 1 (mod 4), xi^(5^j * n) = i and
    z_j = sum_(k<n) u_k xi^(k*5^j) = sum_(k<n) (u_k xi^k) exp(2*pi*i*k*t_j/n),  5^j = 4 t_j + 1 mod 4n,
so the canonical embedding is a twist by xi^k, a length-n DFT (numpy's pocketfft, O(n log n),
error ~1e-16 * log n) and the permutation j -> t_j of the rotation group: the same factorisation
as the "special FFT" of Cheon, Han, Kim, Kim and Song (SAC 2018), computed by a standard FFT.

**Exact rounding.** The float64 coefficients c are scaled and rounded exactly: scale * c is
split without error into p + e (Dekker's product), their integer and fractional parts are taken
exactly, and the result floor(scale * c + 1/2) is returned as signed base-2^52 int64 digits;
residues mod each prime are combined on the device with ``ops.mul_const`` / ``ops.add``. This
is exact for every scale in [1, 2^512] (2^55..2^60 included, where float64 products lose
bits and int64 overflows) and |scale * c| < 2^960; the float64 c themselves carry the
message's ~53-bit precision.

**Exact decoding.** Coefficients are recovered from their residues by Garner's mixed-radix
conversion on the device (exact modular arithmetic; vectorised steps over the coefficients,
stopping once the remaining digits are all 0 or all q_j - 1, i.e. after about
log2|x| / log2 q steps of O(l) limb operations each), renormalised to balanced digits (the centred
lift into (-Q/2, Q/2)), then summed in float64 by Horner's rule. The balanced digits of a small value vanish above its
size, so the float sum loses at most a few ulps (relative 2^-50) whatever Q is (up to ~1800 bits
and beyond), as long as the value itself is below 2^1023.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from fhe_core import ops
from fhe_core.ckks.ciphertext import check_ckks_params
from fhe_core.ckks.plaintext import Plaintext
from fhe_core.errors import EncodingError
from fhe_core.params import Params
from fhe_core.ring import RNSBasis, shoup_constants, words_tensor
from fhe_core.rlwe.checks import mark_canonical

DIGIT_BITS = 52                # rounded coefficients travel as signed base-2^52 int64 digits
MAX_SCALE = 2.0 ** 512         # exact-rounding range of the scale (see module docstring)
MAX_SCALED_VALUE = 2.0 ** 960  # largest |scale * coefficient| (headroom for Dekker's split)
_VELTKAMP = 134217729.0        # 2^27 + 1: splits a float64 into two 26-bit halves


# ---- canonical embedding (float64) --------------------------------------------------------------

def _check_slot_count(n: int) -> None:
    if n < 1 or n & (n - 1):
        raise EncodingError(f"the number of slots must be a power of two, got {n}")


@functools.lru_cache(maxsize=32)
def _rotation_group(n: int) -> np.ndarray:
    """t_j = (5^j mod 4n - 1) / 4 for j < n: a permutation of 0..n-1 (``[n]`` int64)."""
    powers = np.ones(1, dtype=np.int64)
    while powers.size < n:  # doubling: 5^(j + size) = 5^j * 5^size
        powers = np.concatenate([powers, powers * pow(5, powers.size, 4 * n) % (4 * n)])
    return (powers - 1) // 4


@functools.lru_cache(maxsize=32)
def _twist(n: int) -> np.ndarray:
    """xi^k = exp(i*pi*k/(2n)) for k < n (``[n]`` complex128)."""
    return np.exp(1j * np.pi * np.arange(n) / (2 * n))


def slots_to_coefficients(values: np.ndarray) -> np.ndarray:
    """Inverse canonical embedding: n complex slots -> the 2n real coefficients of m'(Y), Y^(2n) = -1.

    values: ``[n]`` complex, n a power of two. Returns ``[2n]`` float64 c with
    m'(xi^(5^j)) = values[j], xi = exp(i*pi/(2n)).
    """
    values = np.asarray(values, dtype=np.complex128)
    n = values.size
    _check_slot_count(n)
    permuted = np.empty(n, dtype=np.complex128)
    permuted[_rotation_group(n)] = values
    u = np.fft.fft(permuted) / n * np.conj(_twist(n))
    return np.concatenate([u.real, u.imag])


def coefficients_to_slots(coefficients: np.ndarray) -> np.ndarray:
    """Canonical embedding: ``[2n]`` real coefficients of m'(Y) -> ``[n]`` complex128 values
    m'(xi^(5^j)), xi = exp(i*pi/(2n)). Inverse of :func:`slots_to_coefficients`."""
    c = np.asarray(coefficients, dtype=np.float64)
    n = c.size // 2
    _check_slot_count(n)
    if c.size != 2 * n:
        raise EncodingError(f"expected 2n coefficients, got {c.size}")
    u = (c[:n] + 1j * c[n:]) * _twist(n)
    return np.fft.ifft(u)[_rotation_group(n)] * n


# ---- exact scaling and rounding -----------------------------------------------------------------

def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Veltkamp: a = hi + lo exactly, each with at most 26 significant bits."""
    t = _VELTKAMP * a
    hi = t - (t - a)
    return hi, a - hi


def _two_product(a: np.ndarray, b: float) -> tuple[np.ndarray, np.ndarray]:
    """Dekker: a * b = p + e exactly, p = fl(a * b) (no overflow or underflow assumed)."""
    p = a * b
    a_hi, a_lo = _split(a)
    b_hi, b_lo = _split(np.float64(b))
    e = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    return p, e


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Knuth: a + b = s + t exactly, s = fl(a + b)."""
    s = a + b
    b_virtual = s - a
    return s, (a - (s - b_virtual)) + (b - b_virtual)


def _digit_count(max_abs: float) -> int:
    """Base-2^52 digits needed for an integer of absolute value ``max_abs``."""
    exponent = int(np.frexp(max_abs)[1])  # max_abs < 2^exponent
    return max(1, -(-exponent // DIGIT_BITS))


def _integer_digits(x: np.ndarray, count: int) -> np.ndarray:
    """Integral float64 values -> ``[count, m]`` int64 digits d with x = sum_k d_k 2^(52k), each
    digit carrying the sign of x and |d_k| < 2^52 (exact: every step is a power-of-two scaling,
    a truncation or an exactly representable difference)."""
    digits = np.empty((count, x.size), dtype=np.int64)
    for k in range(count):
        high = np.trunc(np.ldexp(x, -DIGIT_BITS))
        digits[k] = x - np.ldexp(high, DIGIT_BITS)
        x = high
    return digits


def round_scaled(values: np.ndarray, scale: float) -> np.ndarray:
    """floor(scale * v + 1/2) for every float64 v, exactly, as ``[D, m]`` int64 signed digits.

    The integer is sum_k digits[k] * 2^(52k) with |digits[k]| < 2^53 and D = max(1, ceil(b / 52))
    for the largest |scale * v| < 2^b. Exact for scale in [1, 2^512] and |scale * v| < 2^960 (the
    caller checks): Dekker's split then neither overflows nor loses bits to underflow, except
    for |v| < 2^-900, whose products round to 0 whatever their low parts.
    """
    values = np.asarray(values, dtype=np.float64).ravel()
    p, e = _two_product(values, scale)
    p_int, e_int = np.rint(p), np.rint(e)
    s, t = _two_sum(p - p_int, e - e_int)     # the exact fractional part s + t, in [-1, 1]
    up = (s > 0.5) | ((s == 0.5) & (t >= 0))   # s + t >= 1/2
    down = (s < -0.5) | ((s == -0.5) & (t < 0))  # s + t < -1/2
    largest = float(max(np.abs(p_int).max(initial=0.0), np.abs(e_int).max(initial=0.0)))
    count = _digit_count(largest)
    digits = _integer_digits(p_int, count) + _integer_digits(e_int, count)
    digits[0] += up.astype(np.int64) - down.astype(np.int64)
    return digits


@functools.lru_cache(maxsize=64)
def _digit_weights(primes: tuple[int, ...], count: int, device: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(2^(52k) mod q_i, Shoup companion) per limb for k = 1..count-1."""
    return [shoup_constants([1 << (DIGIT_BITS * k)] * len(primes), primes, device) for k in range(1, count)]


@functools.lru_cache(maxsize=64)
def _prime_column(primes: tuple[int, ...], device: str) -> torch.Tensor:
    """``[l, 1]`` int64: the primes, for broadcasting torch.remainder over limbs."""
    return words_tensor(primes, device).reshape(-1, 1)


def digits_to_residues(digits: torch.Tensor, basis: RNSBasis) -> torch.Tensor:
    """Signed base-2^52 digits ``[D, m]`` int64 (on basis.device) -> residues ``[l, m]`` of
    sum_k digits[k] 2^(52k) mod each prime, canonical in [0, q_i)."""
    column = _prime_column(basis.primes, str(basis.device))
    residues = torch.remainder(digits[0].unsqueeze(0), column)
    for k, (weight, weight_shoup) in enumerate(_digit_weights(basis.primes, digits.shape[0], str(basis.device)),
                                               start=1):
        term = torch.remainder(digits[k].unsqueeze(0), column)
        residues = ops.add(residues, ops.mul_const(term, weight, weight_shoup, basis.moduli), basis.moduli)
    return residues


# ---- exact centred reconstruction (decoding) -----------------------------------------------------

@functools.lru_cache(maxsize=64)
def _garner_constants(primes: tuple[int, ...], device: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """For each i < l-1: (q_i^-1 mod q_j, Shoup companion) for j = i+1..l-1."""
    return [shoup_constants([pow(q, -1, p) for p in primes[i + 1:]], primes[i + 1:], device)
            for i, q in enumerate(primes[:-1])]


def _all_sign_extension(rest: torch.Tensor, primes: torch.Tensor) -> bool:
    """True when every column of ``rest`` [r, m] is all zeros or all q_j - 1 (``primes`` [r, 1])."""
    return bool(((rest == 0).all(dim=0) | (rest == primes - 1).all(dim=0)).all())


def _mixed_radix_digits(residues: torch.Tensor, basis: RNSBasis) -> torch.Tensor:
    """Garner: residues ``[l, m]`` of x in [0, Q) -> digits v ``[l, m]``, v_i in [0, q_i), with
    x = v_0 + q_0 (v_1 + q_1 (v_2 + ...)). Step i replaces the residues of x by those of
    y = (x - v_i) / q_i on the remaining primes.

    Early exit: once, for every coefficient, the remaining residues are all 0 (y = 0) or all
    q_j - 1 (y = prod q_j - 1, whose digits are all q_j - 1), they already are the remaining
    digits. Small centred values (the usual plaintexts) stop after a few of the l - 1 steps;
    the test runs after steps 1, 2, 4, 8, ... so that it costs little when it fails.
    """
    x = residues.clone()
    column = _prime_column(basis.primes, str(basis.device))
    for i, (inverse, inverse_shoup) in enumerate(_garner_constants(basis.primes, str(basis.device))):
        moduli = basis.moduli[i + 1:]
        v_mod_rest = torch.remainder(x[i].unsqueeze(0), column[i + 1:])
        rest = ops.mul_const(ops.sub(x[i + 1:], v_mod_rest, moduli), inverse, inverse_shoup, moduli)
        x[i + 1:] = rest
        if i & (i + 1) == 0 and _all_sign_extension(rest, column[i + 1:]):  # after steps 1, 2, 4, 8, ...
            break
    return x


def _centred_values(residues: torch.Tensor, basis: RNSBasis) -> torch.Tensor:
    """The centred lift of x mod Q (in (-Q/2, Q/2)) as float64 ``[m]``, from residues ``[l, m]``.

    Mixed-radix digits are rebalanced into [-(q_i-1)/2, (q_i-1)/2] (a carry moves up; the carry
    out of the top digit is the subtraction of Q), then Horner's rule sums them from the top.
    """
    digits = _mixed_radix_digits(residues, basis)
    primes = _prime_column(basis.primes, str(basis.device))
    carry = torch.zeros_like(digits[0])
    for i in range(len(basis)):
        d = digits[i] + carry
        carry = (d > primes[i] // 2).to(torch.int64)
        digits[i] = d - carry * primes[i]
    value = digits[-1].to(torch.float64)
    for i in range(len(basis) - 2, -1, -1):
        value = value * float(basis.primes[i]) + digits[i].to(torch.float64)
    return value


# ---- the encoder ---------------------------------------------------------------------------------

class Encoder:
    """Encodes complex (or real) vectors into CKKS plaintexts for one :class:`Params` and decodes
    them back. Stateless apart from cached tables; safe to share between threads."""

    def __init__(self, params: Params):
        self.params = check_ckks_params(params, "Encoder")

    def encode(self, values, *, level: int | None = None, scale: float | None = None,
               slots: int | None = None) -> Plaintext:
        """Encode up to ``slots`` values (zero-padded) at ``level`` and ``scale``.

        values: a 1-D array-like of real or complex numbers, length <= slots.
        level: 0..max_level (default max_level): the plaintext lives mod q_0..q_level.
        scale: in [1, 2^512] (default params.default_scale); coefficients are
            floor(scale * c + 1/2), exactly, for the float64 inverse embedding c of the values.
        slots: a power of two dividing N/2 (default N/2); fewer is sparse packing.
        Returns a Plaintext with data ``[level + 1, N]`` int64, NTT domain, on params.device.
        Raises EncodingError for bad lengths, levels, scales, non-finite values, or values whose
        scaled coefficients do not fit in (-Q_level/2, Q_level/2).
        """
        params = self.params
        level = self._level(level)
        scale = self._scale(scale)
        slots = self._slots(slots)
        z = self._message(values, slots)
        coefficients = slots_to_coefficients(z)
        self._check_range(coefficients, scale, level)
        packed = round_scaled(coefficients, scale)
        digits = np.zeros((packed.shape[0], params.n), dtype=np.int64)
        digits[:, ::params.n // (2 * slots)] = packed
        basis = params.q_basis(level)
        residues = digits_to_residues(torch.from_numpy(digits).to(params.device), basis)
        return mark_canonical(Plaintext(basis.ntt(residues), level, scale, params.params_id, slots))

    def decode(self, plaintext: Plaintext) -> np.ndarray:
        """The ``[plaintext.slots]`` complex128 values a plaintext encodes (coefficients over
        plaintext.scale, centred mod Q_level, through the canonical embedding)."""
        params = self.params
        if plaintext.params_id != params.params_id:
            raise EncodingError("decode: the plaintext was made for other parameters (params_id differs)")
        if plaintext.n != params.n or not 0 <= plaintext.level <= params.max_level:
            raise EncodingError(f"decode: plaintext shape {tuple(plaintext.data.shape)} does not fit {params}")
        if plaintext.data.device != params.device:
            raise EncodingError(f"decode: the plaintext is on {plaintext.data.device}, "
                                f"the parameters on {params.device}")
        basis = params.q_basis(plaintext.level)
        data = plaintext.data
        coefficients = basis.intt(data) if plaintext.is_ntt else data
        gap = params.n // (2 * plaintext.slots)
        values = _centred_values(coefficients[:, ::gap].contiguous(), basis)
        return coefficients_to_slots(values.cpu().numpy() / plaintext.scale)

    # -- argument checks --
    def _level(self, level: int | None) -> int:
        top = self.params.max_level
        if level is None:
            return top
        if isinstance(level, bool) or not isinstance(level, (int, np.integer)) or not 0 <= level <= top:
            raise EncodingError(f"encode: level must be an integer in [0, {top}], got {level!r}")
        return int(level)

    def _scale(self, scale: float | None) -> float:
        if scale is None:
            return self.params.default_scale
        scale = float(scale)
        if not 1.0 <= scale <= MAX_SCALE:  # also refuses nan
            raise EncodingError(f"encode: scale must be in [1, 2^512], got {scale}")
        return scale

    def _slots(self, slots: int | None) -> int:
        full = self.params.slots
        if slots is None:
            return full
        if isinstance(slots, bool) or not isinstance(slots, (int, np.integer)) or slots < 1 \
                or slots & (slots - 1) or slots > full:
            raise EncodingError(f"encode: slots must be a power of two in [1, N/2 = {full}], got {slots!r}")
        return int(slots)

    @staticmethod
    def _message(values, slots: int) -> np.ndarray:
        try:
            z = np.asarray(values, dtype=np.complex128)
        except (TypeError, ValueError) as exc:
            raise EncodingError(f"encode: values must be real or complex numbers ({exc})") from None
        if z.ndim != 1:
            raise EncodingError(f"encode: values must be a 1-D vector, got shape {z.shape}")
        if z.size > slots:
            raise EncodingError(f"encode: {z.size} values do not fit in {slots} slots")
        if not np.isfinite(z).all():
            raise EncodingError("encode: values must be finite (found nan or inf)")
        return np.concatenate([z, np.zeros(slots - z.size, dtype=np.complex128)])

    def _check_range(self, coefficients: np.ndarray, scale: float, level: int) -> None:
        """Refuse messages whose scaled coefficients reach Q_level/2 (they would wrap around)."""
        largest = float(np.abs(coefficients).max()) * scale
        half_q = self.params.q_basis(level).modulus // 2
        # the float product is within a relative 2^-52 of the exact one, rounding adds 1/2
        if not largest < MAX_SCALED_VALUE or int(np.ceil(largest * (1 + 2.0 ** -50))) + 1 >= half_q:
            raise EncodingError(f"encode: scaled coefficients reach 2^{np.log2(largest):.1f}, beyond "
                                f"Q_{level}/2 ~ 2^{half_q.bit_length() - 1} (lower the scale or raise the level)")
