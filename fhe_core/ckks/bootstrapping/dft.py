"""The CKKS special DFT factored into sparse radix-2 stages (plaintext side of CoeffsToSlots and
SlotsToCoeffs).

**The map.** For n slots (a power of two, n <= N/2; n < N/2 is sparse packing) the encoder
computes z = E u with u_k = c_k + i c_(k+n) (the 2n real coefficients c of m'(Y), Y = X^(N/(2n)))
and

    E[j, k] = xi^(k * 5^j mod 4n),   xi = exp(i*pi/(2n)),   j, k < n

(see :mod:`fhe_core.ckks.encoder`). E^H E = n I, so E^-1 = E^H / n.

* **SlotsToCoeffs** ("forward", StC) applies E: slot values u -> the message slots z.
* **CoeffsToSlots** ("inverse", CtS) applies E^-1: the slots z of a (mod-raised) plaintext ->
  its coefficients u, one complex slot per pair (c_k, c_(k+n)).

**Radix-2 factorisation** (the "special FFT" of HEAAN, Cheon, Han, Kim, Kim and Song, SAC 2018;
split into homomorphic levels by Chen, Chillotti and Song, Eurocrypt 2019, and Han and Ki,
CT-RSA 2020; the derivation below is ours). Split
U(x) = sum_k u_k x^k as U_e(x^2) + x U_o(x^2). The points w_j = xi^(5^j) satisfy
w_(j + n/2) = -w_j (5^(n/2) = 1 + 2n mod 4n) and w_j^2 are the points of the half-size problem,
so with the input in bit-reversed order, log2(n) butterfly stages of block length
len = 2, 4, ..., n (half block h = len/2) give E u:

    out[p]     = v[p] + w^(len)_(p mod len) * v[p + h]        (p mod len <  h)
    out[p]     = v[p - h] - w^(len)_(p - h mod len) * v[p]    (p mod len >= h)
    w^(len)_t  = exp(2*pi*i * (5^t mod 4 len) / (4 len))

    E u = B_n ... B_4 B_2 BitRev(u),      BitRev(E^-1 z) = B_2^-1 B_4^-1 ... B_n^-1 z,

B_len^-1 being out[p] = (v[p] + v[p+h]) / 2 on first halves and
conj(w_t) (v[p-h] - v[p]) / 2 on second halves. The bit reversal is *not* applied: CtS leaves
the coefficients in bit-reversed slot order, EvalMod works slot by slot, and StC takes that
order back, so the two permutations cancel in bootstrapping (Lattigo's ``BitReversed``).

**Diagonal form.** A factor is a dict {k: d_k} of ``[n]`` complex128 diagonals with
(M v)[j] = sum_k d_k[j] * v[(j + k) mod n], i.e. M v = sum_k d_k * rotate(v, k) with the
evaluator's left rotation (slot j receives slot j + k), k normalised to [0, n). Every stage has
at most 3 nonzero diagonals, k in {0, h, n - h} (2 for h = n/2). :func:`merge` multiplies
consecutive stages into ``levels`` factors: fewer levels (each factor costs one rescale when
applied homomorphically) for more diagonals (rotations); merging m stages of half-blocks
h, 2h, ..., 2^(m-1) h gives up to 2^(m+1) - 1 diagonals.

**Homomorphic evaluation** (not here): each factor is one BSGS diagonal linear transform with
hoisted rotations, ``fhe_core.ckks.lintrans.LinearTransform`` (being written separately),
consuming one level each; its diagonals are encoded at the scale of the prime that the following
rescale divides by. :meth:`DFTFactors.rotation_steps` lists the rotation keys the factors need.
The ``scaling`` argument multiplies the whole transform by a constant (spread evenly over the
factors): CtS absorbs there the factor g of :func:`~fhe_core.ckks.bootstrapping.sub_sum` and the
2 of the real/imaginary split (scaling = 1/(2g); the raised ciphertext itself is simply declared
at scale q_0 so that its slots read (Delta c + q_0 I) / q_0, EvalMod's input). The test
``tests/fhe_core/ckks/bootstrapping/test_boot_pieces_compose.py`` chains every piece, in both
orders, with a plain diagonal-by-diagonal loop standing in for the linear transform.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from fhe_core.errors import ParameterError

Diagonals = dict[int, np.ndarray]  # {rotation k in [0, n): diagonal [n] complex128}
ZERO_TOLERANCE = 1e-15             # a diagonal whose entries are all below this (absolute) is dropped


def _check_slots(n: int, op: str) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2 or n & (n - 1):
        raise ParameterError(f"{op}: the slot count must be a power of two >= 2, got {n!r}")
    return int(n)


def bit_reverse_permutation(n: int) -> np.ndarray:
    """``[n]`` int64 r with r[i] = i with its log2(n) bits reversed (an involution)."""
    bits = n.bit_length() - 1
    r = np.zeros(n, dtype=np.int64)
    for b in range(bits):
        r |= ((np.arange(n) >> b) & 1) << (bits - 1 - b)
    return r


@functools.lru_cache(maxsize=64)
def _twiddles(length: int) -> np.ndarray:
    """w_t = exp(2 pi i (5^t mod 4 length) / (4 length)) for t < length/2 (``[length/2]``)."""
    m = 4 * length
    powers = np.array([pow(5, t, m) for t in range(length // 2)], dtype=np.float64)
    return np.exp(2j * np.pi * powers / m)


def butterfly_stage(n: int, length: int, *, inverse: bool = False) -> Diagonals:
    """B_length (or B_length^-1) on n slots as at most 3 diagonals {0, h, n - h}, h = length/2."""
    n = _check_slots(n, "butterfly_stage")
    if length < 2 or length > n or length & (length - 1):
        raise ParameterError(f"butterfly_stage: length must be a power of two in [2, {n}], got {length}")
    h = length // 2
    p = np.arange(n)
    first = (p % length) < h
    w = _twiddles(length)[np.where(first, p % length, (p - h) % length)]
    zero = np.zeros(n, dtype=np.complex128)
    if not inverse:
        d0 = np.where(first, 1.0 + 0j, -w)
        up = np.where(first, w, zero)          # v[p + h] on first halves
        down = np.where(first, zero, 1.0 + 0j)  # v[p - h] on second halves
    else:
        d0 = np.where(first, 0.5 + 0j, -0.5 * np.conj(w))
        up = np.where(first, 0.5 + 0j, zero)
        down = np.where(first, zero, 0.5 * np.conj(w))
    out: Diagonals = {0: d0}
    for k, d in ((h % n, up), ((n - h) % n, down)):
        out[k] = out[k] + d if k in out else d
    return {k: d for k, d in out.items() if np.abs(d).max() > ZERO_TOLERANCE}


def multiply(a: Diagonals, b: Diagonals, n: int) -> Diagonals:
    """The diagonals of the product A B (B applied first): (AB)_k = sum_(x+y=k) a_x * rot(b_y, x)."""
    out: Diagonals = {}
    for x, ax in a.items():
        for y, by in b.items():
            k = (x + y) % n
            term = ax * np.roll(by, -x)
            out[k] = out[k] + term if k in out else term
    return {k: d for k, d in sorted(out.items()) if np.abs(d).max() > ZERO_TOLERANCE}


def apply(diagonals: Diagonals, v: np.ndarray) -> np.ndarray:
    """M v = sum_k d_k * rotate(v, k) in numpy (the plaintext reference of a linear transform)."""
    v = np.asarray(v, dtype=np.complex128)
    return sum(d * np.roll(v, -k) for k, d in diagonals.items())


def to_dense(diagonals: Diagonals, n: int) -> np.ndarray:
    """The ``[n, n]`` matrix: M[j, (j + k) mod n] = d_k[j]."""
    m = np.zeros((n, n), dtype=np.complex128)
    j = np.arange(n)
    for k, d in diagonals.items():
        m[j, (j + k) % n] += d
    return m


@dataclass(frozen=True, eq=False)
class DFTFactors:
    """A DFT factored into consecutive diagonal matrices, in the order they are applied.

    Attributes:
        slots: n.
        inverse: True for CoeffsToSlots (E^-1), False for SlotsToCoeffs (E).
        factors: the matrices, ``factors[0]`` applied first; product = the transform with the
            bit-reversed slot order described in the module docstring, times ``scaling``.
        stages_per_factor: how many radix-2 stages each factor merges (sums to log2 n).
        scaling: the constant the whole transform is multiplied by.
    """

    slots: int
    inverse: bool
    factors: tuple[Diagonals, ...]
    stages_per_factor: tuple[int, ...]
    scaling: complex = 1.0

    @property
    def depth(self) -> int:
        """Levels consumed when evaluated homomorphically: one per factor."""
        return len(self.factors)

    def rotations(self) -> list[list[int]]:
        """The nonzero rotation steps (in [1, n)) each factor needs, factor by factor."""
        return [sorted(k for k in f if k) for f in self.factors]

    def rotation_steps(self) -> list[int]:
        """Every nonzero rotation step of every factor (the Galois keys of the whole transform,
        before any BSGS split; a BSGS evaluation needs its baby and giant steps instead)."""
        return sorted({k for f in self.factors for k in f if k})

    def galois_elements(self, ring_degree: int) -> list[int]:
        """The Galois elements 5^k mod 2N of :meth:`rotation_steps` in a ring of degree N =
        ``ring_degree`` (rotations of an n-slot ciphertext; any k' = k mod n would do as well)."""
        if ring_degree < 2 * self.slots:
            raise ParameterError(f"galois_elements: {self.slots} slots do not fit a ring of degree {ring_degree}")
        return [pow(5, k, 2 * ring_degree) for k in self.rotation_steps()]

    def __call__(self, v: np.ndarray) -> np.ndarray:
        """Apply the factors in order to a ``[n]`` vector (numpy reference)."""
        for f in self.factors:
            v = apply(f, v)
        return v

    def dense(self) -> np.ndarray:
        """The ``[n, n]`` product matrix."""
        out = np.eye(self.slots, dtype=np.complex128)
        for f in self.factors:
            out = to_dense(f, self.slots) @ out
        return out


def stages(n: int, *, inverse: bool = False) -> list[Diagonals]:
    """The log2(n) radix-2 stages in application order: B_2, ..., B_n (forward) or
    B_n^-1, ..., B_2^-1 (inverse); each has at most 3 nonzero diagonals."""
    n = _check_slots(n, "stages")
    lengths = [1 << i for i in range(1, n.bit_length())]
    if inverse:
        return [butterfly_stage(n, length, inverse=True) for length in reversed(lengths)]
    return [butterfly_stage(n, length) for length in lengths]


def _group_sizes(count: int, levels: int) -> list[int]:
    """``count`` stages in ``levels`` consecutive groups, sizes differing by at most one, the
    larger groups first."""
    base, extra = divmod(count, levels)
    return [base + (i < extra) for i in range(levels)]


def merge(factors: list[Diagonals], levels: int, n: int) -> tuple[list[Diagonals], list[int]]:
    """Multiply consecutive factors (application order) into ``levels`` groups; returns the merged
    factors and the number of input factors in each."""
    if isinstance(levels, bool) or not isinstance(levels, int) or not 1 <= levels <= len(factors):
        raise ParameterError(f"merge: levels must be an int in [1, {len(factors)}], got {levels!r}")
    merged, start = [], 0
    sizes = _group_sizes(len(factors), levels)
    for size in sizes:
        product = factors[start]
        for f in factors[start + 1:start + size]:
            product = multiply(f, product, n)  # f applied after the product so far
        merged.append(product)
        start += size
    return merged, sizes


def _spread(factors: list[Diagonals], scaling: complex) -> list[Diagonals]:
    """Multiply each factor by scaling^(1/levels) (the real root for a positive real scaling, the
    principal root otherwise), so that the product gains ``scaling``."""
    if scaling == 1:
        return factors
    if scaling.imag == 0 and scaling.real > 0:
        root: complex = scaling.real ** (1.0 / len(factors))
    else:
        root = scaling ** (1.0 / len(factors))
    return [{k: d * root for k, d in f.items()} for f in factors]


def _factors(n: int, levels: int | None, scaling: complex, inverse: bool) -> DFTFactors:
    n = _check_slots(n, "coeffs_to_slots_factors" if inverse else "slots_to_coeffs_factors")
    raw = stages(n, inverse=inverse)
    levels = len(raw) if levels is None else levels
    scaling = complex(scaling)
    if not (math.isfinite(scaling.real) and math.isfinite(scaling.imag)) or scaling == 0:
        raise ParameterError(f"DFT factors: scaling must be a finite nonzero number, got {scaling}")
    merged, sizes = merge(raw, levels, n)
    return DFTFactors(n, inverse, tuple(_spread(merged, scaling)), tuple(sizes), scaling)


def coeffs_to_slots_factors(n: int, levels: int | None = None, *, scaling: complex = 1.0) -> DFTFactors:
    """CoeffsToSlots on n slots in ``levels`` factors (default log2 n, one stage each):
    their product maps the slots z to scaling * BitRev(E^-1 z)."""
    return _factors(n, levels, scaling, inverse=True)


def slots_to_coeffs_factors(n: int, levels: int | None = None, *, scaling: complex = 1.0) -> DFTFactors:
    """SlotsToCoeffs on n slots in ``levels`` factors (default log2 n): their product maps
    BitRev(u) to scaling * E u."""
    return _factors(n, levels, scaling, inverse=False)


def pack_real_imaginary(diagonals: Diagonals, n: int) -> Diagonals:
    """The last CoeffsToSlots factor M on 2n slots, for sparse packing (2n <= N/2): on the
    n-periodic 2n-slot view [v, v] of an n-slot ciphertext it returns [M v, -i M v], whose sum
    with its conjugate is [2 Re(M v), 2 Im(M v)]: the real and imaginary parts side by side in
    one ciphertext, so that EvalMod runs once (the 2 is the one CoeffsToSlots' scaling absorbs).
    Same diagonal indices k < n, vectors of length 2n: [d_k, -i d_k]."""
    return {k: np.concatenate([d, -1j * d]) for k, d in diagonals.items()}


def unpack_real_imaginary(diagonals: Diagonals, n: int) -> Diagonals:
    """The first SlotsToCoeffs factor M on 2n slots, taking the packed real parts [a, b] (the
    output of EvalMod after :func:`pack_real_imaginary`) to the n-periodic [M u, M u],
    u = a + i b: the 2n x 2n matrix [[M, i M], [M, i M]]. Each diagonal k of M gives two, k and
    k + n, with d_k's entries times 1 or i as slot j + k falls in the first or second half."""
    out: Diagonals = {}
    j = np.arange(2 * n)
    for k, d in diagonals.items():
        tiled = np.concatenate([d, d])
        in_first_half = (j + k) % (2 * n) < n
        out[k] = tiled * np.where(in_first_half, 1.0, 1j)
        out[k + n] = tiled * np.where(in_first_half, 1j, 1.0)
    return dict(sorted(out.items()))


def special_dft_matrix(n: int) -> np.ndarray:
    """The dense ``[n, n]`` E[j, k] = xi^(k 5^j mod 4n), straight from its definition (reference)."""
    n = _check_slots(n, "special_dft_matrix")
    exponents = np.array([[(k * pow(5, j, 4 * n)) % (4 * n) for k in range(n)] for j in range(n)])
    return np.exp(2j * np.pi * exponents / (4 * n))


__all__ = ["Diagonals", "DFTFactors", "bit_reverse_permutation", "butterfly_stage", "stages", "multiply", "merge",
           "apply", "to_dense", "coeffs_to_slots_factors", "slots_to_coeffs_factors", "special_dft_matrix",
           "pack_real_imaginary", "unpack_real_imaginary"]
