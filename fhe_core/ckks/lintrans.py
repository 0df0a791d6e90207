"""Linear transforms: plaintext matrix x encrypted vector by the diagonal method, with
baby-step giant-step (BSGS) and hoisting (Halevi-Shoup 2014/2018; Lattigo circuits/common/lintrans).

**Diagonals.** For an n x n matrix M over the n slots (n a power of two dividing N/2), the
k-th generalized diagonal is d_k[j] = M[j, (j + k) mod n], and with rot_k the left rotation
(slot j receives z_(j+k), see :mod:`fhe_core.ckks.encoder`)

    M z = sum_k d_k * rot_k(z).

**Baby-step giant-step.** Write every nonzero diagonal index as k = g + j with the giant step
g = n1 * floor(k / n1) and the baby step j = k mod n1 < n1. Since d * rot_g(x) = rot_g(rot_-g(d) * x),

    M z = sum_g rot_g( sum_j rot_-g(d_(g+j)) * rot_j(z) ):

the giant-step rotation is folded into the plaintext (d_(g+j) rotated right by g, encoded once),
so evaluation needs one hoisted rotation call for the baby steps (one ModUp shared by all of
them), then per giant step a multiply-accumulate of plaintexts with the baby-step ciphertexts
(fused into ``ops.ks_inner_product``, the 128-bit-accumulating sum of products of the
key-switching inner product) and one key switch, and one rescale at the end. With double
hoisting (the default, :meth:`LinearTransform.evaluate`) the baby steps and the sums stay in the
key-switching basis QP_l and are brought down once: one ModDown per giant step (one component)
and one at the end, instead of one per rotation.

**Keys.** One Galois key per nonzero baby step and per nonzero giant step
(:meth:`LinearTransform.rotation_steps`): about 2 sqrt(#diagonals) for the default n1, instead
of #diagonals for the naive method.

**Noise.** The baby steps are key-switched at the input's scale, the giant steps after the
plaintext product (scale ~ Delta * q_l), where their key-switching noise is negligible; so
BSGS is also more precise than the naive method (tests/fhe_core/ckks/test_lintrans.py).
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from fhe_core import ops, rlwe
from fhe_core.ckks.ciphertext import Ciphertext, SlotMismatchError, rlwe_context
from fhe_core.ckks.encoder import Encoder
from fhe_core.ckks.evaluator import Evaluator, galois_elements
from fhe_core.errors import (
    EncodingError, LevelMismatchError, MissingKeyError, ParameterError, ParamsMismatchError, UnsupportedMethodError,
)
from fhe_core.params import Params
from fhe_core.ring import BasisConverter
from fhe_core.rlwe import switching
from fhe_core.rlwe.checks import check_canonical, check_ciphertext, mark_canonical


@dataclass(frozen=True, eq=False)
class _EncodedGiantStep:
    """The plaintexts of one giant step g: ``data`` ``[m, p_rows + l + 1, N]`` int64 (NTT domain,
    contiguous) over (P, Q_l), the key-switching basis with its ``p_rows`` special primes first
    (0: over Q_l only); ``data[i]`` encodes d_(g + babies[i]) rotated right by g."""

    giant: int
    babies: tuple[int, ...]
    data: torch.Tensor
    p_rows: int = 0

    def over_q(self) -> torch.Tensor:
        """``[m, l+1, N]`` contiguous: the rows of Q_l (a view when there are no P rows, else a copy)."""
        return self.data[:, self.p_rows:].contiguous()


@dataclass(frozen=True, eq=False)
class _Encoded:
    """Every rotated diagonal of the transform encoded at one level and scale."""

    level: int
    scale: float
    giant_steps: tuple[_EncodedGiantStep, ...]


def default_baby_step(diagonals, slots: int) -> int:
    """n1 = t * 2^ceil(log2(#diagonals) / 2), at most ``slots``, for the diagonal indices
    ``diagonals`` (in [0, n)), where t = gcd(indices, n) is their stride: about sqrt(#diagonals)
    baby steps and as many giant steps, rounded up so that the cheaper hoisted baby steps
    outnumber the key-switched giant steps. The stride matters for the factored DFTs of
    bootstrapping, whose diagonals sit at multiples of 2^j: n1 = 2^ceil(...) alone would make
    every diagonal a giant step there (62 key switches and keys instead of 15 for 63 diagonals
    of stride 32)."""
    indices = list(diagonals)
    if len(indices) <= 1:
        return 1
    stride = math.gcd(slots, *indices)
    return min(slots, stride << math.ceil(math.log2(len(indices)) / 2))


def matrix_diagonals(matrix) -> dict[int, np.ndarray]:
    """The nonzero generalized diagonals {k: d_k} of a square matrix, d_k[j] = M[j, (j+k) mod n].

    matrix: ``[n, n]`` real or complex array-like. Returns ``[n]`` complex128 vectors for the
    k in [0, n) whose diagonal is not identically zero (one vectorised gather per diagonal, so
    the extra memory is O(n), not a second n x n array).
    """
    m = _square(matrix)
    n = m.shape[0]
    rows = np.arange(n)
    diagonals = {}
    for k in range(n):
        d = m[rows, (rows + k) % n]
        if np.any(d != 0):
            diagonals[k] = d
    return diagonals


class LinearTransform:
    """A plaintext n x n matrix to apply to encrypted vectors of n slots (BSGS diagonal method).

    Args:
        params: the parameter set (the diagonals are encoded for it, on its device).
        matrix: either a dense ``[n, n]`` real/complex array (its nonzero diagonals are used), or
            a mapping {k: d_k} of generalized diagonals, d_k ``[n]`` with d_k[j] = M[j, (j+k) mod n]
            (k any int, taken mod n), for structured transforms whose diagonals are few.
        level: encode the diagonals now at this level (>= 1 for the default scale). Default:
            encode lazily at the level of each evaluated ciphertext (cached per level).
        scale: the scale of the encoded diagonals. Default q_l, the prime the final rescale
            divides by, so that the output's scale equals the input's (as for constants in
            :meth:`Evaluator.mul`).
        baby_step: n1, a power of two <= n (default :func:`default_baby_step`).

    Encoding costs one encode per nonzero diagonal (an FFT of length n and an NTT of
    ``[l+1, N]``, plus the exact conversion of its integers to the special primes P) and keeps
    ``[#diagonals, alpha + l + 1, N]`` int64 on the device per encoded level (over QP_l, for
    double hoisting). Evaluation holds the n1 baby-step ciphertexts ``[n1, 2, alpha + l + 1, N]``
    at once. Not safe for
    concurrent use from several threads (the per-level encodings are cached lazily).
    """

    def __init__(self, params: Params, matrix, *, level: int | None = None, scale: float | None = None,
                 baby_step: int | None = None):
        if not isinstance(params, Params):
            raise ParameterError(f"LinearTransform: expected a Params, got {type(params).__name__}")
        if params.key_switching != "hybrid":  # its double hoisting shares hybrid's ModUp (and so does bootstrapping)
            raise UnsupportedMethodError(f"LinearTransform: the double-hoisted transforms run on hybrid key switching; "
                                         f"these parameters switch keys by the {params.key_switching} method")
        self.params = params
        if isinstance(matrix, Mapping):
            diagonals = _diagonal_dict(matrix)
            self.slots = _check_slots(len(next(iter(diagonals.values()))), params)
        else:
            matrix = _square(matrix)
            self.slots = _check_slots(matrix.shape[0], params)  # before the n^2 gather
            diagonals = matrix_diagonals(matrix)
        _check_entries(diagonals)
        self.diagonals: dict[int, np.ndarray] = dict(sorted(diagonals.items()))
        self.baby_step = self._check_baby_step(baby_step)
        self._scale = None if scale is None else _check_scale(scale)
        self._encoder = Encoder(params)
        self._encoded: dict[int, _Encoded] = {}
        self._gathers: dict[tuple[int, ...], torch.Tensor] = {}  # see _BabySteps.rows
        self.level = level
        if level is not None:
            self.level = self._check_level(level, "LinearTransform")
            self.encode(self.level)

    def __repr__(self) -> str:
        return (f"ckks.LinearTransform(slots={self.slots}, diagonals={len(self.diagonals)}, "
                f"baby_step={self.baby_step}, giant_steps={len(self.giant_steps)}, level={self.level})")

    # ---- the BSGS plan ---------------------------------------------------------------------------

    def _check_baby_step(self, baby_step: int | None) -> int:
        if baby_step is None:
            return default_baby_step(self.diagonals, self.slots)
        if isinstance(baby_step, bool) or not isinstance(baby_step, int) or baby_step < 1 \
                or baby_step & (baby_step - 1) or baby_step > self.slots:
            raise ParameterError(f"LinearTransform: baby_step must be a power of two in [1, {self.slots}], "
                                 f"got {baby_step!r}")
        return baby_step

    @property
    def giant_steps(self) -> list[int]:
        """The giant steps g = n1 * floor(k / n1) of the nonzero diagonals k, sorted."""
        return sorted({k - k % self.baby_step for k in self.diagonals})

    @property
    def baby_steps(self) -> list[int]:
        """The baby steps j = k mod n1 of the nonzero diagonals k, sorted (0 needs no key)."""
        return sorted({k % self.baby_step for k in self.diagonals})

    @property
    def depth(self) -> int:
        """Levels that :meth:`evaluate` consumes (its one rescale): 1."""
        return 1

    def rotation_steps(self) -> list[int]:
        """Every left-rotation step that :meth:`evaluate` performs: the nonzero baby and giant
        steps, in [1, n), sorted. These are the Galois keys the evaluator needs."""
        return sorted({s for s in self.baby_steps + self.giant_steps if s})

    def galois_elements(self, n: int | None = None) -> list[int]:
        """The Galois elements 5^r mod 2N of :meth:`rotation_steps` for a ring of degree ``n``
        (default params.n): what to pass to :func:`fhe_core.rlwe.gen_eval_keys`."""
        return galois_elements(self.params.n if n is None else n, self.rotation_steps())

    # ---- encoding --------------------------------------------------------------------------------

    def _check_level(self, level: int, op: str) -> int:
        top = self.params.max_level
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= top:
            raise LevelMismatchError(f"{op}: level must be an int in [0, {top}], got {level!r}")
        if level == 0 and self._scale is None:
            raise LevelMismatchError(f"{op}: the default scale q_l needs a level to rescale by; "
                                     f"level 0 needs an explicit scale")
        return level

    def scale_at(self, level: int) -> float:
        """The scale of the diagonals encoded at ``level``: the given scale, or q_level."""
        return self._scale if self._scale is not None else float(self.params.q_primes[level])

    @property
    def encoded_levels(self) -> list[int]:
        """The levels at which the diagonals are encoded (cached) so far."""
        return sorted(self._encoded)

    def encode(self, level: int) -> None:
        """Pre-encode every rotated diagonal rot_-g(d_(g+j)) at ``level`` (cached; called by
        the constructor for a fixed level, else by :meth:`evaluate` on first use of a level)."""
        level = self._check_level(level, "LinearTransform.encode")
        if level in self._encoded:
            return
        scale = self.scale_at(level)
        by_giant: dict[int, list[tuple[int, torch.Tensor]]] = {g: [] for g in self.giant_steps}
        for k, d in self.diagonals.items():
            g = k - k % self.baby_step
            try:
                pt = self._encoder.encode(np.roll(d, g), level=level, scale=scale, slots=self.slots)
            except EncodingError as exc:
                raise EncodingError(f"LinearTransform.encode: diagonal {k}: {exc}") from None
            by_giant[g].append((k - g, pt.data))
        ctx = rlwe_context(self.params)
        self._encoded[level] = _Encoded(level, scale, tuple(
            _EncodedGiantStep(g, tuple(j for j, _ in items),
                              _extend_to_p(ctx, torch.stack([t for _, t in items]), level), ctx.alpha)
            for g, items in by_giant.items()))

    # ---- evaluation ------------------------------------------------------------------------------

    def check_keys(self, evaluator: Evaluator, op: str = "LinearTransform") -> None:
        """MissingKeyError listing every rotation step of :meth:`rotation_steps` whose Galois key
        the evaluator lacks (a key of 5^r or 5^(r - n) mod 2N serves step r, as in
        :meth:`Evaluator.rotate`); ParamsMismatchError for an evaluator of other parameters."""
        if not isinstance(evaluator, Evaluator):
            raise ParameterError(f"{op}: expected a ckks.Evaluator, got {type(evaluator).__name__}")
        if evaluator.params.params_id != self.params.params_id:
            raise ParamsMismatchError(f"{op}: the evaluator belongs to params {evaluator.params.params_id[:12]!r}, "
                                      f"the transform to {self.params.params_id[:12]!r}")
        if torch.device(evaluator.params.device) != torch.device(self.params.device):
            raise ParameterError(f"{op}: the evaluator runs on {evaluator.params.device}, the transform's "
                                 f"diagonals live on {self.params.device}")
        steps = self.rotation_steps()
        if not steps:
            return
        keys, n = evaluator.keys, self.params.n
        missing = [r for r in steps if keys is None or not any(
            rlwe.galois_element_for_rotation(s, n) in keys for s in (r, r - self.slots))]
        if missing:
            raise MissingKeyError(f"{op}: missing Galois keys for rotation steps {missing} "
                                  f"(elements {galois_elements(n, missing)}); the transform needs steps {steps}")

    def evaluate(self, evaluator: Evaluator, ct: Ciphertext, *, rescale: bool = True,
                 double_hoisting: bool = True) -> Ciphertext:
        """M z for the n slots z of ``ct``, by BSGS with hoisted baby steps.

        With ``double_hoisting`` (default; Bossuat, Mouchet, Troncoso-Pastoriza and Hubaux,
        Eurocrypt 2021, Algorithm 6) every sum stays in the key-switching basis QP_l = (P, Q_l)
        until the end:

        1. baby steps: one ModUp of c_1; per baby step j the permuted digits' inner product with
           the key of j, plus P * sigma_j(c_0): rot_j(ct) times P over QP_l, **no ModDown**;
        2. per giant step g: acc_g = sum_j pt_(g,j) * (P rot_j(ct)) over QP_l (``ops.ks_inner_product``,
           the diagonals encoded over QP_l); for g != 0 one ModDown of acc_g's second component
           only, then sigma_g of it is key-switched without ModDown and sigma_g(acc_g's first
           component) added: P rot_g(acc_g) over QP_l;
        3. the sum over g, **one ModDown** of both components, then one rescale by q_l (unless
           ``rescale=False``).

        That is one ModUp per nonzero giant step plus one, and one ModDown per nonzero giant step
        (one component) plus one (two), where single hoisting (``double_hoisting=False``) does a
        two-component ModDown per nonzero baby and giant step:

        1. baby steps: rot_j(ct) for every baby step j, in one :meth:`Evaluator.rotate_hoisted`
           call (one ModUp, one ModDown per step);
        2. for each giant step g: acc_g = sum_j pt_(g,j) * rot_j(ct). With the evaluator's plan's fused circuit
           (``KernelPlan.fused_circuit``) one ``ops.ks_inner_product`` per 63 baby steps: the plaintexts
           ``[m, l+1, N]`` as the digits, the stacked baby-step ciphertexts ``[m, 2, l+1, N]`` as the key,
           128-bit accumulation and one reduction, each word read once. Else ``ops.mul`` then
           ``ops.mul_add`` per baby step on ``[2, l+1, N]`` (the plaintext broadcast over both
           components). Both give the same residues. Then one rotation rot_g(acc_g) (none for g = 0);
        3. the sum over g, then one rescale by q_l (unless ``rescale=False``).

        The two decrypt to the same message up to the key-switching noise (each ModDown rounds; the
        double-hoisted sum rounds fewer times).

        ct: degree 1, ``[2, l+1, N]`` NTT domain, ``slots == n``. Works at level
        l' = min(l, level of a fixed transform) (the ciphertext is dropped, or the pre-encoded
        diagonals truncated to l'+1 limbs). Returns ``[2, l', N]`` at level l' - 1 with scale
        ct.scale * s_pt / q_l' (= ct.scale for the default s_pt = q_l'); with ``rescale=False``
        ``[2, l'+1, N]`` at level l' and scale ct.scale * s_pt. Consumes one level (the rescale).
        Needs the Galois keys of :meth:`rotation_steps`, checked with the slots and levels before
        any work (MissingKeyError, SlotMismatchError, LevelMismatchError).
        """
        op = "LinearTransform.evaluate"
        encoded, ct = self._prepare(evaluator, ct, rescale, op)
        if double_hoisting:
            total = self._double_hoisted(evaluator, ct, encoded)
        else:
            total = self._single_hoisted(evaluator, ct, encoded)
        out = mark_canonical(ct.replace(data=total, scale=ct.scale * encoded.scale))  # checked inputs
        return evaluator.rescale(out) if rescale else out

    def _single_hoisted(self, evaluator: Evaluator, ct: Ciphertext, encoded: _Encoded) -> torch.Tensor:
        """sum_g rot_g(sum_j pt_(g,j) rot_j(ct)) over Q_l, every rotation key-switched back to Q_l."""
        ctx = evaluator.context
        moduli, fused = ctx.q_at(encoded.level).moduli, ctx.plan.fused_circuit
        device = ct.data.device
        with _step("lintrans_baby_steps", device):
            babies = _BabySteps.hoisted(evaluator.rotate_hoisted(ct, self.baby_steps), self.baby_steps, stacked=fused)
        total = None
        for step in encoded.giant_steps:
            with _step(f"lintrans_giant_step_{step.giant}", device):
                pts = step.over_q()
                if fused:
                    acc = _fused_multiply_accumulate(pts, babies.rows(step.babies, self._gathers), moduli)
                else:
                    acc = _multiply_accumulate(pts, [babies.by_step[j] for j in step.babies], moduli)
                if step.giant:
                    acc = evaluator.rotate(mark_canonical(ct.replace(data=acc)), step.giant).data
                total = acc if total is None else ops.add(total, acc, moduli, out=total)
        return total

    def _double_hoisted(self, evaluator: Evaluator, ct: Ciphertext, encoded: _Encoded) -> torch.Tensor:
        """The same sum with every partial sum over QP_l and one final ModDown (see :meth:`evaluate`)."""
        ctx, level = evaluator.context, encoded.level
        qp = ctx.qp_at(level)
        device = ct.data.device
        keys = _RotationKeys(evaluator, self.slots)
        with _step("lintrans_baby_steps", device):
            babies = _BabySteps.extended(ctx, ct, self.baby_steps, keys)
        total = None
        fused = ctx.plan.fused_circuit
        products = _giant_products(encoded.giant_steps, babies, qp.moduli) if fused else None
        if products is not None:
            with _step("lintrans_giant_steps", device):
                total = _giant_steps_batched(ctx, encoded.giant_steps, products, level, keys)
            with _step("lintrans_mod_down", device):
                return switching.mod_down(ctx, total, level)
        for step in encoded.giant_steps:  # (giant step by giant step: the reference, or beyond giant_products' limits)
            with _step(f"lintrans_giant_step_{step.giant}", device):
                acc = _fused_multiply_accumulate(step.data, babies.rows(step.babies, self._gathers), qp.moduli)
                if step.giant and fused:  # rotated, plus the sum so far, in the inner product's pass
                    total = _rotate_extended_into(ctx, acc, level, keys.element(step.giant), keys, total)
                    continue
                if step.giant:
                    acc = _rotate_extended(ctx, acc, level, keys.element(step.giant), keys)
                total = acc if total is None else ops.add(total, acc, qp.moduli, out=total)
        with _step("lintrans_mod_down", device):
            return switching.mod_down(ctx, total, level)

    def _prepare(self, evaluator: Evaluator, ct: Ciphertext, rescale: bool, op: str) -> tuple[_Encoded, Ciphertext]:
        """Check everything before any work; the encoded diagonals and ct at the working level."""
        self.check_keys(evaluator, op)
        if not isinstance(ct, Ciphertext):
            raise ParameterError(f"{op}: expected a ckks.Ciphertext, got {type(ct).__name__}")
        if ct.params_id != self.params.params_id:
            raise ParamsMismatchError(f"{op}: the ciphertext belongs to params {ct.params_id[:12]!r}, "
                                      f"the transform to {self.params.params_id[:12]!r}")
        if ct.slots != self.slots:
            raise SlotMismatchError(f"{op}: the transform acts on {self.slots} slots, the ciphertext packs {ct.slots}")
        if ct.degree != 1:
            raise ParameterError(f"{op}: expected a degree-1 ciphertext (relinearize first), got degree {ct.degree}")
        # the double-hoisted path hands ct.data straight to the key-switching pieces: the entry
        # checks (shape, device, dtype; residues once per object) the evaluator would make
        ctx = evaluator.context
        check_canonical(ctx, ct, check_ciphertext(ctx, ct, op), op)
        level = ct.level if self.level is None else min(ct.level, self.level)
        if rescale and level == 0:
            raise LevelMismatchError(f"{op}: working level 0 leaves no prime to rescale by")
        if self.level is None:
            self.encode(self._check_level(level, op))
        encoded = self._truncated(level)
        if ct.level > level:
            ct = evaluator.drop_level(ct, level)
        return encoded, ct

    def _truncated(self, level: int) -> _Encoded:
        """The diagonals at ``level``: as encoded, or the first level+1 limbs of those encoded at
        the fixed higher level (the same integers mod Q_level; the scale stays s_pt), copied
        for this evaluation."""
        if level in self._encoded:
            return self._encoded[level]
        source = self._encoded[self.level]
        return _Encoded(level, source.scale, tuple(
            _EncodedGiantStep(s.giant, s.babies, s.data[:, :s.p_rows + level + 1].contiguous(), s.p_rows)
            for s in source.giant_steps))


# ---- helpers -------------------------------------------------------------------------------------

def _step(name: str, device: torch.device):
    """An NVTX range named after the step on CUDA (profiles read as the algorithm), else nothing."""
    return torch.cuda.nvtx.range(name) if device.type == "cuda" else contextlib.nullcontext()


def _extend_to_p(ctx: rlwe.RLWEContext, pts: torch.Tensor, level: int) -> torch.Tensor:
    """``[m, l+1, N]`` plaintexts over Q_l (NTT domain) -> ``[m, alpha + l + 1, N]`` over
    QP_l = (P, Q_l): the same integer polynomials (centred, exactly converted), P rows first."""
    q = ctx.q_at(level)
    over_p = BasisConverter.get(q, ctx.p_basis)(q.intt(pts), exact=True)
    return torch.cat([ctx.p_basis.ntt(over_p, out=over_p), pts], dim=1)


class _RotationKeys:
    """The Galois element (and key) the evaluator's key set holds for each rotation step r of an
    n-slot ciphertext: 5^r, else 5^(r - n) mod 2N (as :meth:`Evaluator.rotate`; checked up front
    by :meth:`LinearTransform.check_keys`)."""

    def __init__(self, evaluator: Evaluator, slots: int):
        self.keys, self.slots, self.n = evaluator.keys, slots, evaluator.params.n

    def element(self, step: int) -> int:
        candidates = [rlwe.galois_element_for_rotation(s, self.n) for s in (step, step - self.slots)]
        return next(k for k in candidates if k in self.keys)

    def key(self, element: int):
        return self.keys.galois_key(element, "LinearTransform.evaluate")


def _times_p(ctx: rlwe.RLWEContext, c: torch.Tensor, level: int, out: torch.Tensor) -> torch.Tensor:
    """P * c over QP_l into ``out`` ``[alpha + l + 1, N]``: 0 on the P rows, (P mod q_i) c_i on Q_l's."""
    out[:ctx.alpha].zero_()
    ops.mul_const(c, ctx.p_mod_q[:level + 1], ctx.p_mod_q_shoup[:level + 1], ctx.q_at(level).moduli,
                  out=out[ctx.alpha:])
    return out


def _rotate_extended_into(ctx: rlwe.RLWEContext, acc: torch.Tensor, level: int, element: int,
                          keys: _RotationKeys, total: torch.Tensor | None) -> torch.Tensor:
    """total + :func:`_rotate_extended` (acc) (``total`` None: a new tensor), with sigma(acc_0) and the
    sum added in the inner product's pass: no permuted copy of acc_0 and no separate additions."""
    q = ctx.q_at(level)
    c1 = ops.automorphism_ntt(switching.mod_down(ctx, acc[1], level), q.moduli, element)
    digits = switching.decompose_mod_up(ctx, c1, level)
    out = torch.empty_like(acc) if total is None else total
    return switching.inner_product_into(ctx, digits, keys.key(element), level, out, add=acc[0], add_galois=element,
                                         accumulate=total is not None)


def _rotate_extended(ctx: rlwe.RLWEContext, acc: torch.Tensor, level: int, element: int,
                     keys: _RotationKeys) -> torch.Tensor:
    """P sigma(c) over QP_l for acc = P c + (rounding) over QP_l ``[2, alpha + l + 1, N]``:
    ModDown of the second component only, its automorphism key-switched without ModDown (the
    inner product's output is P times the switched polynomial), plus sigma of the first component
    (an automorphism is a permutation of NTT slots on every prime, P's included)."""
    qp, q = ctx.qp_at(level), ctx.q_at(level)
    c1 = ops.automorphism_ntt(switching.mod_down(ctx, acc[1], level), q.moduli, element)
    out = switching.inner_product(ctx, switching.decompose_mod_up(ctx, c1, level), keys.key(element), level)
    ops.add(out[0], ops.automorphism_ntt(acc[0], qp.moduli, element), qp.moduli, out=out[0])
    return out


class _BabySteps:
    """The baby-step ciphertexts rot_j(ct): by step, and (``stacked``) as one contiguous
    ``[n1', 2, rows, N]`` tensor in the order of ``steps`` (the key operand of the fused MAC);
    rows = l+1 (over Q_l), or alpha + l + 1 for the extended P rot_j(ct) of :meth:`extended`."""

    def __init__(self, steps: list[int], stack: torch.Tensor | None, by_step: dict[int, torch.Tensor]):
        self.position = {j: i for i, j in enumerate(steps)}
        self.stack, self.by_step = stack, by_step

    @classmethod
    def hoisted(cls, rotated: dict[int, Ciphertext], steps: list[int], *, stacked: bool) -> _BabySteps:
        """From rotated ciphertexts over Q_l: stacked (one copy), or kept by step."""
        if stacked:
            return cls(steps, torch.stack([rotated[j].data for j in steps]), {})
        return cls(steps, None, {j: rotated[j].data for j in steps})  # one copy kept, not two

    @classmethod
    def extended(cls, ctx: rlwe.RLWEContext, ct: Ciphertext, steps: list[int], keys: _RotationKeys) -> _BabySteps:
        """P rot_j(ct) over QP_l, ``[n1', 2, alpha + l + 1, N]``, written in place: one ModUp of c_1
        (for the nonzero steps), then per step the inner product of the permuted digits with the
        key, plus P sigma_j(c_0) on the Q rows; step 0 is P ct. No ModDown. With the fused circuit every nonzero
        step's product and P sigma_j(c_0) in launches of up to 16 steps (the digits read from L2 after the first,
        ops.ks_inner_product_babies), written in place; else an automorphism, an inner product and an addition per
        step."""
        level = ct.level
        qp, q = ctx.qp_at(level), ctx.q_at(level)
        out = torch.empty((len(steps), 2, len(qp), ctx.n), dtype=torch.int64, device=ct.data.device)
        fused = ctx.plan.fused_circuit
        in_place = fused and 0 in steps  # P c_0 written straight into step 0's place
        p_c0 = _times_p(ctx, ct.data[0], level, out[steps.index(0), 0] if in_place else
                        torch.empty(len(qp), ctx.n, dtype=torch.int64, device=ct.data.device))
        digits = switching.decompose_mod_up(ctx, ct.data[1], level) if any(steps) else None
        if fused and digits is not None:
            nonzero = [(i, j, keys.element(j)) for i, j in enumerate(steps) if j]
            for first in range(0, len(nonzero), BABIES_PER_LAUNCH):
                chunk = nonzero[first:first + BABIES_PER_LAUNCH]
                switching.inner_product_babies_into(ctx, digits, [keys.key(e) for _, _, e in chunk],
                                                     [e for _, _, e in chunk], [i for i, _, _ in chunk], level, out,
                                                     add=p_c0[ctx.alpha:])
        for i, j in enumerate(steps):
            if j == 0:
                if not in_place:
                    out[i, 0].copy_(p_c0)
                _times_p(ctx, ct.data[1], level, out[i, 1])
            elif not fused:
                element = keys.element(j)
                rows = out[i]
                rows.copy_(switching.inner_product(ctx, ops.automorphism_ntt(digits, qp.moduli, element),
                                                   keys.key(element), level))
                ops.add(rows[0, ctx.alpha:], ops.automorphism_ntt(p_c0[ctx.alpha:], q.moduli, element), q.moduli,
                        out=rows[0, ctx.alpha:])
        return cls(steps, out, {})

    def rows(self, babies: tuple[int, ...], gathers: dict[tuple[int, ...], torch.Tensor]) -> torch.Tensor:
        """``[m, 2, l+1, N]`` contiguous: the ciphertexts of ``babies`` (a view when they are
        consecutive in the stack, the usual case; else a gathered copy, its index tensor kept in
        ``gathers`` so that later evaluations make no host-to-device copy and can be captured in
        a CUDA graph)."""
        index = [self.position[j] for j in babies]
        if index == list(range(index[0], index[0] + len(index))):
            return self.stack[index[0]:index[0] + len(index)]
        if babies not in gathers:
            gathers[babies] = torch.tensor(index, device=self.stack.device)
        return self.stack[gathers[babies]]


MAX_FUSED_TERMS = 63  # products of two words < 2^61 that a 128-bit accumulator holds (ops.ks_inner_product)
GIANTS_PER_PASS, MAX_BABIES_PER_PASS = 4, 32  # ops.giant_products' limits
BABIES_PER_LAUNCH = 16  # ops.ks_inner_product_babies' limit


def _giant_products(steps, babies: _BabySteps, moduli: torch.Tensor) -> torch.Tensor | None:
    """Every giant step's sum_j pt_(g,j) * (P rot_j(ct)), ``[2, giants, rows, N]`` (component-major: the
    acc_1 of consecutive giant steps form one contiguous batch), by ops.giant_products:
    the baby stack is read once per 4 giant steps instead of once per giant step (the baby
    ciphertexts are 2/3 of each product's bytes). None where the limits do not hold (then per step)."""
    stack = babies.stack
    if stack.shape[0] > MAX_BABIES_PER_PASS or any(len(s.babies) > MAX_FUSED_TERMS for s in steps):
        return None
    out = torch.empty((2, len(steps), *stack.shape[2:]), dtype=stack.dtype, device=stack.device)
    for first in range(0, len(steps), GIANTS_PER_PASS):
        group = steps[first:first + GIANTS_PER_PASS]
        index = [-1] * (len(group) * stack.shape[0])
        for g, step in enumerate(group):
            for t, j in enumerate(step.babies):
                index[g * stack.shape[0] + babies.position[j]] = t
        ops.giant_products(stack, [s.data for s in group], index, moduli, out=out[:, first:first + len(group)])
    return out


def _giant_steps_batched(ctx: rlwe.RLWEContext, steps, products: torch.Tensor, level: int,
                         keys: _RotationKeys) -> torch.Tensor:
    """sum_g P rot_g(acc_g) over QP_l from every giant step's product ``[2, G, rows, N]`` (component-major):
    the one-component ModDowns of all nonzero giant steps in one batch (their P rows' INTT, the Conv and
    the NTT with its epilogue: 3 launches instead of 3 per giant step, the small ones latency-bound),
    the INTTs of their ModUps in one launch, then per giant step its automorphism, the rest of its ModUp and
    its fused inner product (sigma(acc_0) and the running sum added in the same pass)."""
    q = ctx.q_at(level)
    first = 1 if steps[0].giant == 0 else 0  # (giant steps are sorted: 0 first when present)
    total = products[:, 0] if first else None
    if len(steps) == first:
        return total
    downs = switching.mod_down(ctx, products[1, first:], level)  # [G', l+1, N]
    elements = [keys.element(s.giant) for s in steps[first:]]
    sigmas = torch.empty_like(downs)
    for k, element in enumerate(elements):
        ops.automorphism_ntt(downs[k], q.moduli, element, out=sigmas[k])
    coeffs = q.intt(sigmas)
    for k, element in enumerate(elements):
        digits = switching.decompose_mod_up(ctx, sigmas[k], level, coeffs[k])
        out = torch.empty_like(products[:, 0]) if total is None else total
        total = switching.inner_product_into(ctx, digits, keys.key(element), level, out, add=products[0, first + k],
                                              add_galois=element, accumulate=total is not None)
    return total


def _fused_multiply_accumulate(pts: torch.Tensor, rotated: torch.Tensor, moduli: torch.Tensor) -> torch.Tensor:
    """sum_j pts[j] * rotated[j], ``[2, rows, N]`` int64, NTT domain, for plaintexts ``[m, rows, N]``
    and ciphertexts ``[m, 2, rows, N]`` over one basis (Q_l or QP_l, ``moduli`` ``[rows, 4]``), by
    ``ops.ks_inner_product`` (plaintexts as digits, ciphertexts as the key, every row an ordinary
    one) on chunks of at most 63 terms, summed."""
    rows = pts.shape[1]
    acc = None
    for start in range(0, pts.shape[0], MAX_FUSED_TERMS):
        chunk = slice(start, start + MAX_FUSED_TERMS)
        part = ops.ks_inner_product(pts[chunk], rotated[chunk], rows, rows, moduli)
        acc = part if acc is None else ops.add(acc, part, moduli, out=acc)
    return acc


def _multiply_accumulate(pts: torch.Tensor, rotated: list[torch.Tensor], moduli: torch.Tensor) -> torch.Tensor:
    """The same sum by one ``ops.mul`` and then ``ops.mul_add`` per term into one ``[2, rows, N]``
    buffer (each plaintext ``[rows, N]`` broadcast over both components of ``rotated[j]``, contiguous)."""
    acc = None
    for pt, c in zip(pts, rotated):
        acc = ops.mul(c, pt, moduli) if acc is None else ops.mul_add(c, pt, acc, moduli, out=acc)
    return acc


def _diagonal_dict(diagonals: Mapping) -> dict[int, np.ndarray]:
    """{k: ``[n]`` complex128} from a mapping of diagonals; refuses non-int indices, vectors of
    different lengths or non-finite values. Indices are reduced mod n later."""
    if not diagonals:
        raise ParameterError("LinearTransform: the diagonal mapping is empty")
    out = {}
    for k, d in diagonals.items():
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise ParameterError(f"LinearTransform: diagonal indices must be ints, got {k!r}")
        vector = np.asarray(d, dtype=np.complex128)
        if vector.ndim != 1:
            raise ParameterError(f"LinearTransform: diagonal {k} must be a 1-D vector, got shape {vector.shape}")
        out[int(k)] = vector
    lengths = {v.size for v in out.values()}
    if len(lengths) != 1:
        raise ParameterError(f"LinearTransform: diagonals must all have n entries, got lengths {sorted(lengths)}")
    n = lengths.pop()
    reduced = {}
    for k, v in out.items():
        if k % n in reduced:
            raise ParameterError(f"LinearTransform: diagonal {k} repeats diagonal {k % n} (indices are mod n = {n})")
        reduced[k % n] = v
    return reduced


def _square(matrix) -> np.ndarray:
    """``[n, n]`` complex128, or ParameterError."""
    m = np.asarray(matrix, dtype=np.complex128)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ParameterError(f"LinearTransform: the matrix must be square [n, n], got shape {m.shape}")
    return m


def _check_slots(n: int, params: Params) -> int:
    """n, the size of the matrix: a power of two <= N/2 (the slots it acts on)."""
    if n < 1 or n & (n - 1) or n > params.slots:
        raise ParameterError(f"LinearTransform: n must be a power of two <= N/2 = {params.slots}, got {n}")
    return n


def _check_entries(diagonals: dict[int, np.ndarray]) -> None:
    if not diagonals:
        raise ParameterError("LinearTransform: the matrix is zero (no nonzero diagonal)")
    if not all(np.isfinite(d).all() for d in diagonals.values()):
        raise ParameterError("LinearTransform: the matrix entries must be finite")


def _check_scale(scale: float) -> float:
    scale = float(scale)
    if not (math.isfinite(scale) and scale >= 1):
        raise ParameterError(f"LinearTransform: scale must be a finite float >= 1, got {scale}")
    return scale
