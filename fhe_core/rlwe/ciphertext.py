"""The RLWE ciphertext: residue data plus the metadata every operation checks.

Schemes extend it by subclassing the dataclass (CKKS adds ``scale``): every RLWE operation
builds its result with :meth:`Ciphertext.replace`, which keeps the fields a subclass adds.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TypeVar

import torch

from fhe_core.errors import LevelMismatchError, ParameterError

C = TypeVar("C", bound="Ciphertext")
CANONICAL_MARK = "_residues_checked"  # set by rlwe.checks.mark_canonical on objects with checked residues


@dataclass(frozen=True, kw_only=True, eq=False)
class Ciphertext:
    """An RLWE ciphertext (c_0, ..., c_d) decrypting to c_0 + c_1 s + ... + c_d s^d.

    Attributes:
        data: ``[d+1, l+1, N]`` int64 residues over Q_l (d = 1 normally, 2 after a tensor
            product and before relinearization).
        level: l; the data has l+1 limbs.
        params_id: the parameter set it belongs to.
        is_ntt: True when the residues are in the NTT (evaluation) domain.
        uniform_seed: set on a fresh secret-key encryption only: c_1 is the uniform polynomial
            regenerated from this public seed (``rlwe.encryption.sk_encryption_uniform``), so the
            ciphertext serializes as c_0 and the seed (half the bytes). Results of operations
            never carry it (:meth:`replace` with new data drops it).
    """

    data: torch.Tensor
    level: int
    params_id: str
    is_ntt: bool = True
    uniform_seed: bytes | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.data.dtype != torch.int64 or self.data.dim() != 3 or self.data.shape[0] < 2:
            raise ParameterError(f"ciphertext data must be [d+1 >= 2, l+1, N] int64, got "
                                 f"{tuple(self.data.shape)} {self.data.dtype}")
        if self.data.shape[1] != self.level + 1:
            raise LevelMismatchError(f"ciphertext at level {self.level} needs {self.level + 1} limbs, "
                                     f"data has {self.data.shape[1]}")

    @property
    def degree(self) -> int:
        """d: the number of components minus one."""
        return self.data.shape[0] - 1

    @property
    def n(self) -> int:
        return self.data.shape[-1]

    @property
    def device(self) -> torch.device:
        return self.data.device

    def replace(self: C, **changes) -> C:
        """A copy with some fields changed (subclass fields are kept). A relabelling that keeps the
        data and the params_id (scale, slots, level of the same limbs) keeps the mark of checked
        residues (``checks.mark_canonical``); new data or another params_id is checked anew."""
        if "data" in changes or "params_id" in changes:
            changes.setdefault("uniform_seed", None)  # new data: no longer the seed's fresh encryption
        out = dataclasses.replace(self, **changes)
        if "data" not in changes and "params_id" not in changes and CANONICAL_MARK in self.__dict__:
            out.__dict__[CANONICAL_MARK] = True
        return out

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(degree={self.degree}, level={self.level}, N={self.n}, "
                f"is_ntt={self.is_ntt}, device={self.device}, params_id={self.params_id!r})")
