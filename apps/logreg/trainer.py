"""The server half of encrypted HELR training: Nesterov iterations on ciphertexts, with
bootstrapping, replaying the twin's public schedule. Holds parameters, evaluation keys and
ciphertexts only.

**Layout** (:class:`ml.packing.ColumnMajorLayout`, feature-major): a block ciphertext Z holds
``rows`` samples of ``columns`` (zero-padded) features, feature f of sample i at slot
f * rows + i; the client encrypts mu z_i, z_i = y_i x_i, mu from the folded cubic (below). w and
v are kept replicated over the samples.

**One iteration** (v, w at level l; Z fresh at the bootstrapping output level; eta = lr / B,
gamma_t the Nesterov weight, f = 1 - gamma_t; t_i = z_i . v; ``config.cubic``, the
:class:`ml.activations.FoldedCubic` of eta p: T = mu t, T (T^2 + b) + c = eta p(t)):

    level l-1  T    = rotate_sum(rescale(Z * V)) over the features  mu t_i in every slot of sample i
                      (steps rows * 2^k: cyclic over all slots, so no mask and no replicate)
    level l-2  T^2, T (f Z)                                   (parallel; f Z = (f / mu) (mu Z): a
                                                              constant product of the fresh Z, off
                                                              the critical path)
    level l-3  P    = (T^2 + b) (T f Z)                       ml.activations.odd_cubic_times
               P    = sum of the batch's P + f c sum_i z_i    (one constant product of sum Z)
               S    = rotate_sum over the samples (steps 2^k): sum_i in sample 0 of each feature
    level l-4  G    = replicate(rescale(S * mask)) over the samples (steps -2^k): f eta sum_i p(t_i) z_i
                      in every sample; the mask (1 at sample 0) is encoded at the scale that brings
                      G's scale to Delta (so scales never drift; cached: a few encodings per run)
               v'   = G + [f v + gamma w]                     bracket: constants at level l,
                                                              rescaled to G's scale
               w'   = G relabelled by 1/f + v                 relabelling = multiplying by a
                                                              constant for free (scale only)
               (for f < 1, i.e. only the first iteration, f = 0.015: G without f and f G by two
               masks of the same sums, so that w's error is not amplified by 1/f)

so an iteration consumes **4 levels** (inner product, cubic (2), mask; the Nesterov update and
every constant ride along). Work per iteration for c ciphertexts per batch: 4c ciphertext
products (Z V, T^2, T f Z, (T^2 + b) T f Z), one plaintext product (the mask), c log2(columns) +
2 log2(rows) rotations, c + 3 constant products. Secure preset, batch 1024: c = 8, 32 products,
78 rotations (8 x 8 + 7 + 7; the sample-major layout of the HELR paper needs 135).

**Bootstrapping**: w and v are refreshed together by ``Bootstrapper.bootstrap_pair`` (each
brought to scale Delta by one constant product first: **1 level**): packed as X = w + i v in one
ciphertext, bootstrapped once and split with a conjugation, w = (X + conj X) / 2,
v = -i (X - conj X) / 2, both back at scale Delta.
It runs when v is below level 4 + 1 before an iteration. With the N16_H192_* presets (9 levels
after bootstrapping) that is 9 -> 5 -> 1 -> bootstrap: **two iterations per bootstrap**.

**CUDA graphs.** An eager iteration issues ~1,500 kernels from ~5,000 Python-level operations at
N16_H192_FULL: on an H200 the host takes longer to issue them than the device to run them. On
CUDA the two halves of an iteration, :meth:`_terms` (the per-ciphertext work, the c ciphertexts
on one stream each) and :meth:`_gradient` (the constant term, the sums over the samples, the mask,
the replication), replay CUDA graphs (``fhe_core.rlwe.graphs``), one per level, captured on first
use. The two constants made from gamma_t that they need (f / mu for f Z, f c_0 / mu for the
constant term) enter as data: plaintexts holding the constant in every slot. What stays eager is
the Nesterov update (a few calls: w's scale follows f, so its constants cannot be data of a fixed
graph) and the first iteration (f < 1). The graphs are keyed on their inputs' levels and scales;
every bootstrap labels its output scale Delta exactly, so the scales repeat from one bootstrap to
the next and four graphs serve a whole run. Results are the eager ones bit for bit (the same
kernels on the same data).

**What the client gets back** (:meth:`EncryptedHELRTrainer.for_client`): w (the model) and, in
the checkpoints it downloads, w and v dropped to level 0, one 58-bit prime instead of up to 10
limbs. Decryption is unchanged bit for bit while every plaintext coefficient stays below q_0 / 2
(the centred lifts mod Q_l and mod q_0 then agree): values below about q_0 / (2 Delta) = 2^17 at
the N16_H192 presets (``fhe_core.params.presets``); trained weights are below 10. The checkpoint
the job resumes from keeps the levels (resuming continues bit for bit).

**Galois keys**: the bootstrapping keys (CtS/StC BSGS steps, conjugation) plus rows * 2^k
(k < log2 columns), 2^k and -2^k (k < log2 rows), those the bootstrapping set lacks
(:func:`required_galois_elements`; 5 extra keys for N16_H192_FULL), and the relinearization key.
"""
from __future__ import annotations

import math
import struct
import threading
from collections.abc import Callable

import torch

from fhe_core import rlwe, serialize
from fhe_core.ckks import Ciphertext, Encoder, Plaintext, galois_elements
from fhe_core.ckks.bootstrapping import Bootstrapper, bootstrapping_galois_elements
from fhe_core.errors import LevelMismatchError, ParameterError, ParamsMismatchError, SerializationError
from fhe_core.params import Params
from fhe_core.rlwe.checks import mark_canonical
from fhe_core.rlwe.graphs import GraphedFunction, StreamFanOut
from ml.activations import DEPTH as CUBIC_DEPTH
from ml.activations import odd_cubic_times
from ml.rotsum import replicate, replicate_steps, rotate_sum, rotation_steps

from .config import HELRConfig
from .dataset import EncryptedDataset
from .schedule import MiniBatchSchedule
from .twin import nesterov_gammas

ITERATION_DEPTH = 1 + CUBIC_DEPTH + 1  # inner product, the cubic times z, the mask
PACK_DEPTH = 1                         # w + i v brought to scale Delta before bootstrapping
CHECKPOINT_MAGIC = b"HELRCKPT"
_CHECKPOINT_HEADER = struct.Struct("<8sII")  # magic, version, iteration
CHECKPOINT_VERSION = 1


class HELRTrainingError(ParameterError):
    """The trainer cannot run with what it was given (keys, data, schedule, levels)."""


def layout_rotation_steps(config: HELRConfig) -> list[int]:
    """Rotation steps the iterations use: sum over the features, sum and replicate over the samples."""
    layout = config.layout
    return list(dict.fromkeys(rotation_steps(layout.columns, layout.feature_stride) + rotation_steps(layout.rows)
                              + replicate_steps(layout.rows)))


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
        # on CUDA the refresh replays one captured bootstrap_pair (the same residues as the eager call,
        # without ~2000 launches from Python per bootstrap; the graph's pool keeps one bootstrap's buffers)
        on_cuda = torch.device(self.params.device).type == "cuda"
        self._refresher = self._bootstrapper.graphed() if on_cuda else self._bootstrapper
        self.evaluator = self._bootstrapper.evaluator
        # on CUDA the two halves of an iteration replay CUDA graphs too, one per level (module docstring,
        # "CUDA graphs"): an iteration issues ~5,000 operations from Python otherwise; elsewhere they just run
        self._terms_call, self._gradient_call = (GraphedFunction(fn, keep=self.evaluator.device_constants)
                                                 for fn in (self._terms, self._gradient))
        # the block's ciphertexts are independent until their sum: one stream each (parallel graph branches)
        self._fan_out = StreamFanOut(self._block_length(), self.params.device)
        self._encoder = Encoder(self.params)
        self._gammas = nesterov_gammas(config.lambda0, schedule.iterations)
        self._cubic = config.cubic
        self._masks: dict[tuple[int, float, float], object] = {}
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
        if any(len(block) != self._block_length() for block in data.blocks):
            raise HELRTrainingError(f"EncryptedHELRTrainer: every block must hold {self._block_length()} "
                                    f"ciphertexts, got {sorted({len(b) for b in data.blocks})}")
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

    def _block_length(self) -> int:
        """Ciphertexts per block of the dataset this trainer holds (all of a batch's, here)."""
        return self.config.ciphertexts_per_batch

    # ---- state -------------------------------------------------------------------------------------

    @property
    def weights(self) -> Ciphertext:
        """The encrypted w (replicated over the samples; the client decrypts it)."""
        return self._w

    @property
    def velocity(self) -> Ciphertext:
        """The encrypted Nesterov look-ahead v."""
        return self._v

    def for_client(self, ct: Ciphertext) -> Ciphertext:
        """``ct`` (w or v) as the client receives it: dropped to level 0, the smallest modulus,
        with the same decryption (module docstring)."""
        return self.evaluator.drop_level(ct, 0)

    def cancel(self) -> None:
        """Ask :meth:`run` to stop after the current iteration (thread-safe)."""
        self._cancel.set()

    def _zero(self) -> Ciphertext:
        shape = (2, self._top + 1, self.params.n)
        data = torch.zeros(shape, dtype=torch.int64, device=self.params.device)
        return mark_canonical(Ciphertext(data=data, level=self._top, params_id=self.params.params_id,
                                         scale=float(self.params.default_scale), slots=self.config.layout.slots))

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

        f >= 1 (every iteration but the first): f g is computed and relabelled to g for w'
        (relabelling divides the error by f too). f < 1 (the first iteration, f = 0.015): g and
        f g are spread from the same sums by two masks (values 1 and f), so that neither w's error
        is amplified by 1/f nor v's scale inflated by 1/f (module docstring)."""
        ev, f = self.evaluator, 1.0 - gamma
        if f >= 1.0:
            total, z_sum = self._block_terms(block, f, v)
            (g,) = self._gradient_call(total, z_sum, self._constant_term(f, total, z_sum))  # f g, ~Delta, l - 4
            w_next = ev.add(g.replace(scale=g.scale * f), self._at_scale(v, g.scale * f))
            v_next = ev.add(g, self._combine(v, f, w, gamma, g.scale))
        else:
            total, z_sum = self._block_terms(block, 1.0, v)
            sums = self._with_constant_term(total, z_sum, self._constant_term(1.0, total, z_sum))
            sums = rotate_sum(ev, sums, self.config.layout.rows)
            g, f_g = self._spread(sums, 1.0), self._spread(sums, f)
            w_next = ev.add(g, self._at_scale(v, g.scale))
            v_next = ev.add(f_g, self._combine(v, f, w, gamma, f_g.scale))
        return w_next, v_next

    def _block_terms(self, block, factor: float, v: Ciphertext) -> tuple[Ciphertext, Ciphertext]:
        """(sum of the cubic terms factor eta p'(z_i . v) z_i, sum of the z) over the batch (every rank's
        share, :meth:`_block_sums`): level l - 3 and level l. ``factor`` rides on f Z (module docstring);
        it changes every iteration, so it reaches the graph of :meth:`_terms` as data (a multiplier)."""
        ev = self.evaluator
        block = [z if z.level <= v.level else ev.drop_level(z, v.level) for z in block]  # cheaper f Z, sum Z
        q = float(self.params.q_primes[v.level])
        multiplier = self._multiplier(factor / self._cubic.mu, q, v.level)  # z holds mu z: f Z, scale kept
        return self._block_sums(self._terms_call(*block, multiplier, v))

    def _terms(self, *operands) -> tuple[Ciphertext, Ciphertext]:
        """:meth:`_block_terms` over this device's share, from its c ciphertexts z_i, the multiplier of
        f Z and v (``operands``, in that order). Both sums are mod Q, exact and in any order, so the
        terms of a batch split across ranks add up to these residues bit for bit. Its constants are
        fixed for a level (f comes as data): replayed from a CUDA graph on CUDA, the c ciphertexts on
        one stream each."""
        ev, layout, cubic = self.evaluator, self.config.layout, self._cubic
        *block, multiplier, v = operands

        def term(z: Ciphertext) -> Ciphertext:
            t = rotate_sum(ev, ev.rescale(ev.mul_relin(z, v)), layout.columns, layout.feature_stride)
            return odd_cubic_times(ev, t, ev.rescale(ev.mul(z, multiplier)), cubic)

        terms = self._fan_out.map(term, block)
        total = terms[0]
        for t in terms[1:]:
            total = ev.add(total, t)
        z_sum = block[0]
        for z in block[1:]:
            z_sum = ev.add(z_sum, z)
        return total, z_sum

    def _constant_term(self, factor: float, total: Ciphertext, z_sum: Ciphertext) -> Plaintext:
        """The multiplier of sum Z that gives factor * eta * c_0 * sum_i z_i at the scale of ``total``
        once rescaled (the cubic's constant part: module docstring)."""
        q = self.params.q_primes[z_sum.level]
        return self._multiplier(factor * self._cubic.constant / self._cubic.mu, total.scale * q / z_sum.scale,
                                z_sum.level)

    def _with_constant_term(self, total: Ciphertext, z_sum: Ciphertext, multiplier: Plaintext) -> Ciphertext:
        """factor * eta * sum_i p(z_i . v) z_i, not yet summed over the samples of each ciphertext: level l - 3."""
        ev = self.evaluator
        return ev.add(total, ev.rescale(ev.mul(z_sum, multiplier)))

    def _gradient(self, total: Ciphertext, z_sum: Ciphertext, multiplier: Plaintext) -> tuple[Ciphertext]:
        """f g (f >= 1) from :meth:`_block_terms` and the constant term's multiplier: summed over the
        samples, then spread by the mask of 1s (level l - 4). Its constants are fixed for a level:
        replayed from a CUDA graph on CUDA."""
        sums = rotate_sum(self.evaluator, self._with_constant_term(total, z_sum, multiplier), self.config.layout.rows)
        return (self._spread(sums, 1.0),)

    def _multiplier(self, value: float, scale: float, level: int) -> Plaintext:
        """``value`` in every slot at ``scale`` and ``level``: a product by it is the constant
        product, with the constant as data (a graph's input, refilled every iteration)."""
        data = self.evaluator.encode_constant(value, scale, level)
        return mark_canonical(Plaintext(data=data, level=level, scale=scale, params_id=self.params.params_id,
                                        slots=self.config.layout.slots))

    def _block_sums(self, sums: tuple[Ciphertext, Ciphertext]) -> tuple[Ciphertext, Ciphertext]:
        """The sums of :meth:`_terms` over the whole batch: here the block is whole (one device);
        ``apps.logreg.parallel`` all-reduces the shares of its ranks."""
        return sums

    def _spread(self, sums: Ciphertext, value: float) -> Ciphertext:
        """value * (sample 0 of each feature of ``sums``) in every sample, at scale ~Delta: level - 1."""
        ev = self.evaluator
        return replicate(ev, ev.rescale(ev.mul(sums, self._mask(sums, value))), self.config.layout.rows)

    def _mask(self, sums: Ciphertext, value: float):
        """``value`` at sample 0 of every feature, encoded at the scale (rounded to 24 bits, so
        that it is cached and reused) that gives the product, once rescaled, the default scale
        Delta: keeps the scales from drifting across iterations."""
        q = self.params.q_primes[sums.level]
        mantissa, exponent = math.frexp(self.params.default_scale * q / sums.scale)
        scale = math.ldexp(round(mantissa * 2 ** 24), exponent - 24)
        key = (sums.level, scale, value)
        if key not in self._masks:
            values = self.config.layout.row_mask(0, value)
            self._masks[key] = self._encoder.encode(values, level=sums.level, scale=scale, slots=sums.slots)
        return self._masks[key]

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
        delta = float(self.params.default_scale)
        self.bootstraps += 1
        w, v = self._refresher.bootstrap_pair(self._at_scale(w, delta), self._at_scale(v, delta))  # ~Delta (1e-13)
        # labelled Delta exactly (an error of ~2^-50 relative): every bootstrap then starts the next
        # iterations from the same scales, so their graphs are captured once (module docstring)
        return w.replace(scale=delta), v.replace(scale=delta)

    # ---- scoring -----------------------------------------------------------------------------------

    def score(self, features: list[Ciphertext]) -> list[Ciphertext]:
        """Margins x_i . w of samples the client encrypted with :meth:`HELRClient.encrypt_features`
        under the encrypted model: per ciphertext one product with w, one rescale (1 level: w
        must be at level >= 1, as it always is after a step) and log2(columns) rotations; every
        slot of sample i then holds its margin."""
        ev, layout = self.evaluator, self.config.layout
        for ct in features:
            if not isinstance(ct, Ciphertext) or ct.params_id != self.params.params_id or ct.slots != layout.slots:
                raise HELRTrainingError("score: expected ciphertexts of encrypt_features for these parameters")
        return [rotate_sum(ev, ev.rescale(ev.mul_relin(ct, self._w)), layout.columns, layout.feature_stride)
                for ct in features]

    # ---- checkpoints -------------------------------------------------------------------------------

    def checkpoint(self) -> bytes:
        """The state after :attr:`iteration` steps: header (magic, version, iteration) + w, v
        (CKKS ciphertext records). :meth:`resume` continues bit for bit."""
        return self._checkpoint_bytes(self._w, self._v, packed=False)

    def client_checkpoint(self) -> bytes:
        """:meth:`checkpoint` as its owner downloads it to follow training: w and v at level 0
        (:meth:`for_client`), residues at their primes' widths; read with :func:`read_checkpoint`,
        not resumable."""
        return self._checkpoint_bytes(self.for_client(self._w), self.for_client(self._v), packed=True)

    def _checkpoint_bytes(self, w: Ciphertext, v: Ciphertext, *, packed: bool) -> bytes:
        header = _CHECKPOINT_HEADER.pack(CHECKPOINT_MAGIC, CHECKPOINT_VERSION, self.iteration)
        return header + serialize.dumps_many([w, v], packed=packed)

    @classmethod
    def resume(cls, config: HELRConfig, keys: rlwe.EvalKeySet, dataset: EncryptedDataset,
               schedule: MiniBatchSchedule, checkpoint: bytes, *, params: Params | None = None) -> EncryptedHELRTrainer:
        """A trainer in the state of ``checkpoint`` (same config, keys, dataset and schedule)."""
        trainer = cls(config, keys, dataset, schedule, params=params)
        iteration, w, v = read_checkpoint(checkpoint, trainer.params)
        if iteration > schedule.iterations:
            raise SerializationError(f"resume: checkpoint at iteration {iteration} beyond the schedule's "
                                     f"{schedule.iterations}")
        for ct in (w, v):
            if ct.slots != config.layout.slots or ct.degree != 1 or not PACK_DEPTH <= ct.level <= trainer._top \
                    or ct.level != w.level:
                raise SerializationError(f"resume: the checkpoint's w and v must be degree 1 with "
                                         f"{config.layout.slots} slots at one level in [{PACK_DEPTH}, {trainer._top}]; "
                                         f"got {w!r} and {v!r}")
        trainer.iteration, trainer._w, trainer._v = iteration, w, v
        trainer.bootstraps = bootstraps_after(config, iteration)
        return trainer


def bootstraps_after(config: HELRConfig, iterations: int) -> int:
    """How many bootstraps the first ``iterations`` steps run: w and v start at the output level,
    each step uses ITERATION_DEPTH levels and bootstraps first when fewer than ITERATION_DEPTH +
    PACK_DEPTH are left (back to the output level). A checkpoint need not carry the count."""
    top = config.bootstrapping_parameters.output_level
    level, count = top, 0
    for _ in range(iterations):
        if level < ITERATION_DEPTH + PACK_DEPTH:
            level, count = top, count + 1
        level -= ITERATION_DEPTH
    return count


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
    return config.bootstrapping_parameters.params(device=str(cts[0].device), allow_insecure=config.allow_insecure)


__all__ = ["EncryptedHELRTrainer", "HELRTrainingError", "ITERATION_DEPTH", "PACK_DEPTH", "bootstraps_after",
           "layout_rotation_steps", "required_galois_elements", "read_checkpoint"]
