"""The unchecked, JSON-serialisable description of a parameter set (Lattigo's ParametersLiteral)."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from fhe_core import jsontext
from fhe_core.errors import ParameterError


@dataclass
class ParamsLiteral:
    """Everything that defines a parameter set; :meth:`fhe_core.params.Params.from_literal`
    validates it and generates the primes.

    Attributes:
        log_n: log2 of the ring degree N (10..17).
        log_q: bit sizes of the ciphertext primes q_0, q_1, ..., q_L. q_0 is the largest prime of
            its size; each later q_i is a CKKS scaling prime, the prime = 1 mod 2N nearest
            2^log_q[i] (alternately above and below), so that rescaling by it keeps the scale near
            2^log_q[i]. The number of levels is L = len(log_q) - 1.
        log_p: bit sizes of the special primes p_0..p_(alpha-1) of hybrid key switching (HK20):
            alpha = len(log_p) primes per digit, dnum = ceil(len(log_q) / alpha) digits.
        log_default_scale: log2 of the default CKKS scale.
        hamming_weight: secret distribution: 0 for uniform ternary (each coefficient uniform in
            {-1, 0, 1}), h > 0 for a ternary secret with exactly h nonzero coefficients.
        error_eta: errors are centered binomial with parameter eta (variance eta/2); the
            default 21 gives sigma = sqrt(10.5) ~ 3.24, the HE Standard's ~3.2. In [1, 32].
        dnum: optional check: when given, it must equal ceil(len(log_q) / len(log_p)).
        scheme: "ckks" or "bfv".
        plaintext_modulus: BFV's t (a prime = 1 mod 2N, for batching); 0 for CKKS. BFV sets
            log_default_scale to 0 and takes its q primes as the largest primes of each size.
        key_switching: "hybrid" (HK20: dnum digits of alpha primes, ModUp to QP) or "linear" (one prime per digit,
            products in a small auxiliary base: ``fhe_core.rlwe.linear_switching``). Part of params_id only when
            not the default, so every hybrid set keeps its id.
    """

    log_n: int
    log_q: list[int]
    log_p: list[int]
    log_default_scale: int
    hamming_weight: int = 0
    error_eta: int = 21
    dnum: int | None = None
    scheme: str = "ckks"
    plaintext_modulus: int = 0
    key_switching: str = "hybrid"

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON types (lists, ints, strings); key_switching only when not "hybrid" (the ids
        and records of every set made before the field existed stay valid)."""
        fields = {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}
        if fields["key_switching"] == "hybrid":
            del fields["key_switching"]
        return fields

    def to_json(self) -> str:
        """Canonical JSON: sorted keys, no whitespace; equal literals give equal strings."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ParamsLiteral:
        """Inverse of :meth:`to_dict`; unknown or missing fields raise ParameterError."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ParameterError(f"unknown parameter fields: {sorted(unknown)}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise ParameterError(f"incomplete parameter literal: {exc}") from None

    @classmethod
    def from_json(cls, text: str) -> ParamsLiteral:
        """Inverse of :meth:`to_json`."""
        try:
            data = jsontext.loads(text)
        except ValueError as exc:  # malformed, nested past jsontext.MAX_DEPTH, an integer of over 4300 digits
            raise ParameterError(f"parameter literal is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ParameterError("a parameter literal must be a JSON object")
        return cls.from_dict(data)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple)) else value
