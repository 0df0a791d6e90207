"""BFV batch encoding: N integers mod t <-> a plaintext polynomial m(X) in Z_t[X]/(X^N + 1).

Since t is prime and t = 1 (mod 2N), X^N + 1 splits mod t into N linear factors X - psi^e
(psi a primitive 2N-th root of unity mod t, e odd), and m(X) <-> (m(psi^e))_e is a ring
isomorphism (CRT): slot-wise addition and multiplication of the values are polynomial addition
and negacyclic multiplication of the plaintexts.

**Matrix view (as SEAL's BatchEncoder).** The N values form a 2 x N/2 matrix
    row 0, column j:  m(psi^(5^j mod 2N))
    row 1, column j:  m(psi^(-5^j mod 2N))
flattened row-major (input index i = r N/2 + j). The Galois element 5^r rotates both rows left by
r (column j receives column j + r), and 2N - 1 (X -> X^-1) swaps the rows.

**Permutation.** The transform is one NTT mod t with the ops' tables (``RNSBasis.get([t], N)``):
NTT slot k holds m(psi^(2 brv(k) + 1)), brv the log2(N)-bit reversal, psi the root of
``ring.primitive_root_2n(t, N)``. Matrix entry i = (r, j) with exponent e_i therefore sits at NTT
slot ``slot_index[i] = brv((e_i - 1) / 2)``: encoding scatters the values to those slots and runs
the inverse NTT; decoding runs the forward NTT and gathers them.

**Signed values.** A value v may be given in [-(t-1)/2, t-1] (it is taken mod t); decoding
returns [0, t) or, with ``signed=True``, the centred representatives in [-(t-1)/2, (t-1)/2].
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from fhe_core.bfv.context import BFVContext
from fhe_core.errors import EncodingError
from fhe_core.rlwe.checks import mark_canonical


@dataclass(frozen=True, eq=False)
class Plaintext:
    """A BFV plaintext m(X) in Z_t[X]/(X^N + 1).

    Attributes:
        data: ``[N]`` int64 coefficients in [0, t), coefficient domain, on the context's device.
        params_id: the parameter set it was made for.
    """

    data: torch.Tensor
    params_id: str

    def __post_init__(self) -> None:
        if not isinstance(self.data, torch.Tensor) or self.data.dtype != torch.int64 or self.data.dim() != 1:
            raise EncodingError(f"Plaintext: data must be a [N] int64 tensor, got {getattr(self.data, 'shape', None)}")

    @property
    def n(self) -> int:
        return self.data.shape[0]


def _bit_reverse(values: np.ndarray, bits: int) -> np.ndarray:
    out = np.zeros_like(values)
    for b in range(bits):
        out |= ((values >> b) & 1) << (bits - 1 - b)
    return out


@functools.lru_cache(maxsize=16)
def slot_permutation(n: int) -> np.ndarray:
    """``[N]`` int64: NTT slot of matrix entry i = r N/2 + j (see the module docstring)."""
    half, two_n = n // 2, 2 * n
    powers = np.empty(half, dtype=np.int64)
    power = 1
    for j in range(half):
        powers[j] = power
        power = power * 5 % two_n
    exponents = np.concatenate([powers, two_n - powers])
    return _bit_reverse((exponents - 1) // 2, n.bit_length() - 1)


class BatchEncoder:
    """Encodes N integers mod t (a 2 x N/2 matrix) into :class:`Plaintext` and back. Stateless
    apart from cached tables."""

    def __init__(self, ctx: BFVContext):
        self.ctx = BFVContext.check(ctx, "BatchEncoder")
        self.slot_count = ctx.n
        self._index = torch.from_numpy(slot_permutation(ctx.n)).to(ctx.device)

    def encode(self, values) -> Plaintext:
        """values: integers, 1-D of length <= N (zero-padded; row-major matrix order) or a
        ``[2, N/2]`` matrix; each in [-(t-1)/2, t-1]. Returns a Plaintext (coefficients mod t)."""
        v = self._values(values)
        slots = torch.zeros(self.ctx.n, dtype=torch.int64, device=self.ctx.device)
        slots[self._index] = torch.from_numpy(v).to(self.ctx.device)
        coefficients = self.ctx.t_basis.intt(slots.unsqueeze(0))
        return mark_canonical(Plaintext(coefficients[0], self.ctx.params_id))

    def encode_many(self, values: np.ndarray) -> torch.Tensor:
        """Many slot vectors at once: ``[M, N]`` integers in [0, t) (row-major matrix order) ->
        ``[M, N]`` int64 plaintext coefficients mod t on the device (one batched transform; for
        :func:`fhe_core.bfv.encryption.lifted_many`). No range check: callers reduce mod t."""
        v = torch.as_tensor(np.asarray(values, dtype=np.int64), device=self.ctx.device)
        if v.dim() != 2 or v.shape[1] != self.ctx.n:
            raise EncodingError(f"encode_many: expected [M, {self.ctx.n}] slot values, got {list(v.shape)}")
        slots = torch.zeros_like(v)
        slots[:, self._index] = v
        return self.ctx.t_basis.intt(slots.unsqueeze(1))[:, 0]

    def decode(self, plaintext: Plaintext, *, signed: bool = False) -> np.ndarray:
        """``[N]`` int64 values (row-major 2 x N/2 matrix): in [0, t), or centred if ``signed``."""
        self._check(plaintext)
        slots = self.ctx.t_basis.ntt(plaintext.data.unsqueeze(0))[0]
        values = slots[self._index].cpu().numpy()
        t = self.ctx.t
        return np.where(values > (t - 1) // 2, values - t, values) if signed else values

    def decode_matrix(self, plaintext: Plaintext, *, signed: bool = False) -> np.ndarray:
        """:meth:`decode` as the ``[2, N/2]`` matrix."""
        return self.decode(plaintext, signed=signed).reshape(2, self.ctx.n // 2)

    def _values(self, values) -> np.ndarray:
        try:
            v = np.asarray(values)
        except (TypeError, ValueError) as exc:
            raise EncodingError(f"encode: values must be integers ({exc})") from None
        n, t = self.ctx.n, self.ctx.t
        if v.ndim == 2 and v.shape != (2, n // 2):
            raise EncodingError(f"encode: a matrix must be [2, {n // 2}], got {list(v.shape)}")
        v = v.reshape(-1)
        if v.size > n:
            raise EncodingError(f"encode: {v.size} values do not fit in {n} slots")
        if v.size and not (np.issubdtype(v.dtype, np.integer) or v.dtype == object):
            raise EncodingError(f"encode: values must be integers, got dtype {v.dtype}")
        low = -((t - 1) // 2)
        try:
            ints = np.array([int(x) for x in v], dtype=np.int64) if v.dtype == object else v.astype(np.int64)
        except OverflowError:
            ints = None
        if ints is None or ((ints < low) | (ints >= t)).any() or (ints.astype(object) != v).any():
            raise EncodingError(f"encode: values must be integers in [-(t-1)/2, t-1] = [{low}, {t - 1}]")
        out = np.zeros(n, dtype=np.int64)
        out[:ints.size] = np.mod(ints, t)
        return out

    def _check(self, plaintext: Plaintext) -> None:
        if not isinstance(plaintext, Plaintext):
            raise EncodingError(f"decode: expected a BFV Plaintext, got {type(plaintext).__name__}")
        if plaintext.params_id != self.ctx.params_id:
            raise EncodingError("decode: the plaintext was made for other parameters (params_id differs)")
        if plaintext.n != self.ctx.n or plaintext.data.device != self.ctx.device:
            raise EncodingError(f"decode: plaintext of {plaintext.n} coefficients on {plaintext.data.device} "
                                f"does not fit {self.ctx}")
