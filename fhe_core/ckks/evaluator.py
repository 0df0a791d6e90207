"""The CKKS evaluator: homomorphic arithmetic on :class:`~fhe_core.ckks.ciphertext.Ciphertext`.

Conventions (docs/ARCHITECTURE.md, "Objects carry metadata"; Lattigo's evaluator):

* Every public operation validates its operands in one place first (params_id, device, NTT
  domain, degree, level, slots, scale) and raises a typed error whose message starts with the
  operation's name: ``ScaleMismatchError("add: ...")``, ``MissingKeyError("rotate: ...")``.
* Operations return new objects; no operand is modified.
* **Levels.** Binary operations work at the lower of the operands' levels: the higher operand is
  dropped first (a level drop keeps the first limbs, no noise). Only :meth:`Evaluator.rescale`
  (and :meth:`Evaluator.set_scale` and :meth:`Evaluator.inner_product`, which call it) consumes
  a level.
* **Scales** are tracked as floats and combined exactly as the algebra says: a product multiplies
  them, a rescale divides by the dropped prime q_l. Additions require scales equal to a relative
  1e-9 (the float rounding of a chain of products and rescales is ~1e-16 per step) and keep the
  first operand's scale. After a rescale the scale is 2^80 / q_l, about 1e-7 away from 2^40:
  align explicitly with :meth:`Evaluator.set_scale` (or encode at that scale).
* **Scale budget.** A result at level l must leave room for its message below Q_l: the message
  m = scale * z decrypts correctly only while |m| < Q_l / 2. Every operation that raises the
  scale or lowers the level (products, level drops, additions at a lower level) refuses a result
  with log2(scale) + MESSAGE_BITS + 1 > log2(Q_l) (ScaleOverflowError naming the operation):
  even a message |z| < 2^MESSAGE_BITS = 2 would wrap around. This catches what is certainly
  wrong (a product at level 0, squarings without rescale); larger messages need more headroom,
  which the circuits size themselves (the presets' q_0 is 20 bits above the scale).
* **Checks once.** The public methods check their operands (and the canonical residues of a
  ciphertext object the first time, see :mod:`fhe_core.rlwe.checks`) and then call unchecked
  helpers: no operand is checked twice in one operation.
* **Keys.** The evaluator holds an :class:`fhe_core.rlwe.EvalKeySet` (relinearization and Galois
  keys), never a secret key. :meth:`Evaluator.rotation_steps_for_sum` and
  :func:`galois_elements` say which keys a circuit needs.

Tensor shapes: a ciphertext at level l is ``[d+1, l+1, N]`` int64, NTT domain (d = 1, or 2 after
:meth:`Evaluator.tensor` and before relinearization); a plaintext ``[l+1, N]``.
"""
from __future__ import annotations

import contextlib
import itertools
import math
import numbers
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

import torch

from fhe_core import ops, rlwe
from fhe_core.ckks.ciphertext import (
    Ciphertext, ScaleMismatchError, SlotMismatchError, check_ckks_params, rlwe_context,
)
from fhe_core.ckks.plaintext import Plaintext
from fhe_core.ops import KernelPlan
from fhe_core.errors import (
    DomainMismatchError,
    EncodingError,
    LevelMismatchError,
    MissingKeyError,
    ParameterError,
    ParamsMismatchError,
    ScaleOverflowError,
)
from fhe_core.params import Params
from fhe_core.rlwe.checks import canonical_results, check_canonical, check_ciphertext
from fhe_core.rlwe.keys import check_switching_key
from fhe_core.rlwe import switching
from fhe_core.ring import RNSBasis, primitive_root_2n, shoup_constants

SCALE_TOLERANCE = 1e-9  # relative difference under which two scales count as equal
MESSAGE_BITS = 1  # a result must fit messages |z| < 2^MESSAGE_BITS below Q_l / 2 (module docstring)
MAX_COMBINATION_TERMS = 16  # ciphertexts one linear_combination pass reads (ops.linear_combination)
CONSTANT_CACHE_SIZE = 4096  # constants kept on the device per evaluator (see Evaluator._constant_halves)
Operand = Ciphertext | Plaintext | int | float | complex


def galois_elements(n: int, steps: Iterable[int] = (), *, conjugate: bool = False) -> list[int]:
    """The Galois elements 5^r mod 2N for the left-rotation ``steps`` (and 2N-1 for conjugation)
    of a ring of degree ``n``: what to pass to :func:`fhe_core.rlwe.gen_eval_keys`."""
    out = [rlwe.galois_element_for_rotation(r, n) for r in steps]
    if conjugate:
        out.append(rlwe.galois_element_for_conjugation(n))
    return list(dict.fromkeys(out))


def _step(name: str, device: torch.device):
    """An NVTX range named after the step on CUDA (profiles read as the algorithm), else nothing."""
    return torch.cuda.nvtx.range(name) if device.type == "cuda" else contextlib.nullcontext()


def _is_scalar(x) -> bool:
    return isinstance(x, numbers.Number) and not isinstance(x, bool)


def _round_half_up(x: float, scale: float) -> int:
    """floor(x * scale + 1/2) computed exactly (the encoder's rounding)."""
    return math.floor(Fraction(x) * Fraction(scale) + Fraction(1, 2))


def _gaussian_integer(value: complex) -> tuple[int, int] | None:
    """(re, im) when both parts of ``value`` are integers, else None."""
    if value.real.is_integer() and value.imag.is_integer():
        return int(value.real), int(value.imag)
    return None


@dataclass(frozen=True, eq=False)
class _RescaleTables:
    """Constants of the rescale from level l to l-1 (built once per level)."""

    q_last: int                 # q_l
    last: RNSBasis              # the basis of q_l alone (a view of Q's tables)
    q_last_inv: torch.Tensor    # [l] q_l^-1 mod q_i
    q_last_inv_shoup: torch.Tensor


class Evaluator:
    """Homomorphic operations on CKKS ciphertexts of one parameter set.

    Args:
        params: the parameter set (its device is where every operand must live).
        keys: the session's evaluation keys (relinearization, Galois), or None for an evaluator
            that only adds, multiplies by plaintexts and constants, and rescales.

    Not safe for concurrent use from several threads (it caches per-level tables lazily); evaluators of their
    own, even of one parameter set and with different plans, run side by side.

    ``plan``: the kernel plan of its context (:class:`fhe_core.ops.KernelPlan`; default: resolved for the device,
    N and primes). Every plan gives the same residues: the tests compare the default with
    ``KernelPlan.reference()``.
    """

    def __init__(self, params: Params, keys: rlwe.EvalKeySet | None = None, *, plan: KernelPlan | None = None):
        check_ckks_params(params, "Evaluator")
        if keys is not None:
            if not isinstance(keys, rlwe.EvalKeySet):
                raise ParameterError(f"Evaluator: keys must be an EvalKeySet or None, got {type(keys).__name__}")
            if keys.params_id != params.params_id:
                raise ParamsMismatchError(f"Evaluator: the key set belongs to params {keys.params_id[:12]!r}, "
                                          f"not {params.params_id[:12]!r}")
        self.params = params
        self.keys = keys
        self._ctx = rlwe_context(params, plan)
        self._rescale_tables: dict[int, _RescaleTables] = {}
        self._constant_cache: dict[tuple[int, int, int], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        self._table_cache: dict[tuple, torch.Tensor] = {}  # weights of linear_combination (see _halves_table)
        self._sqrt_minus_one = [pow(primitive_root_2n(q, params.n), params.n // 2, q) for q in params.q_primes]
        self._log_q = list(itertools.accumulate(math.log2(q) for q in params.q_primes))  # log2 Q_l by level
        # the largest scale a result at each level may have ("Scale budget"; finite, so inf is refused)
        self._max_scale = [2.0 ** e if e < 1024 else sys.float_info.max
                           for e in (log_q - MESSAGE_BITS - 1 for log_q in self._log_q)]

    def __repr__(self) -> str:
        return f"ckks.Evaluator({self.params!r}, keys={self.keys!r}, plan={self._ctx.plan})"

    @property
    def context(self) -> rlwe.RLWEContext:
        """The RLWE context this evaluator computes in: its tables and kernel plan."""
        return self._ctx

    @property
    def plan(self) -> KernelPlan:
        """The kernel plan of its context: which implementation each step runs."""
        return self._ctx.plan

    # ---- validation ------------------------------------------------------------------------------

    def _check_ct(self, ct, op: str, *, degree: int | None = 1) -> int:
        """Validate a ciphertext operand (type, params_id, device, domain, degree, shape; residues
        once per object); its level."""
        if not isinstance(ct, Ciphertext):
            raise ParameterError(f"{op}: expected a ckks.Ciphertext, got {type(ct).__name__}")
        level = check_ciphertext(self._ctx, ct, op, degree=degree)
        check_canonical(self._ctx, ct, level, op)
        return level

    def _check_pt(self, pt: Plaintext, op: str) -> None:
        if pt.params_id != self.params.params_id:
            raise ParamsMismatchError(f"{op}: the plaintext belongs to params {pt.params_id[:12]!r}, "
                                      f"the evaluator to {self.params.params_id[:12]!r}")
        if not pt.is_ntt:
            raise DomainMismatchError(f"{op}: the plaintext must be in the NTT domain")
        if not 0 <= pt.level <= self.params.max_level:
            raise LevelMismatchError(f"{op}: plaintext level {pt.level} outside [0, L = {self.params.max_level}]")
        if pt.data.device != self._ctx.device or pt.n != self.params.n:
            raise ParameterError(f"{op}: the plaintext ({tuple(pt.data.shape)} on {pt.data.device}) does not "
                                 f"fit N={self.params.n} on {self._ctx.device}")
        check_canonical(self._ctx, pt, pt.level, op, "the plaintext")

    @staticmethod
    def _check_slots(a: Ciphertext, b: Ciphertext | Plaintext, op: str) -> None:
        if a.slots != b.slots:
            raise SlotMismatchError(f"{op}: the operands pack {a.slots} and {b.slots} slots")

    @staticmethod
    def _check_scales(a: float, b: float, op: str) -> None:
        if abs(a - b) > SCALE_TOLERANCE * max(a, b):
            raise ScaleMismatchError(f"{op}: scales differ: {a!r} vs {b!r} (2^{math.log2(a):.12f} vs "
                                     f"2^{math.log2(b):.12f}, relative difference {abs(a - b) / max(a, b):.2e} > "
                                     f"{SCALE_TOLERANCE:g}); align them with set_scale (a rescale leaves 2^80/q_l, "
                                     f"not exactly 2^40)")

    def _check_scale_fits(self, scale: float, level: int, op: str) -> float:
        """``scale`` if a result at ``level`` with it can still be decrypted (module docstring,
        "Scale budget"); ScaleOverflowError naming ``op`` otherwise."""
        if scale <= self._max_scale[level]:  # (false for inf and nan too)
            return scale
        log_scale = math.log2(scale) if math.isfinite(scale) and scale > 0 else math.inf
        raise ScaleOverflowError(f"{op}: the result's scale 2^{log_scale:.2f} leaves no room for a message below "
                                 f"Q_{level} ~ 2^{self._log_q[level]:.2f} at level {level} (needs log2(scale) + "
                                 f"{MESSAGE_BITS + 1} <= log2(Q_{level})); rescale the operands first, or work at a "
                                 "higher level")
        return scale

    def _binary(self, a: Ciphertext, b: Ciphertext | Plaintext, op: str,
                degree: int | None = None) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Validate a ct-ct or ct-pt pair (ciphertexts of ``degree``, if given); return both data at
        the common (lower) level and that level."""
        level = self._check_ct(a, op, degree=degree)
        if isinstance(b, Ciphertext):
            other = self._check_ct(b, op, degree=degree)
        elif isinstance(b, Plaintext):
            self._check_pt(b, op)
            other = b.level
        else:
            raise ParameterError(f"{op}: expected a ckks.Ciphertext, Plaintext or number, got {type(b).__name__}")
        self._check_slots(a, b, op)
        level = min(level, other)
        return _limbs(a.data, level), _limbs(b.data, level), level

    def _keys(self, op: str) -> rlwe.EvalKeySet:
        if self.keys is None:
            raise MissingKeyError(f"{op}: this evaluator was built without evaluation keys")
        return self.keys

    # ---- levels and scales -----------------------------------------------------------------------

    @canonical_results
    def drop_level(self, ct: Ciphertext, level: int) -> Ciphertext:
        """The same message at the lower ``level`` (keeps the first level+1 limbs).

        ct: ``[d+1, l+1, N]``; returns ``[d+1, level+1, N]``. Scale unchanged, no noise, no key.
        """
        op = "drop_level"
        current = self._check_ct(ct, op, degree=None)
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= current:
            raise LevelMismatchError(f"{op}: target level must be an int in [0, {current}], got {level!r}")
        self._check_scale_fits(ct.scale, level, op)
        return ct.replace(data=ct.data[:, :level + 1].clone(memory_format=torch.contiguous_format), level=level)

    @canonical_results
    def rescale(self, ct: Ciphertext) -> Ciphertext:
        """Divide by the last prime q_l with rounding: c -> round(c / q_l) over Q_(l-1).

        INTT of the last limb, its centred representative r in (-q_l/2, q_l/2) lifted to every
        q_i < q_l (ops.center_lift), then c_i' = (c_i - NTT(r)) * q_l^-1 mod q_i in one fused pass,
        batched over components and limbs. ct: ``[d+1, l+1, N]`` NTT domain, l >= 1 (any degree d). Returns
        ``[d+1, l, N]`` at level l-1 with scale / q_l; adds the rounding error e_0 + e_1 s
        (+ e_2 s^2 for d = 2), |e_i| <= 1/2 per coefficient.
        Consumes one level; needs no key.
        """
        op = "rescale"
        level = self._check_ct(ct, op, degree=None)
        if level == 0:
            raise LevelMismatchError(f"{op}: the ciphertext is at level 0, there is no prime left to divide by")
        return self._rescale(ct, level)

    def _rescale(self, ct: Ciphertext, level: int) -> Ciphertext:
        """:meth:`rescale` of a checked ciphertext at ``level`` >= 1 (scale / q_l over Q_(l-1):
        the ratio to the modulus is kept, so the scale budget holds)."""
        t = self._rescale_constants(level)
        lower = self._ctx.q_at(level - 1)
        with _step("rescale", self._ctx.device):
            data = ct.data
            if self._ctx.plan.fused_circuit and data.stride(-1) == 1 and data.stride(-2) == data.shape[-1]:
                # the last limbs read in place, (c - NTT(r)) q_l^-1 in the NTT's last store, every component at once
                last = t.last.intt(data[:, level:level + 1])
                lift = ops.center_lift(last, t.q_last, lower.moduli)
                out = ops.mod_down_ntt(lift, data[:, :level], 0, t.q_last_inv, t.q_last_inv_shoup, lower.moduli,
                                       lower.ntt_table, plan=lower.plan, out=lift)
                return ct.replace(data=out, level=level - 1, scale=ct.scale / t.q_last)
            last = t.last.intt(ct.data[:, level:level + 1].contiguous())
            correction = lower.ntt(ops.center_lift(last, t.q_last, lower.moduli))  # [d+1, l, N]: [c_l] centred
            out = torch.empty_like(correction)
            for c in range(ct.data.shape[0]):  # per component: contiguous views of the lower limbs, no copy
                ops.sub_mul_const(ct.data[c, :level], correction[c], t.q_last_inv, t.q_last_inv_shoup, lower.moduli,
                                  out=out[c])
        return ct.replace(data=out, level=level - 1, scale=ct.scale / t.q_last)

    @canonical_results
    def set_scale(self, ct: Ciphertext, scale: float) -> Ciphertext:
        """The same message at (almost exactly) ``scale``, to align it with another operand.

        Multiplies by the integer R = round(scale * q_l / ct.scale) (no rounding error: an
        integer constant) and rescales by q_l. The result's scale is ct.scale * R / q_l, within
        a relative 1/(2R) of ``scale``, far inside the 1e-9 that additions accept.
        ct: ``[d+1, l+1, N]``, l >= 1; returns ``[d+1, l, N]``. Consumes one level; needs no key.
        """
        op = "set_scale"
        level = self._check_ct(ct, op, degree=None)
        if level == 0:
            raise LevelMismatchError(f"{op}: the ciphertext is at level 0, there is no prime left to divide by")
        try:
            scale = float(scale)
        except (TypeError, ValueError):
            raise ParameterError(f"{op}: the scale must be a float, got {scale!r}") from None
        # finite and positive first: Fraction() of inf or nan raises, and a ratio >= 2^1024 has no float
        ratio = round(Fraction(scale) * self.params.q_primes[level] / Fraction(ct.scale)) \
            if math.isfinite(scale) and scale > 0 else 0
        if not 1 <= ratio < 2 ** 1023:
            raise ParameterError(f"{op}: cannot reach scale {scale} from 2^{math.log2(ct.scale):.2f} at level {level}")
        return self._rescale(self._scaled(ct, level, complex(1), float(ratio), op), level)

    def _rescale_constants(self, level: int) -> _RescaleTables:
        if level not in self._rescale_tables:
            primes = self.params.q_primes[:level]
            q_last = self.params.q_primes[level]
            inv, inv_shoup = shoup_constants([pow(q_last, -1, q) for q in primes], primes, self._ctx.device)
            last = self._ctx.q_at(level).rows(level, level + 1)
            self._rescale_tables[level] = _RescaleTables(q_last, last, inv, inv_shoup)
        return self._rescale_tables[level]

    # ---- constants -------------------------------------------------------------------------------

    def device_constants(self) -> list[torch.Tensor]:
        """Every constant this evaluator caches on the device now. The caches are bounded (they
        clear when full); a CUDA graph that read a constant by address keeps this list alive
        (``fhe_core.rlwe.graphs``), so a cleared constant is never freed under it."""
        return [t for entry in self._constant_cache.values() for t in entry] + list(self._table_cache.values())

    def encode_constant(self, value: complex, scale: float, level: int, *, op: str = "encode_constant") -> torch.Tensor:
        """The plaintext of ``value`` in every slot at ``scale``: re + im X^(N/2), each part
        rounded as the encoder rounds (floor(scale * x + 1/2), exact), since
        zeta^(5^j N/2) = i for every slot j. Returns ``[l+1, N]`` int64, NTT domain. EncodingError
        (naming ``op``) if it does not fit in Q_level."""
        return self._constant_ntt(*self._rounded_constant(value, scale, level, op), level)

    def _rounded_constant(self, value: complex, scale: float, level: int, op: str) -> tuple[int, int]:
        """(re, im): the integer coefficients of X^0 and X^(N/2) of the constant's plaintext."""
        if not (math.isfinite(value.real) and math.isfinite(value.imag)):
            raise EncodingError(f"{op}: the constant must be finite, got {value}")
        re, im = _round_half_up(value.real, scale), _round_half_up(value.imag, scale)
        if 2 * max(abs(re), abs(im)) + 1 >= self._ctx.q_at(level).modulus:
            raise EncodingError(f"{op}: the constant {value} at scale 2^{math.log2(scale):.1f} "
                                f"does not fit in Q_{level}")
        return re, im

    def _constant_ntt(self, re: int, im: int, level: int) -> torch.Tensor:
        """NTT(re + im X^(N/2)) over Q_level, ``[l+1, N]``, filled from :meth:`_constant_halves`
        (no transform, no host-to-device copy once cached)."""
        consts = self._constant_halves(re, im, level)[0]
        return consts.view(level + 1, 2, 1).expand(-1, -1, self.params.n // 2).reshape(level + 1, self.params.n)

    def _constant_halves(self, re: int, im: int, level: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The NTT-domain values of the constant plaintext re + im X^(N/2): X^(N/2) is psi^(N/2) =: I
        (a square root of -1 mod q) at the point psi^(2 brv(k) + 1) of NTT slot k when k < N/2 and
        -I when k >= N/2 (brv(k) is odd exactly then), so the transform takes two values per limb,
        re + im I and re - im I. Returns (values, Shoup constants, moduli), ``[2 (l+1)]``,
        ``[2 (l+1)]`` and ``[2 (l+1), 4]``, in rows (limb, half): a multiplication by the constant
        is one Shoup product per row of a ``[..., 2 (l+1), N/2]`` view. Cached on the device
        (bounded): polynomial evaluation and EvalMod use the same constants at the same levels on
        every call, and each small host-to-device copy costs ~0.1 ms of host time."""
        key = (re, im, level)
        entry = self._constant_cache.get(key)
        if entry is None:
            if len(self._constant_cache) >= CONSTANT_CACHE_SIZE:
                self._constant_cache.clear()
            primes = self.params.q_primes[:level + 1]
            values = []
            for q, i_q in zip(primes, self._sqrt_minus_one[:level + 1]):
                values += [(re + im * i_q) % q, (re - im * i_q) % q]
            halves = [q for q in primes for _ in range(2)]
            consts, consts_shoup = shoup_constants(values, halves, self._ctx.device)
            moduli = self._ctx.q_at(level).moduli.repeat_interleave(2, dim=0)
            entry = self._constant_cache[key] = (consts, consts_shoup, moduli)
        return entry

    # ---- linear combinations (one pass) ----------------------------------------------------------

    @canonical_results
    def linear_combination(self, terms, level: int, constant: tuple[complex, int] | None = None, *,
                           constant_components: int = 1, out: torch.Tensor | None = None,
                           op: str = "linear_combination") -> Ciphertext:
        """sum_k sign_k * value_k * a_k (+ sign * constant) at ``level``, in one pass.

        terms: ``[(a_k, value_k, constant_scale_k, sign_k)]``, 1 to 16 ciphertexts of one degree and
        slot count at levels >= ``level``, each multiplied by its real or complex constant encoded at
        constant_scale_k and added (sign +1) or subtracted (-1; the first term's sign must be +1);
        constant: (value, sign) added to c_0 at the result's scale, or None. The result equals
        ``out = mul(drop_level(a_0, level), value_0, constant_scale=cs_0)``, then
        ``add``/``sub`` of each further such product, then of the constant, residue for residue and
        scale for scale (a_0.scale * cs_0), with the same checks; but the operands are read once (a
        ciphertext above ``level`` in place) and the sum is written once (ops.linear_combination).
        Consumes no level; needs no key.

        For the circuits built on the evaluator (the bootstrapping pair, CoeffsToSlots): ``constant_components``
        (the constant added to the first that many ``[l+1, N]`` blocks of c_0: a pair's flat view has 2),
        ``out`` (``[d+1, level+1, N]`` of contiguous ``[level+1, N]`` blocks to write into, e.g. one ciphertext
        of a pair's tensor, not overlapping the terms) and ``op`` (the operation its errors name).
        """
        if not 1 <= len(terms) <= MAX_COMBINATION_TERMS:
            raise ParameterError(f"{op}: 1 to {MAX_COMBINATION_TERMS} terms, got {len(terms)}")
        first = terms[0][0]
        scale, integers, data = None, [], []
        for a, value, constant_scale, sign in terms:
            current = self._check_ct(a, op, degree=None)
            if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= current:
                raise LevelMismatchError(f"{op}: target level must be an int in [0, {current}], got {level!r}")
            if a.degree != first.degree:
                raise ParameterError(f"{op}: degrees differ ({first.degree} vs {a.degree})")
            self._check_slots(first, a, op)
            if sign not in (1, -1) or (scale is None and sign != 1):
                raise ParameterError(f"{op}: signs must be +1 or -1, the first +1; got {sign!r}")
            if current > level:
                self._check_scale_fits(a.scale, level, op)
            term_scale = self._scaled_scale(a.scale, constant_scale, level, op)
            if scale is None:
                scale = term_scale
            else:
                self._check_scales(scale, term_scale, op)
            re, im = self._rounded_constant(self._scalar(value, op), float(constant_scale), level, op)
            integers.append((sign * re, sign * im))
            rows = a.data
            data.append(rows if rows.stride(-1) == 1 and rows.stride(-2) == rows.shape[-1] else rows.contiguous())
        self._check_scale_fits(scale, level, op)
        constant_values = None
        if constant is not None:
            value, sign = constant
            re, im = self._rounded_constant(self._scalar(value, op), scale, level, op)
            constant_values = self._halves_table(((sign * re, sign * im),), level)[0]
        weights = self._halves_table(tuple(integers), level)
        if out is None:
            out = torch.empty((first.data.shape[0], level + 1, self.params.n), dtype=torch.int64,
                              device=self._ctx.device)
        ops.linear_combination(data, weights, self._ctx.q_at(level).moduli, out=out, constant=constant_values,
                               constant_components=constant_components)
        return first.replace(data=out, level=level, scale=scale)

    def _scaled_scale(self, scale: float, constant_scale, level: int, op: str) -> float:
        """The scale of a ciphertext at ``scale`` times a constant at ``constant_scale`` (checked as
        :meth:`_scaled`)."""
        try:
            constant_scale = float(constant_scale)
        except (TypeError, ValueError):
            raise ParameterError(f"{op}: constant_scale must be a finite float >= 1, got {constant_scale!r}") from None
        if not (math.isfinite(constant_scale) and constant_scale >= 1):
            raise ParameterError(f"{op}: constant_scale must be a finite float >= 1, got {constant_scale}")
        return self._check_scale_fits(scale * constant_scale, level, op)

    def _halves_table(self, integers: tuple[tuple[int, int], ...], level: int) -> torch.Tensor:
        """``[K, l+1, 2]``: the NTT-domain values of the constants re + im X^(N/2) on the two halves of
        the NTT slots (see :meth:`_constant_halves`), canonical; cached on the device per (constants, level)."""
        key = (integers, level)
        table = self._table_cache.get(key)
        if table is None:
            if len(self._table_cache) >= CONSTANT_CACHE_SIZE:
                self._table_cache.clear()
            rows = [[[(re + im * i_q) % q, (re - im * i_q) % q]
                     for q, i_q in zip(self.params.q_primes[:level + 1], self._sqrt_minus_one)]
                    for re, im in integers]
            table = self._table_cache[key] = torch.tensor(rows, dtype=torch.int64).to(self._ctx.device)
        return table

    def _scalar(self, value, op: str) -> complex:
        try:
            return complex(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ParameterError(f"{op}: cannot use {value!r} as a constant ({exc})") from None

    # ---- addition, subtraction, negation ---------------------------------------------------------

    @canonical_results
    def add(self, a: Ciphertext, b: Operand) -> Ciphertext:
        """a + b for b a ciphertext, a plaintext or a real/complex constant (added to every slot).

        a, b at any levels (the result is at the lower one) and equal degree (ct-ct). Scales must
        match to a relative 1e-9 (ct-ct, ct-pt); a constant is encoded at a's scale. The result
        keeps a's scale. Consumes no level; needs no key.
        """
        return self._add_or_sub(a, b, "add", ops.add)

    @canonical_results
    def sub(self, a: Ciphertext, b: Operand) -> Ciphertext:
        """a - b; operands, levels and scales as for :meth:`add`."""
        return self._add_or_sub(a, b, "sub", ops.sub)

    @canonical_results
    def negate(self, a: Ciphertext) -> Ciphertext:
        """-a: ``[d+1, l+1, N]`` -> same shape, level and scale. Consumes no level; needs no key."""
        level = self._check_ct(a, "negate", degree=None)
        return a.replace(data=ops.neg(_limbs(a.data, level), self._ctx.q_at(level).moduli))

    def _add_or_sub(self, a: Ciphertext, b: Operand, op: str, fn) -> Ciphertext:
        if _is_scalar(b):
            level = self._check_ct(a, op, degree=None)
            constant = self.encode_constant(self._scalar(b, op), a.scale, level, op=op)
            return self._combine_c0(a, _limbs(a.data, level), constant, level, fn)
        a_data, b_data, level = self._binary(a, b, op)
        if isinstance(b, Ciphertext) and a.degree != b.degree:
            raise ParameterError(f"{op}: degrees differ ({a.degree} vs {b.degree}); relinearize first")
        self._check_scales(a.scale, b.scale, op)
        self._check_scale_fits(a.scale, level, op)
        if isinstance(b, Plaintext):
            return self._combine_c0(a, a_data, b_data, level, fn)
        return a.replace(data=fn(a_data, b_data, self._ctx.q_at(level).moduli), level=level)

    def _combine_c0(self, a: Ciphertext, a_data: torch.Tensor, m: torch.Tensor, level: int, fn) -> Ciphertext:
        """(fn(c_0, m), c_1, ...): adds or subtracts a plaintext polynomial ``m`` ``[l+1, N]``."""
        out = torch.empty_like(a_data)
        out[1:].copy_(a_data[1:])  # only the other components are copied: c_0 is written once, by fn
        fn(a_data[0], m, self._ctx.q_at(level).moduli, out=out[0])
        return a.replace(data=out, level=level)

    # ---- multiplication --------------------------------------------------------------------------

    @canonical_results
    def mul(self, a: Ciphertext, b: Operand, *, constant_scale: float | None = None) -> Ciphertext:
        """a * b for b a ciphertext (tensor product + relinearization, see :meth:`mul_relin`),
        a plaintext, or a real/complex constant.

        Plaintext: slot-wise product, scale a.scale * b.scale, at the lower level.
        Constant: an integer (or Gaussian integer) is multiplied at scale 1, so neither level nor
        scale changes. Any other constant is encoded at ``constant_scale`` (default q_l, the
        prime the next :meth:`rescale` divides by, so that rescaling restores a's scale exactly);
        the result has scale a.scale * constant_scale. Consumes no level itself (rescale does).
        Needs the relinearization key for ct-ct only. A result whose scale leaves no room below
        Q_l is refused (ScaleOverflowError, see "Scale budget" in the module docstring).
        """
        if isinstance(b, Ciphertext):
            return self._mul_relin(a, b, "mul")
        if _is_scalar(b):
            return self._mul_scalar(a, self._scalar(b, "mul"), constant_scale, "mul")
        a_data, b_data, level = self._binary(a, b, "mul")
        scale = self._check_scale_fits(a.scale * b.scale, level, "mul")
        return a.replace(data=ops.mul(a_data, b_data, self._ctx.q_at(level).moduli), level=level, scale=scale)

    def _mul_scalar(self, a: Ciphertext, value: complex, constant_scale: float | None, op: str) -> Ciphertext:
        level = self._check_ct(a, op, degree=None)
        if constant_scale is None:
            if _gaussian_integer(value) is not None:
                constant_scale = 1.0
            elif level == 0:
                raise LevelMismatchError(f"{op}: a non-integer constant is encoded at scale q_l and needs a "
                                         f"level to rescale; the ciphertext is at level 0 (pass constant_scale)")
            else:
                constant_scale = float(self.params.q_primes[level])
        return self._scaled(a, level, value, constant_scale, op)

    def _scaled(self, a: Ciphertext, level: int, value: complex, constant_scale: float, op: str) -> Ciphertext:
        """a (checked, at ``level``) times ``value`` encoded at ``constant_scale``."""
        scale = self._scaled_scale(a.scale, constant_scale, level, op)
        constant_scale = float(constant_scale)  # valid: _scaled_scale checked it
        re, im = self._rounded_constant(value, constant_scale, level, op)
        data = _limbs(a.data, level)
        halves = data.view(*data.shape[:-2], 2 * (level + 1), self.params.n // 2)  # rows: (limb, half)
        consts, consts_shoup, moduli = self._constant_halves(re, im, level)
        data = ops.mul_const(halves, consts, consts_shoup, moduli).view(data.shape)
        return a.replace(data=data, scale=scale)

    @canonical_results
    def tensor(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """The tensor product (d0, d1, d2) = (a0 b0, a0 b1 + a1 b0, a1 b1), decrypting under
        (1, s, s^2) to the product of the messages.

        a, b: degree 1, ``[2, l+1, N]`` NTT domain (any levels, the lower is used). Returns degree
        2, ``[3, l+1, N]``, scale a.scale * b.scale. Consumes no level; needs no key.
        """
        return self._tensor(a, b, "tensor")

    def _tensor(self, a: Ciphertext, b: Ciphertext, op: str) -> Ciphertext:
        return self._tensor_checked(a, *self._binary_ct(a, b, op), b.scale, op)

    def _binary_ct(self, a: Ciphertext, b: Ciphertext, op: str) -> tuple[torch.Tensor, torch.Tensor, int]:
        """:meth:`_binary` for two degree-1 ciphertexts."""
        if not isinstance(b, Ciphertext):
            raise ParameterError(f"{op}: expected a ckks.Ciphertext, got {type(b).__name__}")
        return self._binary(a, b, op, degree=1)

    def _tensor_checked(self, a: Ciphertext, a_data: torch.Tensor, b_data: torch.Tensor, level: int,
                        b_scale: float, op: str) -> Ciphertext:
        """The tensor product of checked operands' data at ``level``."""
        scale = self._check_scale_fits(a.scale * b_scale, level, op)
        with _step("tensor_product", self._ctx.device):  # (a0 b0, a0 b1 + a1 b0, a1 b1), one pass
            data = ops.tensor_product(a_data, b_data, self._ctx.q_at(level).moduli)
        return a.replace(data=data, level=level, scale=scale)

    @canonical_results
    def relinearize(self, ct: Ciphertext) -> Ciphertext:
        """Degree 2 -> degree 1 by key switching d2 from s^2 to s (HK20).

        ct: ``[3, l+1, N]`` NTT domain; returns ``[2, l+1, N]``, same level and scale.
        Needs the relinearization key; consumes no level.
        """
        op = "relinearize"
        level = self._check_ct(ct, op, degree=2)
        return switching.relinearize(self._ctx, ct, self._relin_key(op), level)

    @canonical_results
    def mul_relin(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """a * b for two ciphertexts: :meth:`tensor` then :meth:`relinearize`.

        a, b: degree 1 at any levels (the lower is used). Returns ``[2, l+1, N]`` with scale
        a.scale * b.scale (rescale afterwards to bring it back). Needs the relinearization key;
        consumes no level.
        """
        return self._mul_relin(a, b, "mul_relin")

    def _mul_relin(self, a: Ciphertext, b: Ciphertext, op: str) -> Ciphertext:
        """Each operand and the key checked once (here and in :meth:`_binary_ct`), then the
        unchecked key switch."""
        key = self._relin_key(op)  # before any work
        return self._product_relinearized(a, *self._binary_ct(a, b, op), b.scale, key, op)

    def _product_relinearized(self, a: Ciphertext, a_data: torch.Tensor, b_data: torch.Tensor, level: int,
                              b_scale: float, key: rlwe.RelinKey, op: str) -> Ciphertext:
        """The tensor product and the relinearization of checked operands' data at ``level`` (on CUDA the tensor
        product inside the key switch's kernels where the plan allows: the same words, without the degree-2
        ciphertext in memory)."""
        scale = self._check_scale_fits(a.scale * b_scale, level, op)
        data = switching.relinearize_product(self._ctx, a_data, b_data, key, level)
        return a.replace(data=data, level=level, scale=scale)

    def _relin_key(self, op: str) -> rlwe.RelinKey:
        """The relinearization key, checked (once per operation: the key switch below does not)."""
        key = self._keys(op).relin_key(op)
        check_switching_key(self._ctx, key, op)
        return key

    # ---- rotations -------------------------------------------------------------------------------

    @canonical_results
    def rotate(self, ct: Ciphertext, steps: int) -> Ciphertext:
        """Rotate the slots left by ``steps`` (right if negative): slot j receives slot j + steps.

        ct: degree 1, ``[2, l+1, N]`` NTT domain. Returns the same shape, level and scale.
        Needs the Galois key of 5^steps mod 2N (for sparse packing, of any step congruent mod
        the slot count, tried as steps mod slots, then steps mod slots - slots); consumes no level.
        """
        op = "rotate"
        level = self._check_ct(ct, op)
        r = _check_steps(steps, ct.slots, op)
        if r == 0:
            return ct.replace(data=ct.data.clone())
        return self._rotate(ct, level, self._rotation_elements([r], ct.slots, op)[r], op)

    def _rotate(self, ct: Ciphertext, level: int, element: int, op: str) -> Ciphertext:
        """sigma_element(ct) of a checked ciphertext whose key is known to be held."""
        return switching.apply_galois(self._ctx, ct, element, self._galois_key(element, op), level)

    def _galois_key(self, element: int, op: str) -> rlwe.GaloisKey:
        """The Galois key of ``element``, checked (the key switch below does not)."""
        key = self._keys(op).galois_key(element, op)
        check_switching_key(self._ctx, key, op)
        return key

    @canonical_results
    def conjugate(self, ct: Ciphertext) -> Ciphertext:
        """Complex conjugation of every slot (X -> X^(2N-1)).

        ct: degree 1, ``[2, l+1, N]`` NTT domain; same shape, level and scale out. Needs the
        conjugation key (element 2N-1); consumes no level.
        """
        op = "conjugate"
        level = self._check_ct(ct, op)
        element = rlwe.galois_element_for_conjugation(self.params.n)
        if element not in self._keys(op):
            raise MissingKeyError(f"{op}: missing the conjugation key (Galois element {element})")
        return self._rotate(ct, level, element, op)

    @canonical_results
    def rotate_hoisted(self, ct: Ciphertext, steps: Iterable[int]) -> dict[int, Ciphertext]:
        """Several rotations of one ciphertext sharing one ModUp (hoisting).

        Returns {step: rotated ciphertext} for every requested step (same shape, level, scale as
        ct, degree 1 in). Needs a Galois key per nonzero step (all checked before any work;
        the error lists every missing one); consumes no level.
        """
        op = "rotate_hoisted"
        level = self._check_ct(ct, op)
        if isinstance(steps, (int, bool)):
            raise ParameterError(f"{op}: steps must be an iterable of ints, got {steps!r}")
        steps = list(dict.fromkeys(steps))
        reduced = {s: _check_steps(s, ct.slots, op) for s in steps}
        nonzero = sorted({r for r in reduced.values() if r})
        elements = self._rotation_elements(nonzero, ct.slots, op)
        keys = {k: self._galois_key(k, op) for k in elements.values()}
        rotated = switching.apply_galois_hoisted(self._ctx, ct, keys, level) if nonzero else {}
        return {s: rotated[elements[r]] if r else ct.replace(data=ct.data.clone()) for s, r in reduced.items()}

    def _rotation_elements(self, reduced_steps: list[int], slots: int, op: str) -> dict[int, int]:
        """{r: Galois element held by the key set} for steps 0 < r < slots; MissingKeyError listing
        every step without a key."""
        if not reduced_steps:
            return {}
        keys = self._keys(op)
        n = self.params.n
        found, missing = {}, []
        for r in reduced_steps:
            candidates = [rlwe.galois_element_for_rotation(s, n) for s in (r, r - slots)]
            held = [k for k in candidates if k in keys]
            if held:
                found[r] = held[0]
            else:
                missing.append(r)
        if missing:
            held_steps, _ = keys.rotation_steps(n)
            raise MissingKeyError(f"{op}: missing Galois keys for rotation steps {missing} "
                                  f"(elements {galois_elements(n, missing)}); the key set holds steps {held_steps}")
        return found

    # ---- sums and inner products -----------------------------------------------------------------

    @staticmethod
    def rotation_steps_for_sum(n: int) -> list[int]:
        """The rotation steps 1, 2, 4, ..., n/2 that :meth:`rotate_and_sum` over ``n`` uses."""
        _check_power_of_two(n, "rotate_and_sum")
        return [1 << i for i in range(n.bit_length() - 1)]

    @canonical_results
    def rotate_and_sum(self, ct: Ciphertext, n: int) -> Ciphertext:
        """Slot j receives sum_(t < n) z_(j + t mod slots), by log2(n) rotate-and-add steps.

        n: a power of two <= ct.slots (n = slots puts the sum of all slots in every slot).
        ct: degree 1, ``[2, l+1, N]``; same shape, level and scale out. Needs the Galois keys of
        :meth:`rotation_steps_for_sum` (checked up front); consumes no level.
        """
        op = "rotate_and_sum"
        level = self._check_ct(ct, op)
        return self._rotate_and_sum(ct, level, self._sum_elements(ct.slots, n, op), op)

    def _sum_elements(self, slots: int, n: int, op: str) -> list[int]:
        """The Galois elements of :meth:`rotate_and_sum` over ``n`` (every key checked up front)."""
        steps = self.rotation_steps_for_sum(n)
        if n > slots:
            raise ParameterError(f"{op}: n = {n} exceeds the {slots} slots")
        found = self._rotation_elements([s % slots for s in steps], slots, op)
        return [found[s % slots] for s in steps]

    def _rotate_and_sum(self, ct: Ciphertext, level: int, elements: list[int], op: str) -> Ciphertext:
        """out += rotate(out, s) for each step's element, on a checked ciphertext."""
        moduli = self._ctx.q_at(level).moduli
        out = ct.replace(data=ct.data.clone())
        for element in elements:
            rotated = self._rotate(out, level, element, op)
            out = out.replace(data=ops.add(out.data, rotated.data, moduli))
        return out

    @canonical_results
    def inner_product(self, a: Ciphertext, b: Ciphertext, n: int) -> Ciphertext:
        """sum_(t < n) a_(j+t) b_(j+t) in slot j: :meth:`mul_relin`, :meth:`rescale`,
        :meth:`rotate_and_sum` over n (a power of two <= slots; slot 0 holds the inner product
        of the first n slots).

        a, b: degree 1 at levels >= 1 (the lower is used). Returns ``[2, l, N]`` at level l - 1,
        scale a.scale * b.scale / q_l. Consumes one level; needs the relinearization key and the
        Galois keys of :meth:`rotation_steps_for_sum` (all checked before any work).
        """
        op = "inner_product"
        key = self._relin_key(op)
        a_data, b_data, level = self._binary_ct(a, b, op)
        if level == 0:
            raise LevelMismatchError(f"{op}: needs operands at level >= 1 (one rescale), got {a.level} and {b.level}")
        elements = self._sum_elements(a.slots, n, op)
        product = self._product_relinearized(a, a_data, b_data, level, b.scale, key, op)
        product = self._rescale(product, level)
        return self._rotate_and_sum(product, level - 1, elements, op)

# ---- helpers -------------------------------------------------------------------------------------

def _limbs(data: torch.Tensor, level: int) -> torch.Tensor:
    """The first level+1 limbs of ``[..., L'+1, N]`` data, contiguous (no copy when it already is)."""
    return data[..., :level + 1, :].contiguous()


def _check_power_of_two(n: int, op: str) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n & (n - 1):
        raise ParameterError(f"{op}: n must be a positive power of two, got {n!r}")


def _check_steps(steps: int, slots: int, op: str) -> int:
    """steps mod slots, or ParameterError for a non-integer."""
    if isinstance(steps, bool) or not isinstance(steps, int):
        raise ParameterError(f"{op}: rotation steps must be an int, got {steps!r}")
    return steps % slots
