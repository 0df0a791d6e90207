"""The plan of an encrypted forest evaluation: slot layout, circuit, keys, level, noise budget.

**Slots.** BFV batching gives a 2 x H matrix of slots (H = N/2); rotations move both rows by
the same number of columns and a column swap exchanges the rows. A batch of up to W samples
(W = the plan's ``width``) fills *lanes* of W consecutive columns, one sample per column, so
every lane is a vector over the samples: L = floor(H / W) lanes per row. The trees are
evaluated in lanes too: lane (row, block b, class c) at columns (b C + c) W of that row holds
one tree of class c (B = floor(L / C) blocks per row, so 2 B trees per class and ciphertext).
Trees are dealt to *groups* of 2 B C lanes; group g has one ciphertext per tree node
position p (heap order), so the node tests of all its trees (and samples) sit in one
ciphertext per position, and one ciphertext operation serves 2 B C W (tree, sample) pairs.

**Node tests** are linear in the client's ciphertexts (no multiplication):
* ``thermometer`` (any exported XGBoost model): the client sends, per chunk of 2 L features
  (feature f in lane f mod 2 L), one ciphertext per cut index k holding bit k of each feature,
  and one holding the missing flags, with the bits of a missing feature set to 0. A node
  (feature f, cut k, default_left d) tests  s = b_fk + d m_f  (equal to the twin's
  m d + (1 - m) b). The server selects the bit with a 0/1 plaintext mask on the source lane and
  moves it to the tree's lane by a column rotation (powers of two, a model-independent key set:
  the client learns nothing of which features are used) and a row swap when the rows differ.
  Sources that share a move are summed before it: one move per distinct (group, position,
  move).
* ``idash`` (Magara et al.): the client sends, per node of the public tree layout, x0 and
  u = (1 - x0) x2 (its own product, no encrypted one), and s = y x0 + (1 - y)(1 - u) with the
  server's threshold bits y as plaintext masks (exactly the twin's z = (1-x0)(x2(y-1)-y)+1).

A node test is kept as a *linear form* (a plaintext constant plus plaintext-weighted, moved
client ciphertexts) until it is needed; the value of a depth-1 subtree, Lr + (Ll - Lr) s, folds
the leaf plaintexts into the form's masks, so it costs one plaintext product per source, never
two in a row.

**Paths.** A subtree's value V = V_last + sum_i ind_i (V_i - V_last) over the 2^d1 subtrees
below its top d1 levels (their indicators ind_i sum to 1); the indicators split the same way.
d1 = 1 everywhere is the textbook V = V_r + s (V_l - V_r): 2^(D-1) - 1 products, depth D - 1.
The plan picks per level the split with the fewest products among those of the least
multiplicative depth, ceil(log2 D) (D = 2: 1 product; 4: 9 products, depth 2; 6: 37, depth 3).
The products of the root's last step are summed unrelinearized over all groups: one
relinearization per batch.

**Op counts per batch** (``plan.ops``, checked against the evaluator's calls in the tests;
every ciphertext operation serves all lanes; the stacked evaluator (``batched``) issues each
one once for all groups):
* iDASH, 258 samples, N = 2^13: W = 258, L = 15, B = 1, 64 groups, 384 input ciphertexts; per
  group 6 plaintext products, 1 ciphertext product, 6 additions; then 1 relinearization, 1 row
  swap: 384 plaintext products, 64 ciphertext products, 1 rotation in all.
* iDASH, 99 samples: B = 3, 22 groups, 132 inputs: 22 products, 133 plaintext products (one
  masks the result), 7 rotations (the block fold).
* SRBCT (50 rounds, depth 2; 69 of the 200 trees are not a single leaf), 20 samples: 1 group, 390
  inputs: 1 product, 99 plaintext products, 172 rotations (moving 98 node tests).
The client uploads one ciphertext per (chunk, cut index) for a thermometer model: about
F K / (2 L) ciphertexts per batch (F features, K cuts each), the same per sample at any W.

**Noise.** The plan walks the circuit with a conservative per-operation model (bits of
invariant-noise budget: fresh log2(Q_l/t) - log2(N)/2 - 5, plaintext product log2(t) +
log2(N)/2 + 1, ciphertext product log2(t) + log2(N)/2 + 6, sums add noise magnitudes, a chain
of k key switches log2(1 + k)), picks the lowest level whose fresh budget leaves
``MARGIN_BITS``, and refuses the model (PlanError) when even the top level cannot; the tests
check the measured budget left against the plan's estimate (measured 9-35 bits above it).
"""
from __future__ import annotations

import functools
import json
import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from fhe_core.errors import FHEError
from fhe_core.params import Params, ParamsLiteral, preset_literal
from fhe_core.params.presets import BFV_PRESETS

from .encoding import PublicBinning
from .archive import ModelFormatError, read_archive, write_archive
from .export import MAX_FOREST_BYTES, HEForest

MARGIN_BITS = 10.0
DEFAULT_THERMOMETER_WIDTH = 32
PUBLIC_MODEL_VERSION = 1


class PlanError(FHEError, ValueError):
    """The parameters cannot evaluate this model exactly (plaintext modulus, noise budget,
    slots), or a plan's input is inconsistent."""


# ---- the model's trees, as the plan needs them ---------------------------------------------------


IDASH_FORMAT = "fhe-ml/idash-model/1"


@dataclass(frozen=True)
class IdashModel:
    """The iDASH 2020 model (Magara's encoding): thresholds y `[T, 3]` 0/1 int64 and integer
    leaves `[T, 4]` of depth-2 trees, trees of class c at rows c*T/C .. (c+1)*T/C - 1."""

    thresholds: np.ndarray
    leaves: np.ndarray
    n_classes: int

    @classmethod
    def from_workload(cls, workload) -> IdashModel:
        from data.idash import N_CLASSES

        return cls(np.asarray(workload.thresholds, np.int64), np.asarray(workload.leaves, np.int64),
                   N_CLASSES)

    def to_bytes(self) -> bytes:
        """An npz archive (no pickle) of the thresholds and leaves, with a JSON header."""
        return write_archive({"format": IDASH_FORMAT, "n_classes": self.n_classes},
                             {"thresholds": self.thresholds, "leaves": self.leaves})

    @classmethod
    def from_bytes(cls, data: bytes, *, max_bytes: int = MAX_FOREST_BYTES) -> IdashModel:
        """Read :meth:`to_bytes`; ModelFormatError unless the arrays form depth-2 trees with 0/1
        thresholds, dealt evenly to the classes."""
        header, arrays = read_archive(data, "IdashModel.from_bytes", max_bytes, IDASH_FORMAT, ("thresholds", "leaves"))
        thresholds, leaves, n_classes = arrays["thresholds"], arrays["leaves"], header.get("n_classes")
        n_trees = len(leaves) if leaves.ndim else 0  # a 0-d array has no length (refused below)
        if isinstance(n_classes, bool) or not isinstance(n_classes, int) or not 1 <= n_classes <= n_trees:
            raise ModelFormatError(f"IdashModel.from_bytes: n_classes must be an int in [1, {n_trees}], "
                                   f"got {n_classes!r}")
        if thresholds.dtype.kind != "i" or leaves.dtype.kind != "i" or thresholds.shape != (n_trees, 3) \
                or leaves.shape != (n_trees, 4) or n_trees % n_classes or not np.isin(thresholds, (0, 1)).all():
            raise ModelFormatError(f"IdashModel.from_bytes: expected integer thresholds [T, 3] in {{0, 1}} "
                                   f"and leaves [T, 4] with T a multiple of {n_classes}; "
                                   f"got {thresholds.shape} {thresholds.dtype}, "
                                   f"{leaves.shape} {leaves.dtype}")
        if ((leaves >= 1 << 62) | (leaves <= -(1 << 62))).any():  # not np.abs: abs(-2^63) < 0 in int64
            raise ModelFormatError("IdashModel.from_bytes: leaf values beyond 2^62")
        return cls(thresholds.astype(np.int64), leaves.astype(np.int64), n_classes)

    @property
    def trees_per_class(self) -> int:
        return len(self.leaves) // self.n_classes

    @property
    def tree_class(self) -> np.ndarray:
        return np.arange(len(self.leaves)) // self.trees_per_class

    @property
    def score_bound(self) -> int:
        worst = np.abs(self.leaves).max(axis=1)
        return int(np.bincount(self.tree_class, weights=worst, minlength=self.n_classes).max())


# ---- slot layout -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """Lanes of ``width`` columns in the 2 x H slot matrix (see the module docstring)."""

    n: int
    width: int
    n_classes: int

    @property
    def half(self) -> int:
        return self.n // 2

    @property
    def lanes_per_row(self) -> int:
        return self.half // self.width

    @property
    def blocks(self) -> int:
        """B: tree blocks (C lanes each) per row."""
        return self.lanes_per_row // self.n_classes

    @property
    def trees_per_group(self) -> int:
        return 2 * self.blocks * self.n_classes

    def lane_slots(self, row: int, column: int) -> slice:
        """Flat slot indices (row-major matrix order) of the lane starting at ``column``."""
        start = row * self.half + column
        return slice(start, start + self.width)

    def tree_column(self, block: int, cls: int) -> int:
        return (block * self.n_classes + cls) * self.width

    def score_slots(self) -> np.ndarray:
        """`[C, W]` flat slots of the scores in the result (row 0, block 0)."""
        return np.arange(self.n_classes)[:, None] * self.width + np.arange(self.width)[None, :]


# ---- linear forms: node tests before they become ciphertexts ----------------------------------------


@dataclass
class LinearForm:
    """const + sum over moves (r, swap) of move(sum_k coef_k * input_k): vectors are `[N]` int64
    slot values (row-major matrix), taken mod t when encoded. A move rotates the columns left by
    r (column j receives column j + r) after an optional row swap."""

    n: int
    const: np.ndarray = None
    terms: dict = field(default_factory=dict)  # (r, swap) -> {input index: coef [N]}

    def __post_init__(self) -> None:
        if self.const is None:
            self.const = np.zeros(self.n, dtype=np.int64)

    def add_term(self, move: tuple[int, bool], source: int, coef: np.ndarray) -> None:
        by_source = self.terms.setdefault(move, {})
        if source in by_source:
            by_source[source] = by_source[source] + coef
        else:
            by_source[source] = coef.copy()

    @property
    def is_plain(self) -> bool:
        return not self.terms

    def scaled(self, weights: np.ndarray, offset: np.ndarray, t: int) -> LinearForm:
        """offset + weights * self (slot-wise, weights at the target slots), reduced mod t."""
        out = LinearForm(self.n, np.mod(offset + weights * self.const, t))
        for move, by_source in self.terms.items():
            back = unmove(weights, move)
            out.terms[move] = {k: np.mod(back * coef, t) for k, coef in by_source.items()}
        return out


def unmove(values: np.ndarray, move: tuple[int, bool]) -> np.ndarray:
    """The vector at source slots that ``move`` brings to ``values``' slots: `[N]`."""
    r, swap = move
    matrix = np.roll(values.reshape(2, -1), r, axis=1)
    return (matrix[::-1] if swap else matrix).reshape(-1)


def rotation_plan(shifts: list[int]) -> tuple[int, int]:
    """(rotations, additions) of sum_r rot_r(x_r) over distinct ``shifts`` with power-of-two
    rotations taken lowest bit first, terms with equal remaining shifts added before moving on."""
    rotations, adds, pending, bit = 0, 0, set(shifts), 1
    while len(pending) > 1 or 0 not in pending:
        rotations += sum(1 for r in pending if r & bit)
        merged = {r & ~bit for r in pending}
        adds += len(pending) - len(merged)
        pending, bit = merged, bit << 1
    return rotations, adds


def power_steps(r: int) -> list[int]:
    """Left rotation by r columns as rotations by powers of two (the keys the plan asks for)."""
    return [1 << i for i in range(r.bit_length()) if r >> i & 1]


# ---- path schedule ------------------------------------------------------------------------------


@functools.cache
def _cost(kind: str, d: int, bound: int) -> tuple[float, int]:
    """(fewest products, best split d1) for a subtree's value or its leaf indicators within
    multiplicative depth ``bound`` (inf if impossible)."""
    if d == 1:
        return 0, 0
    best = (math.inf, 0)
    if bound < 1:
        return best
    for d1 in range(1, d):
        tops, _ = _cost("ind", d1, bound - 1)
        below, _ = _cost(kind, d - d1, bound - 1)
        if kind == "value":
            products = tops + 2**d1 * below + 2**d1 - 1
        else:
            products = tops + 2**d1 * below + 2**d1 * (2 ** (d - d1) - 1)
        best = min(best, (products, d1))
    return best


@dataclass(frozen=True)
class PathSchedule:
    """How a depth-D tree's value is formed: least multiplicative depth, then fewest products."""

    depth: int
    mult_depth: int
    products: int

    @classmethod
    def for_depth(cls, depth: int) -> PathSchedule:
        bound = 0 if depth <= 1 else math.ceil(math.log2(depth))
        products, _ = _cost("value", depth, bound)
        return cls(depth, bound, int(products))

    def split(self, kind: str, d: int, bound: int) -> int:
        return _cost(kind, d, bound)[1]


def descendants(node: int, levels: int) -> range:
    """Heap indices of the 2^levels nodes ``levels`` below ``node``, left to right."""
    first = (node + 1) * 2**levels - 1
    return range(first, first + 2**levels)


def tree_value(alg, schedule: PathSchedule, group: int):
    """The value of every tree of ``group`` (one algebra value), by ``schedule``.

    ``alg`` provides depth1(group, node) (the value of the depth-1 subtree at a node on level
    D-1), test(group, node), mul(a, b, final), add, sub, one_minus; the same walk runs on
    ciphertexts (the server), on noise estimates and op counts (the plan) and in the clear
    (the tests).
    """
    return _value(alg, schedule, group, 0, schedule.depth, schedule.mult_depth, True)


def _value(alg, schedule, group, node, d, bound, final):
    if d == 1:
        return alg.depth1(group, node)
    d1 = schedule.split("value", d, bound)
    tops = _indicators(alg, schedule, group, node, d1, bound - 1, need_last=False)
    subs = [_value(alg, schedule, group, c, d - d1, bound - 1, False) for c in descendants(node, d1)]
    out = subs[-1]
    for top, sub in zip(tops, subs[:-1]):
        out = alg.add(out, alg.mul(top, alg.sub(sub, subs[-1]), final))
    return out


def _indicators(alg, schedule, group, node, d, bound, need_last=True):
    """Leaf indicators of the depth-d subtree at ``node`` (the last one only if ``need_last``:
    a value needs all but its last top indicator)."""
    if d == 1:
        s = alg.test(group, node)
        return [s, alg.one_minus(s)] if need_last else [s]
    d1 = schedule.split("ind", d, bound)
    tops = _indicators(alg, schedule, group, node, d1, bound - 1)
    out = []
    for i, (top, child) in enumerate(zip(tops, descendants(node, d1))):
        parts = [alg.mul(top, b, False) for b in _indicators(alg, schedule, group, child, d - d1, bound - 1)[:-1]]
        out += parts
        if need_last or i < len(tops) - 1:
            rest = top
            for part in parts:
                rest = alg.sub(rest, part)
            out.append(rest)
    return out


# ---- noise and op counts ----------------------------------------------------------------------------


@dataclass(frozen=True)
class NoiseModel:
    """Conservative bits of invariant-noise budget per operation (see the module docstring)."""

    log_t: float
    log_n: int

    def fresh(self, log_q: float) -> float:
        return log_q - self.log_t - self.log_n / 2 - 5

    @property
    def plain(self) -> float:
        return self.log_t + self.log_n / 2 + 1

    @property
    def product(self) -> float:
        return self.log_t + self.log_n / 2 + 6

    def switched(self, log_q: float) -> float:
        """The budget a modulus switch down to log_q bits leaves at most: its rounding adds
        (t/Q')(eps0 + eps1 s) with |eps0 + eps1 s| <= (1 + N)/2 for a ternary s (worst case)."""
        return log_q - self.log_t - math.log2((1 + 2.0**self.log_n) / 2) - 1


class CountingAlgebra:
    """Walks the circuit on (bits consumed or None for a plaintext) and counts operations."""

    def __init__(self, forms: dict, noise: NoiseModel):
        self.forms, self.noise = forms, noise
        self.ops: dict[str, int] = defaultdict(int)
        self.unrelinearized = False  # a final product left degree 2: one relinearization per batch

    def _form(self, form: LinearForm):
        if form.is_plain:
            return None
        sources = sum(len(s) for s in form.terms.values())
        self.ops["multiply_plain"] += sources
        self.ops["add"] += sources - 1
        for swap in (False, True):
            shifts = [r for r, s in form.terms if s == swap]
            if shifts:
                rotations, adds = rotation_plan(shifts)
                self.ops["rotate"] += rotations + swap
                self.ops["add"] += adds
        self.ops["add"] += all(any(s == swap for _, s in form.terms) for swap in (False, True))
        steps = max(len(power_steps(r)) + swap for r, swap in form.terms)
        return self.noise.plain + math.log2(sources) + math.log2(1 + steps)

    def depth1(self, group, node):
        return self._form(self.forms[group, node, "value"])

    def test(self, group, node):
        return self._form(self.forms[group, node, "test"])

    def mul(self, a, b, final):
        if a is None and b is None:
            return None
        if a is None or b is None:
            self.ops["multiply_plain"] += 1
            return (a if b is None else b) + self.noise.plain
        self.ops["multiply"] += 1
        self.ops["relinearize"] += not final
        self.unrelinearized |= final
        return max(a, b) + self.noise.product

    def add(self, a, b):
        if a is None or b is None:
            return a if b is None else b
        self.ops["add"] += 1
        return math.log2(2.0**a + 2.0**b)  # noise magnitudes add

    sub = add

    def one_minus(self, a):
        if a is not None:
            self.ops["add"] += 1
        return a


# ---- the plan ---------------------------------------------------------------------------------------


@dataclass
class ForestPlan:
    """Everything fixed before any ciphertext exists: layout, forms, schedule, keys, level.

    Build with :meth:`build`. Attributes: kind ("thermometer" or "idash"), layout, depth,
    schedule (multiplicative depth, products per group), n_groups, n_inputs (client
    ciphertexts per batch), level (of the client's ciphertexts), budget_needed (bits, the
    conservative estimate), fresh_budget (estimate at ``level``), answer_level and answer_budget
    (the answers are switched down to that level, leaving about that budget), rotation_steps and
    column_swap (the Galois keys), galois_elements, ops (per batch), score_bound, base (`[C]`
    int64 plaintext added at the end, constant trees included).
    """

    kind: str
    params: Params
    layout: Layout
    depth: int
    schedule: PathSchedule
    n_groups: int
    n_inputs: int
    forms: dict
    base: np.ndarray
    score_bound: int
    fold_mask: bool
    rotation_steps: list[int]
    column_swap: bool
    level: int = 0
    budget_needed: float = 0.0
    fresh_budget: float = 0.0
    answer_level: int = 0
    answer_budget: float = 0.0
    ops: dict = field(default_factory=dict)
    binning: PublicBinning | None = None
    chunks: list[tuple[int, int]] | None = None  # thermometer: (first input, cut count K) per chunk
    trees_per_class: int | None = None  # idash: the public tree layout
    placement: dict | None = None  # thermometer: tree -> (group, row, block, class); server only

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def build(cls, model: HEForest | IdashModel, params: Params, *, width: int | None = None) -> ForestPlan:
        """The plan of ``model`` under ``params`` for batches of up to ``width`` samples
        (default: ``DEFAULT_THERMOMETER_WIDTH`` for an HEForest, as many as the slots hold for
        the iDASH model). PlanError if they cannot evaluate it exactly."""
        if not isinstance(params, Params) or params.scheme != "bfv":
            raise PlanError(f"ForestPlan: needs BFV Params, got {params!r}")
        if not isinstance(model, (HEForest, IdashModel)):
            raise PlanError(f"ForestPlan: expected an HEForest or IdashModel, got {type(model).__name__}")
        t, half = params.plaintext_modulus, params.n // 2
        if 2 * model.score_bound >= t:
            raise PlanError(f"ForestPlan: class scores reach +-{model.score_bound}, the plaintext modulus "
                            f"t = {t} holds only +-{(t - 1) // 2}: use a larger t (e.g. BFVN13QP218L3D4T20) "
                            "or fewer fractional bits")
        most = half // model.n_classes
        if width is None:  # thermometer: batches of a few dozen (the upload per sample does not
            # depend on the width, the rounding up to a whole batch does); iDASH: all the slots
            width = most if isinstance(model, IdashModel) else min(most, DEFAULT_THERMOMETER_WIDTH)
        if isinstance(width, bool) or not isinstance(width, int) or not 1 <= width <= most:
            raise PlanError(f"ForestPlan: width (samples per batch) must be an int in [1, {most}] "
                            f"(N/2 = {half} columns for {model.n_classes} classes), got {width!r}")
        layout = Layout(params.n, width, model.n_classes)
        if isinstance(model, IdashModel):
            plan = _idash_plan(model, params, layout)
        else:
            plan = _thermometer_plan(model, params, layout)
        plan._choose_level()
        return plan

    def _choose_level(self) -> None:
        noise = NoiseModel(math.log2(self.params.plaintext_modulus), self.params.log_n)
        counter = CountingAlgebra(self.forms, noise)
        worst = max(tree_value(counter, self.schedule, g) or 0.0 for g in range(self.n_groups))
        counter.ops["add"] += self.n_groups - 1
        counter.ops["relinearize"] += counter.unrelinearized
        fold = sum(len(power_steps(r)) for r in self.fold_rotations())
        counter.ops["rotate"] += fold + 1
        counter.ops["add"] += len(self.fold_rotations()) + 1
        needed = worst + math.log2(max(self.n_groups, 1)) + 2 + fold
        if self.fold_mask:
            counter.ops["multiply_plain"] += 1
            needed += noise.plain
        self.ops = dict(counter.ops)
        self.budget_needed = needed
        q_bits = np.cumsum([math.log2(q) for q in self.params.q_primes])
        for level, log_q in enumerate(q_bits):
            if noise.fresh(log_q) - needed >= MARGIN_BITS:
                self.level, self.fresh_budget = level, noise.fresh(log_q)
                self._choose_answer_level(noise, q_bits)
                return
        raise PlanError(f"ForestPlan: the circuit needs about {needed:.0f} bits of noise budget plus a "
                        f"{MARGIN_BITS:.0f}-bit margin; these parameters give at most "
                        f"{noise.fresh(q_bits[-1]):.0f} fresh: use a larger ring (e.g. BFVN14QP438L7D8T20) "
                        "or a shallower model")

    def _choose_answer_level(self, noise: NoiseModel, q_bits: np.ndarray) -> None:
        """The answers are switched down to the lowest level whose estimated budget (the
        evaluation's noise plus the switch's rounding, magnitudes added) keeps the margin: fewer
        limbs to send back (a quarter of the bytes from 4 limbs to 1)."""
        for level in range(self.level + 1):
            left = self.budget_left if level == self.level else \
                -math.log2(2.0**-self.budget_left + 2.0**-noise.switched(q_bits[level]))
            if left >= MARGIN_BITS:
                self.answer_level, self.answer_budget = level, left
                return

    # -- derived ---------------------------------------------------------------------------------

    @property
    def budget_left(self) -> float:
        """Estimated budget after evaluation (the tests check the measured one is at least this)."""
        return self.fresh_budget - self.budget_needed

    def fold_rotations(self) -> list[int]:
        """Column rotations of the block fold, in the order the server applies them."""
        return [r for _, r in fold_program(self.layout) if r]

    @property
    def galois_elements(self) -> list[int]:
        from fhe_core import bfv

        return bfv.galois_elements(self.params.n, self.rotation_steps, column_swap=self.column_swap)

    def public_model(self, params_name: str | None = None) -> PublicModel:
        return PublicModel(
            kind=self.kind, params_name=params_name, params_literal=self.params.literal.to_json(),
            params_id=self.params.params_id, level=self.level, width=self.layout.width,
            n_classes=self.layout.n_classes, n_inputs=self.n_inputs,
            rotation_steps=list(self.rotation_steps), column_swap=self.column_swap,
            binning=self.binning, chunks=self.chunks,
            trees_per_class=self.trees_per_class,
        )


def fold_program(layout: Layout) -> list[tuple[str, int]]:
    """The block fold as a program on (acc, result): ("double", r): acc += rot_r(acc);
    ("take", r): result += rot_r(acc) (or result = acc at the first take, r = 0)."""
    steps, span, shift, blocks = [], 1, 0, layout.blocks
    block = layout.n_classes * layout.width
    while blocks:
        if blocks & 1:
            steps.append(("take", shift * block))
            shift += span
        blocks >>= 1
        if blocks:
            steps.append(("double", span * block))
            span *= 2
    return steps


def _fold_steps(layout: Layout) -> list[int]:
    return sorted({s for _, r in fold_program(layout) if r for s in power_steps(r)})


def _idash_plan(model: IdashModel, params: Params, layout: Layout) -> ForestPlan:
    if layout.blocks < 1:
        raise PlanError("ForestPlan: no room for one block of classes per row")
    per_class = model.trees_per_class
    per_group = 2 * layout.blocks
    n_groups = -(-per_class // per_group)
    n, t = params.n, params.plaintext_modulus
    forms = {}
    for g in range(n_groups):
        for p in range(3):
            forms[g, p, "test"] = LinearForm(n)
    for tree in range(len(model.leaves)):
        g, row, block, cls = _idash_position(tree, per_class, per_group, layout)
        slots = layout.lane_slots(row, layout.tree_column(block, cls))
        for p in range(3):
            y = int(model.thresholds[tree, p])
            form = forms[g, p, "test"]
            form.const[slots] = 1 - y
            x0, u = (g * 3 + p) * 2, (g * 3 + p) * 2 + 1
            mask = np.zeros(n, dtype=np.int64)
            mask[slots] = 1
            if y:
                form.add_term((0, False), x0, mask)
            else:
                form.add_term((0, False), u, -mask)
    _leaf_forms(forms, model.leaves, lambda tree: _idash_position(tree, per_class, per_group, layout),
                n_groups, 2, layout, t)
    return ForestPlan("idash", params, layout, 2, PathSchedule.for_depth(2), n_groups, n_groups * 6, forms,
                      np.zeros(model.n_classes, dtype=np.int64), model.score_bound, layout.blocks > 1,
                      _fold_steps(layout), True, trees_per_class=per_class)


def _idash_position(tree: int, per_class: int, per_group: int, layout: Layout) -> tuple[int, int, int, int]:
    """(group, row, block, class) of an iDASH tree: the trees of a class fill the groups' lanes in order."""
    cls, j = divmod(tree, per_class)
    g, lane = divmod(j, per_group)
    row, block = divmod(lane, layout.blocks)
    return g, row, block, cls


def _leaf_forms(forms: dict, leaves: np.ndarray, position, n_groups: int, depth: int, layout: Layout,
                t: int) -> None:
    """forms[g, node, "value"] for the nodes on level depth-1: Lr + (Ll - Lr) * test."""
    n = layout.n
    first = 2 ** (depth - 1) - 1
    weights = {(g, node): (np.zeros(n, np.int64), np.zeros(n, np.int64))
               for g in range(n_groups) for node in range(first, 2 * first + 1)}
    for tree in range(len(leaves)):
        placed = position(tree)
        if placed is None:
            continue
        g, row, block, cls = placed
        slots = layout.lane_slots(row, layout.tree_column(block, cls))
        for node in range(first, 2 * first + 1):
            left = leaves[tree, 2 * (node - first)]
            right = leaves[tree, 2 * (node - first) + 1]
            diff, offset = weights[g, node]
            diff[slots] = left - right
            offset[slots] = right
    for (g, node), (diff, offset) in weights.items():
        forms[g, node, "value"] = forms[g, node, "test"].scaled(diff, offset, t)


def _thermometer_plan(forest: HEForest, params: Params, layout: Layout) -> ForestPlan:
    if layout.blocks < 1:
        raise PlanError("ForestPlan: no room for one block of classes per row")
    n, t, half = params.n, params.plaintext_modulus, layout.half
    binning, lanes = forest.binning, 2 * layout.lanes_per_row
    counts = np.diff(binning.offsets)
    chunks, first = [], 0
    for start in range(0, binning.n_features, lanes):
        k = int(counts[start:start + lanes].max(initial=0))
        chunks.append((first, k))
        first += k + 1
    n_inputs = first
    # constant trees (every node padding) join the base; the others get lanes
    constant = forest.is_padding.all(axis=1)
    base = forest.base.astype(np.int64).copy()
    np.add.at(base, forest.tree_class[constant], forest.leaves[constant, 0])
    live = np.flatnonzero(~constant)
    if len(live) == 0:
        raise PlanError("ForestPlan: every tree of the model is a single leaf; nothing to evaluate encrypted")
    per_class_count = np.bincount(forest.tree_class[live], minlength=forest.n_classes)
    n_groups = int(-(-per_class_count.max() // (2 * layout.blocks)))
    depth = forest.depth
    forms = {(g, p, "test"): LinearForm(n) for g in range(n_groups) for p in range(2**depth - 1)}
    placement = _place_trees(forest, live, layout, n_groups, chunks)
    for tree, (g, row, block, cls) in placement.items():
        column = layout.tree_column(block, cls)
        for p in np.flatnonzero(~forest.is_padding[tree]):
            f = int(forest.feature[tree, p])
            q, lane = divmod(f, lanes)
            src_row, src_lane = divmod(lane, layout.lanes_per_row)
            src_col = src_lane * layout.width
            move = ((src_col - column) % half, src_row != row)
            mask = np.zeros(n, dtype=np.int64)
            mask[layout.lane_slots(src_row, src_col)] = 1
            chunk_first, k = chunks[q]
            forms[g, p, "test"].add_term(move, chunk_first + int(forest.bit[tree, p] - binning.offsets[f]), mask)
            if forest.default_left[tree, p]:
                forms[g, p, "test"].add_term(move, chunk_first + k, mask)
    _leaf_forms(forms, forest.leaves, placement.get, n_groups, depth, layout, t)
    steps = [1 << i for i in range(int(math.log2(half)))]
    return ForestPlan("thermometer", params, layout, depth, PathSchedule.for_depth(depth), n_groups, n_inputs,
                      forms, base, forest.score_bound, layout.blocks > 1, steps, True, binning=binning,
                      chunks=chunks, placement=placement)


def _place_trees(forest: HEForest, live: np.ndarray, layout: Layout, n_groups: int, chunks) -> dict:
    """tree -> (group, row, block, class): greedily the free lane of the tree's class that adds
    the fewest new moves (rotation steps) to its group's node tests."""
    half, lanes = layout.half, 2 * layout.lanes_per_row
    free = {c: [(g, row, block) for g in range(n_groups) for row in (0, 1) for block in range(layout.blocks)]
            for c in range(forest.n_classes)}
    moves: set = set()
    placement = {}
    for tree in live:
        cls = int(forest.tree_class[tree])
        nodes = np.flatnonzero(~forest.is_padding[tree])
        sources = []
        for p in nodes:
            lane = int(forest.feature[tree, p]) % lanes
            sources.append((int(p), lane // layout.lanes_per_row, (lane % layout.lanes_per_row) * layout.width))
        best, best_cost = None, math.inf
        for index, (g, row, block) in enumerate(free[cls]):
            column = layout.tree_column(block, cls)
            cost = 0
            for p, src_row, src_col in sources:
                move = ((src_col - column) % half, src_row != row)
                if (g, p, move) not in moves:
                    cost += len(power_steps(move[0])) + move[1] + 1
            if cost < best_cost:
                best, best_cost = index, cost
        g, row, block = free[cls].pop(best)
        column = layout.tree_column(block, cls)
        for p, src_row, src_col in sources:
            moves.add((g, p, ((src_col - column) % half, src_row != row)))
        placement[int(tree)] = (g, row, block, cls)
    return placement


# ---- what the client is told ----------------------------------------------------------------------


@dataclass(frozen=True)
class PublicModel:
    """What the client needs to encrypt: parameters, level, layout, the public binning (cuts
    and offsets of every feature: which of them the trees use is not said), the Galois keys.

    ``to_json`` / ``from_json`` round-trip it; ``params(allow_insecure=...)`` rebuilds Params.
    """

    kind: str
    params_literal: str
    params_id: str
    level: int
    width: int
    n_classes: int
    n_inputs: int
    rotation_steps: list[int]
    column_swap: bool
    params_name: str | None = None
    binning: PublicBinning | None = None
    chunks: list[tuple[int, int]] | None = None
    trees_per_class: int | None = None

    def params(self, *, allow_insecure: bool = False, device="cpu") -> Params:
        literal = ParamsLiteral.from_json(self.params_literal)
        params = Params.from_literal(literal, allow_insecure=allow_insecure, device=device)
        if params.params_id != self.params_id:
            raise PlanError("PublicModel: the parameter literal does not give the stated params_id")
        return params

    @property
    def layout(self) -> Layout:
        return Layout(2 ** ParamsLiteral.from_json(self.params_literal).log_n, self.width, self.n_classes)

    def galois_elements(self, n: int) -> list[int]:
        from fhe_core import bfv

        return bfv.galois_elements(n, self.rotation_steps, column_swap=self.column_swap)

    def to_json(self) -> str:
        data = {
            "version": PUBLIC_MODEL_VERSION, "kind": self.kind, "params_name": self.params_name,
            "params_literal": self.params_literal, "params_id": self.params_id, "level": self.level,
            "width": self.width, "n_classes": self.n_classes, "n_inputs": self.n_inputs,
            "rotation_steps": self.rotation_steps, "column_swap": self.column_swap,
            "trees_per_class": self.trees_per_class,
            "chunks": None if self.chunks is None else [list(c) for c in self.chunks],
            "binning": None if self.binning is None else {
                "cuts": [float(c) for c in self.binning.cuts],
                "offsets": [int(o) for o in self.binning.offsets]},
        }
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> PublicModel:
        try:
            data = json.loads(text)
        except (TypeError, ValueError, RecursionError) as exc:  # RecursionError: nesting too deep
            raise PlanError(f"PublicModel: not JSON ({exc})") from None
        expected = {"version", "kind", "params_name", "params_literal", "params_id", "level", "width",
                    "n_classes", "n_inputs", "rotation_steps", "column_swap", "trees_per_class", "chunks",
                    "binning"}
        if not isinstance(data, dict) or set(data) != expected:
            raise PlanError(f"PublicModel: expected the fields {sorted(expected)}")
        if data["version"] != PUBLIC_MODEL_VERSION:
            raise PlanError(f"PublicModel: version {data['version']!r} is not {PUBLIC_MODEL_VERSION}")
        if data["kind"] not in ("thermometer", "idash"):
            raise PlanError(f"PublicModel: unknown kind {data['kind']!r}")
        for name, low in (("level", 0), ("width", 1), ("n_classes", 1), ("n_inputs", 1)):
            if isinstance(data[name], bool) or not isinstance(data[name], int) or data[name] < low:
                raise PlanError(f"PublicModel: {name} must be an int >= {low}, got {data[name]!r}")
        if not isinstance(data["params_literal"], str) or not isinstance(data["params_id"], str):
            raise PlanError("PublicModel: params_literal and params_id must be strings")
        if not isinstance(data["rotation_steps"], list) or not all(
                isinstance(r, int) and not isinstance(r, bool) and r > 0 for r in data["rotation_steps"]):
            raise PlanError("PublicModel: rotation_steps must be a list of positive ints")
        binning = None
        if data["binning"] is not None:
            try:
                with np.errstate(over="ignore"):  # a cut beyond float32 becomes inf: refused below
                    binning = PublicBinning(np.asarray(data["binning"]["cuts"], dtype=np.float32),
                                            np.asarray(data["binning"]["offsets"], dtype=np.int64))
            except (KeyError, TypeError, ValueError, OverflowError):  # OverflowError: an int beyond int64
                raise PlanError("PublicModel: binning must be {cuts: [numbers], offsets: [ints]}") from None
            if not binning.offsets_index_cuts:
                raise PlanError("PublicModel: binning offsets do not index the cuts")
            if not np.isfinite(binning.cuts).all():
                raise PlanError("PublicModel: binning cuts must be finite float32 numbers")
        chunks = None
        if data["kind"] == "thermometer":
            try:
                chunks = [(int(first), int(k)) for first, k in data["chunks"]]
            except (TypeError, ValueError, OverflowError):  # OverflowError: int(1e999), an infinity
                raise PlanError("PublicModel: chunks must be [first input, cut count] pairs") from None
            if binning is None or sum(k + 1 for _, k in chunks) != data["n_inputs"] \
                    or [first for first, _ in chunks] != list(np.cumsum([0] + [k + 1 for _, k in chunks[:-1]])):
                raise PlanError("PublicModel: a thermometer model needs its binning and chunks that cover "
                                "its inputs")
        elif not isinstance(data["trees_per_class"], int) or data["trees_per_class"] < 1:
            raise PlanError("PublicModel: an idash model needs trees_per_class")
        return cls(kind=data["kind"], params_literal=data["params_literal"], params_id=data["params_id"],
                   level=data["level"], width=data["width"], n_classes=data["n_classes"],
                   n_inputs=data["n_inputs"], rotation_steps=[int(r) for r in data["rotation_steps"]],
                   column_swap=bool(data["column_swap"]), params_name=data["params_name"], binning=binning,
                   chunks=chunks, trees_per_class=data["trees_per_class"])


def named_params(name: str, *, allow_insecure: bool = False, device="cpu") -> Params:
    """A BFV preset by name (PlanError for an unknown or non-BFV name)."""
    if name not in BFV_PRESETS:
        raise PlanError(f"unknown BFV preset {name!r}; known: {sorted(BFV_PRESETS)}")
    return Params.from_literal(preset_literal(name), allow_insecure=allow_insecure, device=device)
