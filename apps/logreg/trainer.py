"""The server half of encrypted HELR training: Nesterov iterations on ciphertexts, with
bootstrapping, replaying the twin's public schedule. Holds parameters, evaluation keys and
ciphertexts only.

**Layout** (:class:`ml.packing.RowMajorLayout`): a block ciphertext Z holds ``rows`` samples
z_i = y_i x_i of ``columns`` (zero-padded) features; w and v are kept replicated in every row.

**One iteration** (v, w at level l; the block's Z fresh at the bootstrapping output level;
eta = lr / B, gamma_t the Nesterov weight, f = 1 - gamma_t; t_i = z_i . v; the
:class:`ml.activations.FoldedCubic` of eta p: T = mu t, T (T^2 + b) = eta (p(t) - 1/2)):

    level l-1  ZV   = rescale(Z * V)                               ct x ct
               S    = rotate_sum over the columns (steps 1..columns/2)   t_i in column 0
    level l-2  T    = rescale(S * mask)                            mask: mu in column 0, encoded at
                                                                   the scale that makes T's scale Delta
                                                                   (cached: a few encodings per run)
               T    = replicate over the columns (steps -1..-columns/2)
    level l-3  T^2, T (f Z)                                        (parallel; f Z: a constant product
                                                                   of the fresh Z, off the critical path)
    level l-4  P    = (T^2 + b) (T f Z)                            ml.activations.odd_cubic_times
               P    = sum of the block's P + f eta (1/2) sum_i z_i (one constant product of sum Z)
               G    = rotate_sum over the rows (steps columns .. slots/2): f eta sum_i p(t_i) z_i,
                      replicated in every row (the rotation is cyclic over all slots)
               v'   = G + [f v + gamma w]                          bracket: constants at level l,
                                                                   rescaled to G's scale
               w'   = G relabelled by 1/f + v                      relabelling = multiplying by a
                                                                   constant for free (scale only)
               (for f < 1, i.e. only the first iteration, f = 0.015, G is computed without f and
               relabelled by f for v' instead, which does not amplify its error)

so an iteration consumes **4 levels** (the inner product 1, the mask 1, the cubic and the
product with z 2; the Nesterov combination and every constant ride along for free). v' keeps
G's scale (about Delta, whatever gamma is, after the first iteration), so the mask's scale
repeats and its encoding is reused (four encodings in a run). Work per iteration, for c block ciphertexts: 4c ciphertext products (Z V, T^2, T Z,
(T^2 + b) T Z), c plaintext products (mask), 2 c log2(columns) + log2(rows) rotations (sum and
replicate per block ciphertext, one row sum), c + 3 constant products. Secure preset, batch
1024: c = 8, 32 products, 135 rotations (16 log2 256 + 7).

**Bootstrapping**: w and v are refreshed together, packed as w + i v in one ciphertext (each
brought to scale Delta by one constant product: **1 level**), bootstrapped once and split with a
conjugation: w = (X + conj X) / 2, v = -i (X - conj X) / 2 (the halves are relabellings).
It runs when v is below level 4 + 1 before an iteration. With the N16_H192_* presets (9 levels
after bootstrapping) that is 9 -> 5 -> 1 -> bootstrap: **two iterations per bootstrap**.

**Galois keys**: the bootstrapping keys (CtS/StC BSGS steps, conjugation) plus steps
2^k (k < log2 columns), -2^k and columns * 2^k (k < log2 rows), minus those the bootstrapping
set already holds (:func:`required_galois_elements`), and the relinearization key.
"""
from __future__ import annotations

import math
import struct
import threading
from collections.abc import Callable

import torch

from fhe_core import rlwe, serialize
from fhe_core.ckks import Ciphertext, Encoder, galois_elements
from fhe_core.ckks.bootstrapping import Bootstrapper, bootstrapping_galois_elements
from fhe_core.errors import LevelMismatchError, ParameterError, ParamsMismatchError, SerializationError
from fhe_core.params import Params
from ml.activations import DEPTH as CUBIC_DEPTH
from ml.activations import FoldedCubic, odd_cubic_times
from ml.rotsum import replicate, replicate_steps, rotate_sum, rotation_steps
from ml.sigmoid import HELR_CUBIC

from .config import HELRConfig
from .dataset import EncryptedDataset
from .schedule import MiniBatchSchedule
from .twin import nesterov_gammas

ITERATION_DEPTH = 2 + CUBIC_DEPTH  # inner product + mask, then the cubic times z
PACK_DEPTH = 1                     # w + i v brought to scale Delta before bootstrapping
CHECKPOINT_MAGIC = b"HELRCKPT"
_CHECKPOINT_HEADER = struct.Struct("<8sII")  # magic, version, iteration
CHECKPOINT_VERSION = 1


class HELRTrainingError(ParameterError):
    """The trainer cannot run with what it was given (keys, data, schedule, levels)."""


def layout_rotation_steps(config: HELRConfig) -> list[int]:
    """Rotation steps the iterations use: sum and replicate along a row, sum over the rows."""
    layout = config.layout
    return list(dict.fromkeys(rotation_steps(layout.columns, 1) + replicate_steps(layout.columns, 1)
                              + rotation_steps(layout.rows, layout.columns)))


def required_galois_elements(config: HELRConfig, params: Params) -> list[int]:
    """Every Galois element training needs: bootstrapping's and the layout's (sorted, unique)."""
    boot = bootstrapping_galois_elements(params, config.bootstrapping_parameters)
    return sorted(set(boot) | set(galois_elements(params.n, layout_rotation_steps(config))))


class EncryptedHELRTrainer:
    """Encrypted HELR training on the server: :meth:`step` runs one Nesterov iteration.

    Args:
        config: the settings the client used.
        keys: relinearization + :func:`required_galois_elements` (checked up front).
        dataset: the client's :class:`EncryptedDataset` (its parameters are the trainer's).
        schedule: the public schedule the dataset was packed with (block order replayed).
    Starts from w = v = 0 (noiseless trivial ciphertexts). Not thread-safe, except
    :meth:`cancel`, which may be called from another thread.
    """

    def __init__(self, config: HELRConfig, keys: rlwe.EvalKeySet, dataset: EncryptedDataset,
                 schedule: MiniBatchSchedule, *, params: Params | None = None):
        self.config, self.dataset, self.schedule = config, dataset, schedule
        self.params = params if params is not None else _dataset_params(config, dataset)
        self._check_inputs(keys)
        self._bootstrapper = Bootstrapper(self.params, config.bootstrapping_parameters, keys)
        self.evaluator = self._bootstrapper.evaluator
        self._encoder = Encoder(self.params)
        self._gammas = nesterov_gammas(config.lambda0, schedule.iterations)
        self._step_size = config.learning_rate / config.batch_size
        self._cubic = FoldedCubic.from_coefficients(HELR_CUBIC, self._step_size)
        self._masks: dict[tuple[int, float], object] = {}
        self._top = self._bootstrapper.output_level
        self._cancel = threading.Event()
        self.bootstraps = 0
        self.iteration = 0
        zero = self._zero()
        self._w, self._v = zero, zero

    # ---- checks ------------------------------------------------------------------------------------

    def _check_inputs(self, keys: rlwe.EvalKeySet) -> None:
        config, data, schedule = self.config, self.dataset, self.schedule
        if not isinstance(keys, rlwe.EvalKeySet) or keys.params_id != self.params.params_id:
            raise ParamsMismatchError("EncryptedHELRTrainer: the key set does not belong to the dataset's parameters")
        missing = [k for k in required_galois_elements(config, self.params) if k not in keys]
        if missing or not keys.has_relin:
            raise HELRTrainingError(f"EncryptedHELRTrainer: missing Galois keys {missing}"
                                    + ("" if keys.has_relin else " and the relinearization key"))
        if schedule.batch_size != config.batch_size or schedule.n_blocks != data.n_blocks \
                or len(schedule.permutation) != data.samples:
            raise HELRTrainingError(f"EncryptedHELRTrainer: the schedule ({len(schedule.permutation)} rows, batch "
                                    f"{schedule.batch_size}, {schedule.n_blocks} blocks) does not match the dataset "
                                    f"({data.samples} rows, batch {data.batch_size}, {data.n_blocks} blocks)")
        if data.features > config.columns:
            raise HELRTrainingError(f"EncryptedHELRTrainer: {data.features} features exceed {config.columns} columns")
        top = config.bootstrapping_parameters.output_level
        if top < ITERATION_DEPTH + PACK_DEPTH:
            raise HELRTrainingError(f"EncryptedHELRTrainer: {config.bootstrapping} leaves {top} levels after "
                                    f"bootstrapping; an iteration needs {ITERATION_DEPTH} + {PACK_DEPTH}")
        for ct in data.ciphertexts:
            if not isinstance(ct, Ciphertext) or ct.params_id != self.params.params_id:
                raise ParamsMismatchError("EncryptedHELRTrainer: a data ciphertext belongs to other parameters")
            if ct.slots != config.layout.slots or ct.level < top or ct.degree != 1:
                raise LevelMismatchError(f"EncryptedHELRTrainer: data ciphertexts must have {config.layout.slots} "
                                         f"slots, degree 1 and level >= {top}; got {ct!r}")

    # ---- state -------------------------------------------------------------------------------------

    @property
    def weights(self) -> Ciphertext:
        """The encrypted w (replicated per row; the client decrypts it)."""
        return self._w

    @property
    def velocity(self) -> Ciphertext:
        """The encrypted Nesterov look-ahead v."""
        return self._v

    def cancel(self) -> None:
        """Ask :meth:`run` to stop after the current iteration (thread-safe)."""
        self._cancel.set()

    def _zero(self) -> Ciphertext:
        shape = (2, self._top + 1, self.params.n)
        data = torch.zeros(shape, dtype=torch.int64, device=self.params.device)
        return Ciphertext(data=data, level=self._top, params_id=self.params.params_id,
                          scale=float(self.params.default_scale), slots=self.config.layout.slots)

    # ---- training ----------------------------------------------------------------------------------

    def run(self, iterations: int | None = None,
            on_iteration: Callable[[int, EncryptedHELRTrainer], object] | None = None) -> int:
        """Run up to ``iterations`` more steps (default: to the end of the schedule); after each,
        ``on_iteration(iteration, self)`` (iteration counts completed steps); a callback that
        returns False, or :meth:`cancel`, stops between iterations. Returns the iterations run."""
        remaining = self.schedule.iterations - self.iteration
        count = remaining if iterations is None else min(int(iterations), remaining)
        self._cancel.clear()
        done = 0
        while done < count and not self._cancel.is_set():
            self.step()
            done += 1
            if on_iteration is not None and on_iteration(self.iteration, self) is False:
                break
        return done

    def step(self) -> None:
        """One Nesterov iteration on block ``schedule.block_order[iteration]`` (bootstrapping w
        and v first when fewer than 4 + 1 levels are left)."""
        t = self.iteration
        if t >= self.schedule.iterations:
            raise HELRTrainingError(f"step: the schedule has {self.schedule.iterations} iterations, all done")
        if self._v.level < ITERATION_DEPTH + PACK_DEPTH:
            self._w, self._v = self._bootstrap(self._w, self._v)
        block = self.dataset.blocks[int(self.schedule.block_order[t])]
        self._w, self._v = self._nesterov(block, float(self._gammas[t]), self._w, self._v)
        self.iteration = t + 1

    def _nesterov(self, block, gamma: float, w: Ciphertext, v: Ciphertext) -> tuple[Ciphertext, Ciphertext]:
        """(w', v') = (v + g, f w' + gamma w), f = 1 - gamma, g = eta sum p(z_i . v) z_i.

        The gradient is computed once as phi g, phi = max(f, 1), and relabelled twice: to g for
        w' and to f g for v' (module docstring). Relabelling divides the absolute error by the
        factor it divides the value by, so phi >= f and phi >= 1 keep both copies' errors at most
        phi g's (f = 0.015 at the first iteration would otherwise amplify w's error 66 times)."""
        ev, f = self.evaluator, 1.0 - gamma
        phi = max(f, 1.0)
        g = self._gradient(block, phi, v)                    # phi g at scale S, level l - 4
        w_scale, v_scale = g.scale * phi, g.scale * phi / f
        w_next = ev.add(g.replace(scale=w_scale), self._at_scale(v, w_scale))
        v_next = ev.add(g.replace(scale=v_scale), self._combine(v, f, w, gamma, v_scale))
        return w_next, v_next

    def _gradient(self, block, factor: float, v: Ciphertext) -> Ciphertext:
        """factor * eta * sum_i p(z_i . v) z_i over the block, replicated per row: level l - 4.

        The cubic's constants are fixed (eta only: the mask is encoded once per level and scale);
        ``factor`` multiplies the z of T z (f Z: one constant product of the fresh Z, off the
        critical path) and the constant term."""
        ev, layout, cubic = self.evaluator, self.config.layout, self._cubic
        total = None
        for z in block:
            sums = rotate_sum(ev, ev.rescale(ev.mul_relin(z, v)), layout.columns)   # t_i in column 0
            t = replicate(ev, ev.rescale(ev.mul(sums, self._mask(sums))), layout.columns)  # mu t_i, whole row
            term = odd_cubic_times(ev, t, self._times_constant(z, factor, z.scale), cubic)
            total = term if total is None else ev.add(total, term)
        z_sum = block[0]
        for z in block[1:]:
            z_sum = ev.add(z_sum, z)
        total = ev.add(total, self._times_constant(z_sum, factor * cubic.constant, total.scale))
        return rotate_sum(ev, total, layout.rows, layout.columns)

    def _mask(self, sums: Ciphertext):
        """mu in column 0 of every row at the scale (rounded to 24 bits, so that it is cached
        and reused) that gives the product, once rescaled, the default scale Delta: keeps the
        scales from drifting across iterations."""
        q = self.params.q_primes[sums.level]
        mantissa, exponent = math.frexp(self.params.default_scale * q / sums.scale)
        scale = math.ldexp(round(mantissa * 2 ** 24), exponent - 24)
        key = (sums.level, scale)
        if key not in self._masks:
            values = self.config.layout.column_mask(0, self._cubic.mu)
            self._masks[key] = self._encoder.encode(values, level=sums.level, scale=scale, slots=sums.slots)
        return self._masks[key]

    def _times_constant(self, ct: Ciphertext, value: complex, scale: float) -> Ciphertext:
        """value * ct at (almost exactly) ``scale``: one constant product and a rescale (1 level)."""
        q = self.params.q_primes[ct.level]
        return self.evaluator.rescale(self.evaluator.mul(ct, value, constant_scale=scale * q / ct.scale))

    def _at_scale(self, ct: Ciphertext, scale: float) -> Ciphertext:
        """ct brought to ``scale`` by an integer product and a rescale (1 level; an integer
        constant_scale so the product is exactly ct times the integer)."""
        q = self.params.q_primes[ct.level]
        return self.evaluator.rescale(self.evaluator.mul(ct, 1, constant_scale=float(round(scale * q / ct.scale))))

    def _combine(self, a: Ciphertext, alpha: float, b: Ciphertext, beta: float, scale: float) -> Ciphertext:
        """alpha a + beta b at ``scale``, one level below the lower operand."""
        ev = self.evaluator
        level = min(a.level, b.level)
        a, b = (ct if ct.level == level else ev.drop_level(ct, level) for ct in (a, b))
        q = self.params.q_primes[level]
        terms = [ev.mul(ct, c, constant_scale=scale * q / ct.scale) for ct, c in ((a, alpha), (b, beta))]
        return ev.rescale(ev.add(terms[0], terms[1]))  # scales equal up to float rounding

    def _bootstrap(self, w: Ciphertext, v: Ciphertext) -> tuple[Ciphertext, Ciphertext]:
        """Refresh w and v with one bootstrap of X = w + i v (module docstring)."""
        ev, delta = self.evaluator, float(self.params.default_scale)
        packed = ev.add(self._at_scale(w, delta), ev.mul(self._at_scale(v, delta), 1j))  # scale ~ Delta (1e-13)
        fresh = self._bootstrapper.bootstrap(packed)
        conj = ev.conjugate(fresh)
        half = 2.0 * fresh.scale
        self.bootstraps += 1
        return (ev.add(fresh, conj).replace(scale=half),
                ev.mul(ev.sub(fresh, conj), -1j).replace(scale=half))

    # ---- checkpoints -------------------------------------------------------------------------------

    def checkpoint(self) -> bytes:
        """The state after :attr:`iteration` steps: header (magic, version, iteration) + w, v
        (CKKS ciphertext records). :meth:`resume` continues bit for bit."""
        header = _CHECKPOINT_HEADER.pack(CHECKPOINT_MAGIC, CHECKPOINT_VERSION, self.iteration)
        return header + serialize.dumps_many([self._w, self._v])

    @classmethod
    def resume(cls, config: HELRConfig, keys: rlwe.EvalKeySet, dataset: EncryptedDataset,
               schedule: MiniBatchSchedule, checkpoint: bytes, *, params: Params | None = None) -> EncryptedHELRTrainer:
        """A trainer in the state of ``checkpoint`` (same config, keys, dataset and schedule)."""
        trainer = cls(config, keys, dataset, schedule, params=params)
        iteration, w, v = read_checkpoint(checkpoint, trainer.params)
        if iteration > schedule.iterations:
            raise SerializationError(f"resume: checkpoint at iteration {iteration} beyond the schedule's "
                                     f"{schedule.iterations}")
        trainer.iteration, trainer._w, trainer._v = iteration, w, v
        return trainer


def read_checkpoint(data: bytes, params: Params) -> tuple[int, Ciphertext, Ciphertext]:
    """(iteration, w, v) from :meth:`EncryptedHELRTrainer.checkpoint` bytes (every record checked)."""
    view = memoryview(data)
    if len(view) < _CHECKPOINT_HEADER.size:
        raise SerializationError("checkpoint: truncated header")
    magic, version, iteration = _CHECKPOINT_HEADER.unpack_from(view)
    if magic != CHECKPOINT_MAGIC or version != CHECKPOINT_VERSION:
        raise SerializationError(f"checkpoint: bad magic or version {version}")
    cts = serialize.loads_many(view[_CHECKPOINT_HEADER.size:], params, expect=Ciphertext, max_count=2)
    if len(cts) != 2:
        raise SerializationError(f"checkpoint: expected 2 ciphertexts (w, v), got {len(cts)}")
    return iteration, cts[0], cts[1]


def _dataset_params(config: HELRConfig, dataset: EncryptedDataset) -> Params:
    cts = dataset.ciphertexts
    if not cts:
        raise HELRTrainingError("EncryptedHELRTrainer: the dataset holds no ciphertext")
    params = config.bootstrapping_parameters.params(device=str(cts[0].device), allow_insecure=config.allow_insecure)
    return params


__all__ = ["EncryptedHELRTrainer", "HELRTrainingError", "ITERATION_DEPTH", "PACK_DEPTH", "layout_rotation_steps",
           "required_galois_elements", "read_checkpoint"]
