"""CKKS plaintexts: an encoded message with the metadata every evaluator entry checks."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from fhe_core.errors import EncodingError


@dataclass(frozen=True, eq=False)
class Plaintext:
    """An integer polynomial m(X) mod Q_level that encodes ``slots`` complex values at ``scale``.

    Attributes:
        data: ``[level + 1, N]`` int64 residues mod q_0..q_level, NTT domain when ``is_ntt``
            (the encoder's output) else coefficients.
        level: the plaintext lives mod Q_level = q_0 * ... * q_level.
        scale: m(X) ~ scale * (inverse embedding of the message); exact float bookkeeping.
        params_id: the :class:`fhe_core.params.Params` it was made for.
        slots: n, a power of two dividing N/2; n < N/2 is sparse packing (m(X) = m'(X^(N/2n))).
        is_ntt: the domain of ``data``.
    """

    data: torch.Tensor
    level: int
    scale: float
    params_id: str
    slots: int
    is_ntt: bool = True

    def __post_init__(self) -> None:
        d = self.data
        if d.dtype != torch.int64 or d.dim() != 2 or d.shape[0] != self.level + 1:
            raise EncodingError(f"Plaintext: data must be [level + 1, N] int64 = [{self.level + 1}, N], "
                                f"got {tuple(d.shape)} {d.dtype}")
        if not (self.slots >= 1 and self.slots & (self.slots - 1) == 0 and 2 * self.slots <= d.shape[1]):
            raise EncodingError(f"Plaintext: slots must be a power of two <= N/2, got {self.slots}")
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise EncodingError(f"Plaintext: scale must be finite and positive, got {self.scale}")

    @property
    def n(self) -> int:
        """The ring degree N."""
        return self.data.shape[1]
