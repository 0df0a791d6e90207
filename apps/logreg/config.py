"""Settings of encrypted HELR training, shared by the client and the server halves.

A :class:`HELRConfig` names the bootstrapping preset (whose CKKS chain is the parameter set),
the slot layout (``columns`` padded features per sample; the samples per ciphertext follow from the
preset's slots) and the training settings of the plaintext twin (iterations, batch size,
lambda_0, learning rate, the seed and order of the public mini-batch schedule). It round-trips
through JSON so a server can check that it trains what the client prepared.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields

from fhe_core.ckks.bootstrapping import parameters as boot_presets
from fhe_core.ckks.bootstrapping.parameters import BootstrappingParameters
from fhe_core.errors import ParameterError
from ml.activations import FoldedCubic
from ml.packing import ColumnMajorLayout
from ml.sigmoid import HELR_CUBIC

from .schedule import MiniBatchSchedule
from .twin import HelrConfig

PRESETS = ("TINY_N11_HELR", "TINY_N11_FULL", "TINY_N10_FULL", "N16_H192_FULL", "N16_H192_SPARSE")
SECURE_PRESETS = ("N16_H192_FULL", "N16_H192_SPARSE")


class HELRConfigError(ParameterError):
    """A HELRConfig (or its JSON) is invalid."""


@dataclass(frozen=True)
class HELRConfig:
    """Encrypted HELR training settings.

    Attributes:
        bootstrapping: name of a preset in :mod:`fhe_core.ckks.bootstrapping.parameters` (its
            literal is the CKKS parameter set; slots and levels come from it).
        allow_insecure: required for the TINY_* presets (tests only).
        columns: padded feature count per row (a power of two >= features + 1 for the bias).
        iterations, batch_size, learning_rate, lambda0, seed, block_order: as the twin's
            :class:`apps.logreg.twin.HelrConfig` (the cubic sigmoid is HELR's).
    """

    bootstrapping: str = "N16_H192_FULL"
    allow_insecure: bool = False
    columns: int = 256
    # the twin's defaults (the study's values), taken from it so that the two cannot drift apart
    iterations: int = HelrConfig.iterations
    batch_size: int = HelrConfig.batch_size
    learning_rate: float = HelrConfig.learning_rate
    lambda0: float = HelrConfig.lambda0
    seed: int = HelrConfig.seed
    block_order: str = HelrConfig.block_order

    def __post_init__(self) -> None:
        if self.bootstrapping not in PRESETS:
            raise HELRConfigError(f"HELRConfig: bootstrapping must be one of {PRESETS}, got {self.bootstrapping!r}")
        if self.bootstrapping not in SECURE_PRESETS and not self.allow_insecure:
            raise HELRConfigError(f"HELRConfig: {self.bootstrapping} is insecure (tests only): "
                                  "pass allow_insecure=True")
        for name in ("iterations", "batch_size", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name != "batch_size" else 1):
                raise HELRConfigError(f"HELRConfig: {name} must be a non-negative int (batch_size >= 1), got {value!r}")
        if self.block_order not in ("cycle", "shuffle"):
            raise HELRConfigError(f"HELRConfig: block_order must be 'cycle' or 'shuffle', got {self.block_order!r}")
        for name in ("learning_rate", "lambda0"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise HELRConfigError(f"HELRConfig: {name} must be a positive finite number, got {value!r}")
        try:
            self.layout  # noqa: B018 (the property's checks are the point)
        except ParameterError as exc:
            raise HELRConfigError(f"HELRConfig: {exc}") from None

    # ---- derived ---------------------------------------------------------------------------------

    @property
    def bootstrapping_parameters(self) -> BootstrappingParameters:
        return getattr(boot_presets, self.bootstrapping)

    @property
    def layout(self) -> ColumnMajorLayout:
        """``rows = slots / columns`` samples of ``columns`` features per ciphertext, feature-major."""
        return ColumnMajorLayout(self.bootstrapping_parameters.slots, self.columns)

    @property
    def cubic(self) -> FoldedCubic:
        """HELR's cubic times the step eta = lr / B, folded: T = mu t, eta p(t) = T (T^2 + b) + c.
        The client encrypts mu z (so that z . v is T); the trainer uses b and c."""
        return FoldedCubic.from_coefficients(HELR_CUBIC, self.learning_rate / self.batch_size)

    @property
    def rows_per_ciphertext(self) -> int:
        return self.layout.rows

    @property
    def ciphertexts_per_batch(self) -> int:
        return self.layout.ciphertexts_for(self.batch_size)

    def twin_config(self) -> HelrConfig:
        """The plaintext twin's settings (same schedule, step and sigmoid)."""
        return HelrConfig(iterations=self.iterations, batch_size=self.batch_size,
                          learning_rate=float(self.learning_rate), lambda0=float(self.lambda0), seed=self.seed,
                          block_order=self.block_order, sigmoid=HELR_CUBIC)

    def n_blocks(self, samples: int) -> int:
        """Mini-batches per epoch for ``samples`` rows (the schedule's, without building it)."""
        return -(-samples // self.batch_size)

    def schedule(self, samples: int) -> MiniBatchSchedule:
        """The public mini-batch schedule for ``samples`` training rows."""
        return MiniBatchSchedule.build(samples, self.batch_size, self.iterations, self.seed, self.block_order)

    # ---- presets and JSON ------------------------------------------------------------------------

    @classmethod
    def tiny(cls, **changes) -> HELRConfig:
        """Insecure N = 2^11 (1024 slots = 4 samples x 256 features), batch 16, 4 iterations: CPU tests."""
        settings = dict(bootstrapping="TINY_N11_HELR", allow_insecure=True, iterations=4, batch_size=16)
        return cls(**(settings | changes))

    @classmethod
    def secure(cls, **changes) -> HELRConfig:
        """128-bit N = 2^16, h = 192, 2^15 slots = 128 samples x 256 features, batch 1024, 30 iterations."""
        return cls(**({"bootstrapping": "N16_H192_FULL"} | changes))

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> HELRConfig:
        try:
            data = json.loads(text)
        except (TypeError, ValueError, RecursionError) as exc:  # RecursionError: nesting too deep
            raise HELRConfigError(f"HELRConfig.from_json: not JSON ({exc})") from None
        names = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or set(data) - names:
            unknown = sorted(set(data) - names) if isinstance(data, dict) else type(data).__name__
            raise HELRConfigError(f"HELRConfig.from_json: expected an object with fields {sorted(names)}, "
                                  f"got {unknown}")
        return cls(**data)
