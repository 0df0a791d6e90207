"""The model-private encoding: what the client sends, the slot layout, the circuit, its noise and cost.

Goal: the client learns nothing of the forest beyond public bounds (no cut, threshold, feature index,
tree shape or leaf), sends a compact request, and gets back an answer whose ciphertext says nothing
of the circuit. Public: the BFV parameters, the number of features F and classes C, the grid (b, f)
(``grid``), ``max_trees_per_class`` T and ``max_depth`` D, and the batch width. Everything below is
a function of these alone (``PrivateLayout.build``): the client computes the same layout, level and
keys as the server, and the server's operation sequence, request and answer sizes do not depend on
the trees (only the plaintexts it multiplies by do).

**What the client sends.** Each feature value x becomes its grid cell q in [0, 2^b) (a missing value
the extra code 2^c0 of the top digit), written as k digits of c_0 >= ... bits (k = 1, 2 or 3: among
the splits the noise budget allows, the one with the fewest weighted operations,
``PrivateLayout.cost``). One slot per (digit, feature, sample): for digit i, feature f sits in
input ciphertext i C_in + f // 2P, row (f mod 2P) // P, lane f mod P, where the 2 x N/2 slot matrix is
cut into *lanes* of W columns (W = the batch width rounded up to a power of two, one sample per
column) and P = N / (2W) lanes per row: C_in = ceil(F / 2P) ciphertexts per digit, k C_in per batch.

**Routing (each node's feature with its own masks and rotations).** The server places the node
tests in *slabs*: slab p (heap position p of the complete depth-D tree) holds tree j of class c at
lane c B + j (B = T rounded up to a power of two; a slab is S = C B lanes, slabs fill rows in order,
C_out ciphertexts). Output lane (o, r_o, l_o) must receive input lane (c, r_i, l_i) of its node's
feature: a rotation by rho = l_i - l_o lanes (mod P), after a row swap when r_i != r_o, and a 0/1
mask. Every output lane may need any input lane, so the server evaluates all 2P (swap, rho)
diagonals of every (input, output) pair, as a baby-step giant-step matrix-vector product:
rho = g n1 + j, y = sum_g rot_{g n1}(A_g) + swap(sum_g rot_{g n1}(B_g)) with A_g, B_g = sum_{c,j}
mask ⊙ rot_j(x_c) (n1 baby rotations per input, shared by all outputs; 2 (P/n1 - 1) + 1 giant
moves per output; the inner products in ``ops.giant_products``). The masks are the only thing the
trees decide: unused diagonals multiply by zero. One mask layer, so one plaintext product's noise.

**The comparison.** Thresholds are grid indices k_theta (``grid``); a node tests q < k_theta, i.e.
lexicographically on digits: s = LT_0 + EQ_0 (LT_1 + EQ_1 (LT_2)), where LT_i(v) = [v < theta_i],
EQ_i(v) = [v = theta_i] on the digit's points (and on the top digit's missing code, LT_0 = the node's
default direction, EQ_0 = 0). Since the server knows theta, each is a *univariate* polynomial over Z_t
with per-slot plaintext coefficients (Lagrange interpolation on 2^c (+1) points): degree d = 2^c_i
(2^c_0 for the top digit, which has the missing code), depth ceil(log2 d), d - 1 products for the
powers, d plaintext products. Compared with the literature, per node and sample:

    method (b-bit values)                                     depth               ct x ct      client slots
    Iliashenko-Zucca, bivariate LT over F_p (PETS 2021)        log2 p              ~2p           1 (p > 2^b)
    univariate in x (threshold known to the server)            b                   ~2 sqrt(2^b)  1
    Level Up XXCMP (bitwise, CCS 2023)                         log2 b + 1          ~b log b      b
    Level Up RCC (range cover, constant weight codes)          O(log b)            O(b)          O(b) (codes)
    this: k digits of c = b/k bits, univariate per digit       c + ceil(log2 k)    k 2^c + k     k

SRBCT needs b = 6 (64 cells of 1/4 over [-8, 8) keep every test prediction): k = 1 would cost depth 6
(too deep for N = 2^14 with flooding, below), k = 2 digits of 3 bits cost depth 4, 14 products per
output ciphertext (not per node: every product serves all 2P W slots) and twice the routing of k = 1.
Bitwise (XXCMP, k = 6) would triple the routing, the dominant cost. SilentWood (arXiv 2411.15494)
clusters equal comparisons across trees to evaluate each once; under a fixed operation sequence the
slab already evaluates every (tree, node) comparison in one SIMD pass, so clustering would only
shrink the masks, not the work; it is not used.

The tree stage: slab p is moved onto slab 0's lanes (one row swap and/or one rotation), the trees'
paths are products of node tests (``plan.PathSchedule``, depth ceil(log2 D)); the leaf-level slabs
fold the leaves into their comparison coefficients (s' = Lr + (Ll - Lr) s costs no extra product).
Class sums: log2(B) rotate-and-adds inside each class block; one 0/1 mask keeps the C W score slots
(row 0, lane c B, the W samples) and zeroes everything else; the base scores (constant trees
included) are added. Single-leaf trees are constants: they join the base, and T bounds the trees
with a split.

**Padding.** The model is padded to the public bounds: trees shallower than D are completed (their
leaves copied), classes get T lanes whatever they use, unused lanes multiply by zero masks and zero
coefficients. A model beyond the bounds is refused (PlanError).

**Circuit privacy.** The answer is flooded (``fhe_core.bfv.privacy``): c + Enc_pk(0) + E with a
40-bit statistical margin, which needs ``flood_requirement(N)`` = 40 + log2 N + 5 bits of budget left
after the circuit; then switched down to the lowest level that still decrypts it exactly
(``plan.flooded_answer_level``: level 0 here, 2 N words). The plan budgets for it and
refuses parameters that cannot (the same holds for the thermometer and iDASH modes, ``plan``).

**Noise (conservative, ``plan.NoiseModel``: plaintext product log2 t + log2(N)/2 + 1 bits, ct x ct
product log2 t + log2(N)/2 + 6, sums add magnitudes, k key switches log2(1 + k)).** SRBCT on
BFVN14QP438L7D8T20 (N = 2^14, t = 786433, 8 primes, 357 fresh bits at the top): routing 44 bits,
powers 98, digit polynomials 31, one EQ x LT product 33, one path product 33, class sums 8, final
mask 28 (276 in all), flooding 59, margin 10: 345 <= 357, so the client encrypts at the top level.

**Bytes (SRBCT, 20 profiles, F = 2,308, C = 4, b = 6, T = 32, D = 2).** W = 32, P = 256: C_in = 5
ciphertexts per digit, 10 per batch of up to 32 profiles, at 8 primes of 48-49 bits: 20 MiB as 64-bit
words, 15.3 MiB bit-packed, 7.6 MiB as sent (secret-key encryptions, seeded: c_0 packed and the
32-byte seed of c_1; measured). The thermometer request before this encoding: 390 ciphertexts,
195.1 MiB. The answer: one ciphertext at level 0 (``plan.flooded_answer_level``), 256 KiB as words,
0.19 MiB packed. Keys (once per client): relinearization, 6 rotations and
the row swap at N = 2^14: 59 MB bit-packed with the public key (measured).

**Operations per batch (SRBCT):** routing 5,120 plaintext products (2 digits x 5 inputs x 512
diagonals, one output ciphertext: 3 slabs of 128 lanes) and 196 rotations (70 baby, 124 giant, 2
swaps); comparisons 14 products, 44 plaintext products; alignment 2 key switches; path 1 product;
class sums 5 rotations; mask 1; flooding 1 public-key encryption; 7 modulus switches. On an H200 the
routing streams 2.5 GiB of pre-lifted masks (~1 ms) and the ~200 key switches and 15 BEHZ products
are a few ms of kernels: the target (<= 100 ms, goal 20 ms) is within reach; on the 2-core CPU the
same work is ~1.2 G modular products plus ~200 key switches at N = 2^14, estimated at 20-30 s from
single-op timings on the loaded machine (~2 ms per plaintext product, ~60-90 ms per key switch,
~0.8 s per product) and measured at 7.9-9.7 s (``scripts/bench_xgboost.py``, docs/benchmarks.md:
the routing's 128-bit-accumulating ``giant_products`` beats the single-op estimate). The server
lifts its 2,560 routing masks once per model and key set (2.5 GiB; 12 s on that CPU).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field

import numpy as np

from fhe_core.bfv import flood_requirement
from fhe_core.params import Params

from .grid import FixedPointGrid
from .plan import MARGIN_BITS, NoiseModel, PathSchedule, PlanError, flooded_answer_level, power_steps, tree_value
from .private_forest import PrivateForest

MAX_DIGITS = 3
MAX_BABIES = 32  # ops.giant_products takes up to 32 baby steps
OP_WEIGHTS = {"rotate": 30, "multiply_relin": 200}  # in plaintext products (measured ratios, CPU and H200 alike)


@dataclass(frozen=True)
class PrivateBounds:
    """The public facts of a private model: F, C, the grid, T (trees with a split, per class), D."""

    n_features: int
    n_classes: int
    grid: FixedPointGrid
    max_trees_per_class: int
    max_depth: int

    def __post_init__(self) -> None:
        for name, low, high in (("n_features", 1, 1 << 24), ("n_classes", 1, 1 << 12),
                                ("max_trees_per_class", 1, 1 << 16), ("max_depth", 1, 10)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise PlanError(f"PrivateBounds: {name} must be an int in [{low}, {high}], got {value!r}")
        if not isinstance(self.grid, FixedPointGrid):
            raise PlanError(f"PrivateBounds: grid must be a FixedPointGrid, got {type(self.grid).__name__}")

    @classmethod
    def of(cls, forest: PrivateForest, max_trees_per_class: int | None = None,
           max_depth: int | None = None) -> PrivateBounds:
        """The bounds the model owner states, by default the forest's depth and its trees per class
        rounded up to a power of two (what the layout's class blocks reveal anyway)."""
        return cls(forest.n_features, forest.n_classes, forest.grid,
                   max_trees_per_class if max_trees_per_class is not None else _pow2_at_least(forest.trees_per_class),
                   max_depth if max_depth is not None else max(forest.depth, 1))


def _pow2_at_least(x: int) -> int:
    return 1 << max(x - 1, 0).bit_length()


# ---- the public layout ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PrivateLayout:
    """Everything the client and the server derive from (parameters, bounds, batch width) alone.

    Slots: lanes of ``width`` (W) columns, P = ``lanes`` per row, 2P per ciphertext. ``digits``: the
    digit widths (most significant first); ``inputs_per_digit`` C_in; ``outputs`` C_out (routed
    ciphertexts per digit); ``babies`` n1 and ``giants`` P / n1; ``block`` B (lanes per class),
    ``slab`` S = C B, ``slabs_per_row``; ``level`` of the client's ciphertexts, ``answer_level`` of
    the flooded answers (``plan.flooded_answer_level``), ``budget`` (bits: fresh, circuit, flooding,
    margin, left before flooding, answer) and ``ops`` per batch.
    """

    params: Params
    bounds: PrivateBounds
    width: int
    digits: tuple[int, ...]
    babies: int
    level: int = 0
    answer_level: int = 0
    budget: dict = field(default_factory=dict)
    ops: dict = field(default_factory=dict)

    # -- geometry --------------------------------------------------------------------------------

    @property
    def n(self) -> int:
        return self.params.n

    @property
    def half(self) -> int:
        return self.params.n // 2

    @property
    def lanes(self) -> int:
        """P: lanes per row."""
        return self.half // self.width

    @property
    def inputs_per_digit(self) -> int:
        return -(-self.bounds.n_features // (2 * self.lanes))

    @property
    def n_inputs(self) -> int:
        """Client ciphertexts per batch."""
        return len(self.digits) * self.inputs_per_digit

    @property
    def block(self) -> int:
        return _pow2_at_least(self.bounds.max_trees_per_class)

    @property
    def slab(self) -> int:
        return self.bounds.n_classes * self.block

    @property
    def slabs_per_row(self) -> int:
        return self.lanes // self.slab

    @property
    def n_slabs(self) -> int:
        return 2**self.bounds.max_depth - 1

    @property
    def outputs(self) -> int:
        rows = -(-self.n_slabs // self.slabs_per_row)
        return -(-rows // 2)

    @property
    def giants(self) -> int:
        return self.lanes // self.babies

    @property
    def schedule(self) -> PathSchedule:
        return PathSchedule.for_depth(self.bounds.max_depth)

    def degree(self, i: int) -> int:
        """Degree of digit i's polynomials: 2^c (+1 point, the missing code, on the top digit)."""
        return 2 ** self.digits[i] - (i > 0)

    def slab_place(self, p: int) -> tuple[int, int, int]:
        """(output ciphertext, row, first lane) of slab p."""
        row, k = divmod(p, self.slabs_per_row)
        return row // 2, row % 2, k * self.slab

    def slab_move(self, p: int) -> tuple[int, bool]:
        """(left rotation in columns, row swap) that brings slab p onto slab 0's lanes."""
        _, row, first = self.slab_place(p)
        return first * self.width, bool(row)

    def score_slots(self) -> np.ndarray:
        """`[C, W]` flat slots of the class scores in an answer (row 0, lane c B, the W samples)."""
        return (np.arange(self.bounds.n_classes)[:, None] * self.block * self.width
                + np.arange(self.width)[None, :])

    # -- keys --------------------------------------------------------------------------------------

    @property
    def rotation_steps(self) -> list[int]:
        """Left column rotations with a key: the babies' step W, the giants' n1 W, the class sums'
        W 2^i and the slab moves (as sums of powers of two times W)."""
        w = self.width
        steps = {w, self.babies * w} if self.lanes > 1 else set()
        steps |= {w << i for i in range(self.block.bit_length() - 1)}
        for p in range(1, self.n_slabs):
            steps |= {w * s for s in power_steps(self.slab_move(p)[0] // w)}
        return sorted(s for s in steps if s % self.half)

    @property
    def galois_elements(self) -> list[int]:
        from fhe_core import bfv

        return bfv.galois_elements(self.n, self.rotation_steps, column_swap=True)

    # -- construction -----------------------------------------------------------------------------

    @classmethod
    def build(cls, params: Params, bounds: PrivateBounds, width: int) -> PrivateLayout:
        """The layout with the fewest digits whose circuit fits ``params`` with flooding; PlanError
        if none does (or the bounds do not fit the slots)."""
        if not isinstance(params, Params) or params.scheme != "bfv":
            raise PlanError(f"PrivateLayout: needs BFV Params, got {params!r}")
        if not isinstance(bounds, PrivateBounds):
            raise PlanError(f"PrivateLayout: expected PrivateBounds, got {type(bounds).__name__}")
        half = params.n // 2
        if isinstance(width, bool) or not isinstance(width, int) or not 1 <= width <= half:
            raise PlanError(f"PrivateLayout: width (samples per batch) must be an int in [1, {half}], got {width!r}")
        lane_width = _pow2_at_least(width)
        lanes = half // lane_width
        if _pow2_at_least(bounds.max_trees_per_class) * bounds.n_classes > lanes:
            raise PlanError(f"PrivateLayout: {bounds.n_classes} classes x {bounds.max_trees_per_class} trees "
                            f"(rounded up to a power of two) exceed the {lanes} lanes of a row at width {lane_width}; "
                            "use a larger ring or fewer samples per batch")
        if bounds.grid.size + 1 >= params.plaintext_modulus:
            raise PlanError("PrivateLayout: the grid has more cells than the plaintext modulus can tell apart")
        fits, refusals = [], []
        for count in range(1, min(MAX_DIGITS, bounds.grid.bits) + 1):
            candidate = cls(params, bounds, lane_width, bounds.grid.digit_bits(count), 1)
            candidate = cls(params, bounds, lane_width, candidate.digits, candidate._best_babies())
            layout = candidate._with_level()
            if isinstance(layout, PrivateLayout):
                fits.append(layout)
            else:
                refusals.append(f"{count} digit(s): {layout}")
        if fits:
            return min(fits, key=lambda layout: (layout.cost, len(layout.digits)))
        raise PlanError("PrivateLayout: no digit split fits these parameters with flooding (" + "; ".join(refusals)
                        + "); use a larger ring (e.g. BFVN15QP881L14D15T17), a coarser grid or a shallower model")

    @property
    def cost(self) -> float:
        """The batch's operations weighted by their rough cost in plaintext products of the same
        size (a key switch ~30, a product with relinearization ~200): how the digit count is chosen."""
        return (self.ops["multiply_plain"] + OP_WEIGHTS["rotate"] * self.ops["rotate"]
                + OP_WEIGHTS["multiply_relin"] * self.ops["multiply_relin"])

    def _best_babies(self) -> int:
        """n1 (a power of two <= min(P, 32)) with the fewest rotations."""
        k, lanes = len(self.digits), self.lanes
        options = [1 << i for i in range(min(lanes, MAX_BABIES).bit_length())]
        return min(options, key=lambda n1: (k * self.inputs_per_digit * (n1 - 1)
                                            + k * self.outputs * 2 * (lanes // n1 - 1), n1))

    def _with_level(self) -> PrivateLayout | str:
        """This layout at the lowest level that leaves the flooding requirement plus the margin,
        or the reason none does."""
        noise = NoiseModel(math.log2(self.params.plaintext_modulus), self.params.log_n)
        consumed = self._noise(noise)
        flood = flood_requirement(self.n)
        q_bits = np.cumsum([math.log2(q) for q in self.params.q_primes])
        for level, log_q in enumerate(q_bits):
            fresh = noise.fresh(log_q)
            if fresh - consumed - flood >= MARGIN_BITS:
                answer_level, answer = flooded_answer_level(self.params, level, float(fresh - consumed))
                budget = {"fresh": float(fresh), "circuit": consumed, "flooding": flood, "margin": MARGIN_BITS,
                          "left": float(fresh - consumed), "answer": answer}
                layout = dataclasses.replace(self, level=level, answer_level=answer_level, budget=budget)
                return dataclasses.replace(layout, ops=layout._ops())
        return (f"needs {consumed:.0f} + {flood:.0f} (flooding) + {MARGIN_BITS:.0f} bits, "
                f"{noise.fresh(q_bits[-1]):.0f} fresh")

    # -- noise and operation counts (public: the padded circuit) -----------------------------------

    def _noise(self, noise: NoiseModel) -> float:
        """Bits of budget the padded circuit consumes (conservative, see the module docstring)."""
        chain = (self.babies - 1) + (self.giants - 1) + 1
        routed = noise.plain + math.log2(self.inputs_per_digit * 2 * self.lanes) + math.log2(1 + chain)
        tests = None
        for i in reversed(range(len(self.digits))):
            powers = _power_noise(self.degree(i), noise.product)
            polynomial = routed + powers + noise.plain + math.log2(self.degree(i) + 1)
            tests = polynomial if tests is None else _log_sum(polynomial, max(polynomial, tests) + noise.product)
        aligned = tests + math.log2(3)  # a swap and a rotation
        value = tree_value(_NoiseAlgebra(aligned, noise.product), self.schedule, 0)
        summed = value + math.log2(self.block) + math.log2(1 + self.block.bit_length() - 1)
        return summed + noise.plain

    def _ops(self) -> dict:
        k, lanes, n1 = len(self.digits), self.lanes, self.babies
        products = sum(self.degree(i) - 1 for i in range(k)) + (k - 1)
        plain = sum(self.degree(i) for i in range(k)) + sum(self.degree(i) for i in range(k - 1))
        moves = sum(len(power_steps(self.slab_move(p)[0] // self.width)) + self.slab_move(p)[1]
                    for p in range(1, self.n_slabs))
        giant_moves = 2 * (self.giants - 1) + 1
        return {
            "multiply_plain": k * self.outputs * self.inputs_per_digit * 2 * lanes + self.outputs * plain + 1,
            "multiply_relin": self.outputs * products + self.schedule.products,
            "rotate": (k * self.inputs_per_digit * (n1 - 1) + k * self.outputs * giant_moves + moves
                       + self.block.bit_length() - 1),
            "flood": 1,
            "mod_switch": self.level - self.answer_level,
        }

    # -- the client's side --------------------------------------------------------------------------

    def pack(self, digits: np.ndarray) -> np.ndarray:
        """Slot vectors `[batches * n_inputs, N]` int64 of digits `[k, n, F]` (``grid.digits``)."""
        k, n, n_features = digits.shape
        lanes, width = self.lanes, self.width
        f = np.arange(n_features)
        ct, position = np.divmod(f, 2 * lanes)
        first = (position // lanes) * self.half + (position % lanes) * width   # first slot per feature
        out = []
        for start in range(0, n, width):
            batch = digits[:, start:start + width]                             # [k, w, F]
            vectors = np.zeros((k * self.inputs_per_digit, self.n), dtype=np.int64)
            samples = np.arange(batch.shape[1])[:, None]
            for i in range(k):
                vectors[(i * self.inputs_per_digit + ct)[None, :], first[None, :] + samples] = batch[i]
            out.append(vectors)
        return np.concatenate(out)


def _log_sum(*bits: float) -> float:
    return math.log2(sum(2.0**b for b in bits))


@functools.cache
def _power_noise(degree: int, product: float) -> float:
    """Bits consumed by the powers x^2 .. x^degree (x^e = x^a x^(e-a), a the largest power of two
    below e): the worst of them."""
    depth = {1: 0.0}
    for e in range(2, degree + 1):
        a = 1 << (e - 1).bit_length() - 1
        depth[e] = max(depth[a], depth[e - a]) + product
    return max(depth.values())


class _NoiseAlgebra:
    """tree_value's walk on bits consumed: every node value starts at ``start``."""

    def __init__(self, start: float, product: float):
        self.start, self.product = start, product

    def depth1(self, group, node):
        return self.start

    test = depth1

    def mul(self, a, b, final):
        return max(a, b) + self.product

    def add(self, a, b):
        return _log_sum(a, b)

    sub = add

    def one_minus(self, a):
        return a


# ---- the server's plan: the model's plaintexts in the public layout ------------------------------


@dataclass
class PrivatePlan:
    """A private forest laid out for evaluation (server side only).

    ``masks`` `[C_out, C_in, 2, G, n1, N]` uint8: the routing's baby-step masks (slot vectors) for
    output o, input c, row swap, giant g, baby j (see the module docstring); ``coefficients[o][i]``:
    (LT `[d+1, N]`, EQ `[d+1, N]` or None for the last digit) int64 mod t, the comparison
    polynomials of digit i at every slot of output o (leaf-level slabs with the leaves folded in);
    ``score_mask`` and ``base`` `[N]`.
    """

    layout: PrivateLayout
    masks: np.ndarray
    coefficients: list
    score_mask: np.ndarray
    base: np.ndarray

    # the ForestPlan attributes that reports and benchmarks read
    ops = property(lambda self: self.layout.ops)
    level = property(lambda self: self.layout.level)
    n_inputs = property(lambda self: self.layout.n_inputs)
    flooding = property(lambda self: self.layout.budget["flooding"])
    budget_left = property(lambda self: self.layout.budget["left"])
    answer_level = property(lambda self: self.layout.answer_level)
    answer_budget = property(lambda self: self.layout.budget["answer"])

    @classmethod
    def build(cls, forest: PrivateForest, params: Params, *, width: int, max_trees_per_class: int | None = None,
              max_depth: int | None = None) -> PrivatePlan:
        """Lay ``forest`` out under the public bounds (the forest's own by default); PlanError if it
        exceeds them or the parameters cannot evaluate it exactly."""
        if not isinstance(forest, PrivateForest):
            raise PlanError(f"PrivatePlan: expected a PrivateForest, got {type(forest).__name__}")
        bounds = PrivateBounds.of(forest, max_trees_per_class, max_depth)
        if forest.trees_per_class > bounds.max_trees_per_class or forest.depth > bounds.max_depth:
            raise PlanError(f"PrivatePlan: the model has up to {forest.trees_per_class} trees with a split per class "
                            f"and depth {forest.depth}, beyond the public bounds {bounds.max_trees_per_class} and "
                            f"{bounds.max_depth}")
        t = params.plaintext_modulus if isinstance(params, Params) else 0
        if 2 * forest.score_bound >= t:
            raise PlanError(f"PrivatePlan: class scores reach +-{forest.score_bound}, the plaintext modulus t = {t} "
                            f"holds only +-{(t - 1) // 2}: use fewer fractional bits")
        layout = PrivateLayout.build(params, bounds, width)
        return cls(layout, *_plaintexts(_deepen(forest, bounds.max_depth), layout))


def _deepen(forest: PrivateForest, depth: int) -> PrivateForest:
    """The forest as complete trees of ``depth`` (new nodes are padding, leaves are copied)."""
    extra = depth - forest.depth
    if extra == 0:
        return forest
    n_trees, nodes = len(forest.leaves), 2**depth - 1
    old = 2**forest.depth - 1

    def nodes_of(a, fill):
        out = np.full((n_trees, nodes), fill, dtype=a.dtype)
        out[:, :old] = a
        return out

    return dataclasses.replace(
        forest, depth=depth, feature=nodes_of(forest.feature, 0),
        threshold_index=nodes_of(forest.threshold_index, 0), default_left=nodes_of(forest.default_left, 1),
        is_padding=nodes_of(forest.is_padding, True), leaves=np.repeat(forest.leaves, 2**extra, axis=1),
        leaves_float=np.repeat(forest.leaves_float, 2**extra, axis=1))


def _plaintexts(forest: PrivateForest, layout: PrivateLayout):
    """(masks, coefficients, score mask, base) of ``forest`` (already of the layout's depth)."""
    n, t, width, lanes = layout.n, layout.params.plaintext_modulus, layout.width, layout.lanes
    depth, k = layout.bounds.max_depth, len(layout.digits)
    live = np.flatnonzero(~forest.is_constant)
    cls = forest.tree_class[live]
    rank = np.zeros(len(live), dtype=np.int64)  # the tree's place within its class block
    for c in range(forest.n_classes):
        rank[cls == c] = np.arange((cls == c).sum())
    # one row per (live tree, node position): where its test sits and what it tests
    tree = np.repeat(np.arange(len(live)), 2**depth - 1)
    node = np.tile(np.arange(2**depth - 1), len(live))
    places = np.array([layout.slab_place(p) for p in range(layout.n_slabs)])  # [slabs, 3]
    out_ct, out_row = places[node, 0], places[node, 1]
    out_lane = places[node, 2] + cls[tree] * layout.block + rank[tree]
    index = live[tree]
    padding = forest.is_padding[index, node]
    feature = forest.feature[index, node]
    in_ct, position = np.divmod(feature, 2 * lanes)
    in_row, in_lane = position // lanes, position % lanes

    masks = np.zeros((layout.outputs, layout.inputs_per_digit, 2, layout.giants, layout.babies, 2, lanes, width),
                     dtype=np.uint8)
    routed = ~padding
    g, j = np.divmod((in_lane - out_lane) % lanes, layout.babies)
    swap = (in_row != out_row).astype(np.int64)
    masks[out_ct[routed], in_ct[routed], swap[routed], g[routed], j[routed], in_row[routed],
          ((out_lane + g * layout.babies) % lanes)[routed]] = 1
    masks = masks.reshape(masks.shape[:5] + (n,))

    # comparison coefficients per node, then spread over the node's W slots
    widths = layout.digits
    theta = forest.threshold_index[index, node]
    dl = forest.default_left[index, node]
    leaf_level = node >= 2 ** (depth - 1) - 1
    first = 2 * (node - (2 ** (depth - 1) - 1))
    right = np.where(leaf_level, forest.leaves[index, np.clip(first + 1, 0, None)], 0)
    delta = np.where(leaf_level, forest.leaves[index, np.clip(first, 0, None)] - right, 1)
    slot = out_row * layout.half + out_lane * width                              # first slot of each node
    coefficients = [[None] * k for _ in range(layout.outputs)]
    shift = layout.bounds.grid.bits
    for i in range(k):
        shift -= widths[i]
        digit = theta >> shift if i == 0 else (theta >> shift) & ((1 << widths[i]) - 1)
        points = np.arange(layout.degree(i) + 1)
        lt = (points[None, :] < digit[:, None]).astype(np.int64)
        eq = (points[None, :] == digit[:, None]).astype(np.int64)
        if i == 0:  # the missing code: the default direction, never equal
            lt[:, -1], eq[:, -1] = dl, 0
        polys = [_interpolate(lt, t)] + ([_interpolate(eq, t)] if i < k - 1 else [])
        if i == 0:  # s' = Lr + (Ll - Lr) s on the leaf level (delta = 1, right = 0 elsewhere)
            polys = [np.mod(p * np.mod(delta, t)[:, None], t) for p in polys]
            polys[0][:, 0] = np.mod(polys[0][:, 0] + right, t)
        for o in range(layout.outputs):
            mine = (out_ct == o) & ~(padding & ~leaf_level)  # upper padding nodes: tests never read
            spread = []
            for poly in polys:
                full = np.zeros((poly.shape[1], n), dtype=np.int64)
                columns = slot[mine][:, None] + np.arange(width)[None, :]
                full[:, columns] = poly[mine].T[:, :, None]
                spread.append(full)
            coefficients[o][i] = (spread[0], spread[1] if len(spread) > 1 else None)
    score_mask = np.zeros(n, dtype=np.int64)
    score_mask[layout.score_slots()] = 1
    base = forest.base.copy()
    constant = forest.is_constant
    np.add.at(base, forest.tree_class[constant], forest.leaves[constant, 0])
    base_slots = np.zeros(n, dtype=np.int64)
    base_slots[layout.score_slots()] = np.mod(base, t)[:, None]
    return masks, coefficients, score_mask, base_slots


def _interpolate(values: np.ndarray, t: int) -> np.ndarray:
    """Coefficients `[m, d+1]` mod t of the polynomials of degree <= d taking ``values`` `[m, d+1]`
    at the points 0..d."""
    inverse = _inverse_vandermonde(values.shape[1], t)
    return np.mod(values @ inverse.T, t)  # values are 0/1 (or default_left): products < 2^62


@functools.cache
def _inverse_vandermonde(points: int, t: int) -> np.ndarray:
    """V^-1 mod t for V[r, e] = r^e, r, e < points: column r holds the coefficients of the Lagrange
    polynomial of point r (int64, entries < t)."""
    full = [1]
    for m in range(points):  # prod_m (x - m), coefficients low to high
        full = [(a - m * b) % t for a, b in zip([0] + full, full + [0])]
    inverse = np.zeros((points, points), dtype=np.int64)
    for r in range(points):
        quotient, carry = [0] * points, 0
        for e in range(points, 0, -1):  # synthetic division of prod by (x - r)
            carry = (full[e] + carry * r) % t
            quotient[e - 1] = carry
        scale = pow(math.prod(r - m for m in range(points) if m != r) % t, -1, t)
        inverse[:, r] = [(c * scale) % t for c in quotient]
    return inverse
