"""The server half of encrypted tree-ensemble inference: the evaluator (no secret key).

``ForestEvaluator(params, keys, model)`` builds the :class:`~apps.xgboost.plan.ForestPlan`
(layout, node-test forms, path schedule, level), encodes the circuit's plaintexts once (on first
use), and then evaluates batches: ``evaluate(cts)`` takes the client's ciphertexts (``plan.n_inputs``
per batch, any number of batches back to back) and returns one ciphertext of class scores per
batch (scores of sample s, class c in row 0, column c W + s). See ``plan`` for the layout and
the op counts.

What the client sees: its scores, and nothing of the other slots (zero, a copy of the scores,
or masked to zero after a block fold). Every answer is flooded with the client's public key
(``fhe_core.bfv.flood``: its c1 is re-randomized and its noise sits at the flooding level, within
2^-40 of a distribution that does not depend on the circuit) and switched down to
``plan.answer_level``, the lowest level that still decrypts it exactly.
"""
from __future__ import annotations

import inspect
import weakref

import numpy as np

from fhe_core import bfv
from fhe_core.errors import LevelMismatchError, ParamsMismatchError
from fhe_core.params import Params
from fhe_core.rlwe import Ciphertext, EvalKeySet, PublicKey
from fhe_core.rlwe.checks import check_canonical_all
from fhe_core.rlwe.graphs import GraphedFunction
from fhe_core.rlwe.sampling import sub_seed

from .batched import StackedAlgebra
from .export import HEForest
from .plan import ForestPlan, IdashModel, LinearForm, PlanError, fold_program, power_steps, tree_value


class _Encoded:
    """A linear form with its plaintexts encoded: const (or None) and
    [(move, [(input index, plaintext)])]."""

    def __init__(self, form: LinearForm, encoder: bfv.BatchEncoder):
        self.const = encoder.encode(form.const) if form.const.any() else None
        self.terms = [(move, [(k, encoder.encode(c)) for k, c in sorted(by_source.items())])
                      for move, by_source in sorted(form.terms.items())]
        self.plain = form.const if form.is_plain else None


class _CipherAlgebra:
    """The circuit's operations on ciphertexts (or plaintext vectors where a value is public)."""

    def __init__(self, evaluator: bfv.Evaluator, encoder: bfv.BatchEncoder, forms: dict, t: int):
        self.ev, self.encoder, self.t = evaluator, encoder, t
        self.forms = forms  # (group, node, kind) -> LinearForm
        self._encoded: dict = {}
        self._public: dict[bytes, object] = {}  # public slot values -> their plaintext
        self.inputs: list[Ciphertext] = []
        self._ones = None

    # values: Ciphertext or np.ndarray (slots mod t)
    def encoded(self, key) -> _Encoded:
        """The form's plaintexts, encoded on first use (the stacked path needs only some)."""
        if key not in self._encoded:
            self._encoded[key] = _Encoded(self.forms[key], self.encoder)
        return self._encoded[key]

    def _materialize(self, enc: _Encoded):
        if enc.plain is not None:
            return enc.plain
        buckets: dict[bool, dict[int, Ciphertext]] = {False: {}, True: {}}  # swap -> {r: ct}
        for (r, swap), sources in enc.terms:
            acc = None
            for k, pt in sources:
                product = self.ev.multiply_plain(self.inputs[k], pt)
                acc = product if acc is None else self.ev.add(acc, product)
            buckets[swap][r] = acc
        total = None
        for swap, items in buckets.items():
            if items:
                moved = self.rotate_sum(items)
                moved = self.ev.swap_columns(moved) if swap else moved
                total = moved if total is None else self.ev.add(total, moved)
        return total if enc.const is None else self.ev.add_plain(total, enc.const)

    def rotate_sum(self, items: dict[int, Ciphertext]) -> Ciphertext:
        """sum over r of rot_r(items[r]) with power-of-two rotations, lowest bit first: items
        whose remaining shifts become equal are added before they move on (``rotation_plan``)."""
        bit = 1
        while len(items) > 1 or 0 not in items:
            merged: dict[int, Ciphertext] = {}
            for r, ct in items.items():
                if r & bit:
                    ct, r = self.ev.rotate_rows(ct, bit), r - bit
                merged[r] = self.ev.add(merged[r], ct) if r in merged else ct
            items, bit = merged, bit << 1
        return items[0]

    def move(self, ct: Ciphertext, move: tuple[int, bool]) -> Ciphertext:
        r, swap = move
        if swap:
            ct = self.ev.swap_columns(ct)
        for step in power_steps(r):
            ct = self.ev.rotate_rows(ct, step)
        return ct

    def depth1(self, group, node):
        return self._materialize(self.encoded((group, node, "value")))

    def test(self, group, node):
        return self._materialize(self.encoded((group, node, "test")))

    def _pt(self, values: np.ndarray):
        """A public value's plaintext, encoded once: every batch meets the same values (no re-encoding and no
        host-to-device copy per batch, nothing a CUDA graph could not replay)."""
        values = np.mod(values, self.t)
        key = values.tobytes()
        if key not in self._public:
            self._public[key] = self.encoder.encode(values)
        return self._public[key]

    def _linear(self, ct: Ciphertext) -> Ciphertext:
        return self.ev.relinearize(ct) if ct.degree == 2 else ct

    def mul(self, a, b, final):
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return np.mod(a * b, self.t)
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            ct, plain = (b, a) if isinstance(a, np.ndarray) else (a, b)
            return self.ev.multiply_plain(ct, self._pt(plain))
        product = self.ev.multiply(a, b)
        return product if final else self.ev.relinearize(product)

    def add(self, a, b, sign: int = 1):
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return np.mod(a + sign * b, self.t)
        if isinstance(b, np.ndarray):
            return self.ev.add_plain(self._linear(a), self._pt(sign * b))
        if isinstance(a, np.ndarray):
            b = self._linear(b)
            return self.ev.add_plain(b if sign == 1 else self.ev.negate(b), self._pt(a))
        return self.ev.add(a, b) if sign == 1 else self.ev.sub(a, b)

    def sub(self, a, b):
        return self.add(a, b, -1)

    def one_minus(self, a):
        if isinstance(a, np.ndarray):
            return np.mod(1 - a, self.t)
        if self._ones is None:
            self._ones = self.encoder.encode(np.ones(self.encoder.slot_count, dtype=np.int64))
        return self.ev.add_plain(self.ev.negate(self._linear(a)), self._ones)


class ForestEvaluator:
    """Evaluates an exported forest (or the iDASH model) on encrypted, client-packed samples.

    Args:
        params: BFV parameters (the client's).
        keys: the client's evaluation keys: relinearization and the plan's Galois keys.
        public_key: the client's public key (to flood the answers).
        model: an :class:`HEForest` or an :class:`IdashModel`.
        width: samples per batch (must match the client's public model); default the most the
            slots hold. ``plan``: a prebuilt plan instead.
        stacked: run the tree stage on all groups at once (:mod:`batched`); False runs it group
            by group through the evaluator (the reference path; both give the same words).
        graphed: replay each batch from a CUDA graph captured on the first (:class:`GraphedBatches`; CUDA only;
            the same words as eager).

    Holds no secret key. ``plan`` states the level, noise budget, keys and op counts.
    """

    def __init__(self, params: Params, keys: EvalKeySet, model: HEForest | IdashModel, *, public_key: PublicKey,
                 width: int | None = None, plan: ForestPlan | None = None, stacked: bool = True,
                 graphed: bool = False):
        self.plan = plan if plan is not None else ForestPlan.build(model, params, width=width)
        if self.plan.params.params_id != params.params_id:
            raise ParamsMismatchError("ForestEvaluator: the plan belongs to other parameters")
        self.ctx = bfv.BFVContext(params)
        check_keys("ForestEvaluator", keys, self.plan.galois_elements, public_key, params.params_id)
        self.evaluator = bfv.Evaluator(self.ctx, keys)
        self.public_key = public_key
        self.encoder = bfv.BatchEncoder(self.ctx)
        self._alg = _CipherAlgebra(self.evaluator, self.encoder, self.plan.forms, self.ctx.t)
        self._stacked = StackedAlgebra(self.plan, self.evaluator, self.encoder, self._alg) if stacked else None
        self._finish = self._final_plaintexts()
        # not a bound method of this object kept on it (a reference cycle: the model's device memory would wait for
        # the cycle collector once the model is dropped)
        self._graphed_batches = GraphedBatches(self.ctx, self._evaluate_batch, "ForestEvaluator") if graphed else None

    def _final_plaintexts(self):
        """(mask or None, base) plaintexts of the result's score slots."""
        layout, plan = self.plan.layout, self.plan
        slots = layout.score_slots()
        base = np.zeros(self.ctx.n, dtype=np.int64)
        base[slots] = plan.base[:, None]
        if not plan.fold_mask:
            base[slots + layout.half] = plan.base[:, None]  # row 1 holds the same scores
        mask = None
        if plan.fold_mask:
            ones = np.zeros(self.ctx.n, dtype=np.int64)
            ones[slots] = 1
            mask = self.encoder.encode(ones)
        return mask, (self.encoder.encode(np.mod(base, self.ctx.t)) if base.any() else None)

    def evaluate(self, cts: list[Ciphertext], *, seed: bytes | None = None) -> list[Ciphertext]:
        """Encrypted class scores: one flooded ciphertext at ``plan.answer_level`` per batch of ``plan.n_inputs``
        inputs. ``seed``: fixes the flooding (tests only)."""
        batches = check_batches("ForestEvaluator.evaluate", cts, self.plan.n_inputs, self.plan.level, self.ctx)
        evaluate = self._graphed_batches or self._evaluate_batch
        return flooded_answers(self.evaluator, [evaluate(batch) for batch in batches], self.public_key,
                               self.plan.answer_level, seed)

    def _evaluate_batch(self, inputs: list[Ciphertext]) -> Ciphertext:
        ev, alg, plan = self.evaluator, self._alg, self.plan
        alg.inputs = list(inputs)
        try:
            if self._stacked is not None:
                self._stacked.inputs = alg.inputs
                acc = self._stacked.sum_groups(tree_value(self._stacked, plan.schedule, 0))
            else:
                acc = None
                for g in range(plan.n_groups):
                    value = tree_value(alg, plan.schedule, g)
                    acc = value if acc is None else ev.add(acc, value)
        finally:
            alg.inputs = []
            if self._stacked is not None:
                self._stacked.inputs = []
        acc = alg._linear(acc)
        result = None
        for op, r in fold_program(plan.layout):
            if op == "take":
                piece = alg.move(acc, (r, False))
                result = piece if result is None else ev.add(result, piece)
            else:
                acc = ev.add(acc, alg.move(acc, (r, False)))
        result = ev.add(result, ev.swap_columns(result))
        mask, base = self._finish
        if mask is not None:
            result = ev.multiply_plain(result, mask)
        return result if base is None else ev.add_plain(result, base)


class GraphedBatches:
    """A server's batch evaluation replayed from a CUDA graph captured on the first batch
    (:class:`fhe_core.rlwe.graphs.GraphedFunction`): an eager evaluation at N = 2^13 - 2^14 issues a few hundred
    to a few thousand short kernels from Python, and the host time exceeds the device time several times over.

    One graph serves every batch: a plan's batches run the same circuit on the same shapes and levels, with the
    server's fixed plaintexts (encoded and lifted during the warm-up runs, then kept); flooding, which draws fresh
    randomness per answer, runs eagerly after it. The residue range check of the client's ciphertexts, which the
    graph skips, runs before it (``check_batches``: the inputs arrive marked). Same words as the eager evaluation
    (the same kernels on the same data).
    Holds the graph's memory pool (one batch's intermediates) while the server lives; not for concurrent use."""

    def __init__(self, ctx: bfv.BFVContext, evaluate_batch, owner: str):
        if ctx.device.type != "cuda":
            raise PlanError(f"{owner}: graphed=True needs a CUDA device (CUDA graphs), these parameters run on "
                            f"{ctx.device}")
        # the evaluator keeps this object: hold its method weakly, or the pair would be a reference cycle that keeps
        # the graph's memory pool until the cycle collector runs (fhe_core.rlwe.graphs.GraphedFunction does the same)
        evaluate = weakref.WeakMethod(evaluate_batch) if inspect.ismethod(evaluate_batch) else lambda: evaluate_batch
        self._graphed = GraphedFunction(lambda *cts: (evaluate()(list(cts)),))

    def __call__(self, inputs: list[Ciphertext]) -> Ciphertext:
        """The answer of one batch of checked inputs (``check_batches``)."""
        (answer,) = self._graphed(*inputs)
        return answer


def check_keys(owner: str, keys: EvalKeySet, elements: list[int], public_key: PublicKey, params_id: str) -> None:
    """PlanError unless ``keys`` hold the relinearization key and the Galois keys of ``elements``,
    and ``public_key`` is the client's PublicKey of these parameters (the answers are flooded with it)."""
    if not isinstance(keys, EvalKeySet):
        raise PlanError(f"{owner}: keys must be an EvalKeySet, got {type(keys).__name__}")
    missing = sorted(set(elements) - keys.galois_elements)
    if missing or not keys.has_relin:
        relin = "" if keys.has_relin else "the relinearization key and "
        raise PlanError(f"{owner}: the key set lacks {relin}Galois keys for elements {missing}; "
                        "generate exactly the public model's keys")
    if not isinstance(public_key, PublicKey) or public_key.params_id != params_id:
        raise PlanError(f"{owner}: the answers are flooded with the client's public key: give the PublicKey of "
                        "these parameters")


def check_batches(op: str, cts, per_batch: int, level: int, ctx: bfv.BFVContext) -> list[list[Ciphertext]]:
    """The client's ciphertexts cut into batches of ``per_batch``, each checked (type, parameters,
    level, degree 1, device, and every residue in range, with one device sync for all: marked canonical, the
    circuit does not check them again); PlanError (or the typed mismatch error) naming ``op`` otherwise."""
    if not isinstance(cts, (list, tuple)) or not cts:
        raise PlanError(f"{op}: expected a non-empty list of ciphertexts")
    if len(cts) % per_batch:
        raise PlanError(f"{op}: got {len(cts)} ciphertexts, expected a multiple of {per_batch} (the inputs of one "
                        "batch)")
    for i, ct in enumerate(cts):
        if not isinstance(ct, Ciphertext):
            raise PlanError(f"{op}: input {i} is a {type(ct).__name__}, not a Ciphertext")
        if ct.params_id != ctx.params_id:
            raise ParamsMismatchError(f"{op}: input {i} belongs to other parameters")
        if ct.level != level or ct.degree != 1:
            raise LevelMismatchError(f"{op}: input {i} is at level {ct.level}, degree {ct.degree}; the plan needs "
                                     f"level {level}, degree 1")
        if ct.device != ctx.device:
            raise PlanError(f"{op}: input {i} is on {ct.device}, the evaluator on {ctx.device}")
    check_canonical_all(ctx.rlwe, cts, op)
    return [list(cts[b:b + per_batch]) for b in range(0, len(cts), per_batch)]


def flooded_answers(evaluator: bfv.Evaluator, scores: list[Ciphertext], public_key: PublicKey, level: int,
                    seed: bytes | None) -> list[Ciphertext]:
    """What leaves the server: each batch's scores flooded (``fhe_core.bfv.flood``), then switched
    down to ``level`` (the plan's ``answer_level``: the smallest modulus that still decrypts them
    exactly, ``plan.flooded_answer_level``). ``seed``: tests only."""
    return [evaluator.mod_switch_to(bfv.flood(evaluator.ctx, ct, public_key, seed=sub_seed(seed, f"flood/{b}")),
                                    level)
            for b, ct in enumerate(scores)]
