"""The server half of encrypted tree-ensemble inference: the evaluator (no secret key).

``ForestEvaluator(params, keys, model)`` builds the :class:`~apps.xgboost.plan.ForestPlan`
(layout, node-test forms, path schedule, level), encodes the circuit's plaintexts once (on first
use), and then evaluates batches: ``evaluate(cts)`` takes the client's ciphertexts (``plan.n_inputs``
per batch, any number of batches back to back) and returns one ciphertext of class scores per
batch (scores of sample s, class c in row 0, column c W + s). See ``plan`` for the layout and
the op counts.

What the client sees: its scores, and nothing of the other slots (zero, a copy of the scores,
or masked to zero after a block fold). Circuit privacy in the strong sense (noise flooding, so
that the result's noise says nothing about the circuit) is not provided.
"""
from __future__ import annotations

import numpy as np

from fhe_core import bfv
from fhe_core.errors import LevelMismatchError, ParamsMismatchError
from fhe_core.params import Params
from fhe_core.rlwe import Ciphertext, EvalKeySet

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
        return self.encoder.encode(np.mod(values, self.t))

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
        model: an :class:`HEForest` or an :class:`IdashModel`.
        width: samples per batch (must match the client's public model); default the most the
            slots hold. ``plan``: a prebuilt plan instead.
        stacked: run the tree stage on all groups at once (:mod:`batched`); False runs it group
            by group through the evaluator (the reference path; both give the same words).

    Holds no secret key. ``plan`` states the level, noise budget, keys and op counts.
    """

    def __init__(self, params: Params, keys: EvalKeySet, model: HEForest | IdashModel, *,
                 width: int | None = None, plan: ForestPlan | None = None, stacked: bool = True):
        self.plan = plan if plan is not None else ForestPlan.build(model, params, width=width)
        if self.plan.params.params_id != params.params_id:
            raise ParamsMismatchError("ForestEvaluator: the plan belongs to other parameters")
        self.ctx = bfv.BFVContext(params)
        self.evaluator = bfv.Evaluator(self.ctx, keys)
        self._check_keys(keys)
        self.encoder = bfv.BatchEncoder(self.ctx)
        self._alg = _CipherAlgebra(self.evaluator, self.encoder, self.plan.forms, self.ctx.t)
        self._stacked = StackedAlgebra(self.plan, self.evaluator, self.encoder, self._alg) if stacked else None
        self._finish = self._final_plaintexts()

    def _check_keys(self, keys: EvalKeySet) -> None:
        if not isinstance(keys, EvalKeySet):
            raise PlanError(f"ForestEvaluator: keys must be an EvalKeySet, got {type(keys).__name__}")
        missing = sorted(set(self.plan.galois_elements) - keys.galois_elements)
        if missing or not keys.has_relin:
            relin = "" if keys.has_relin else "the relinearization key and "
            raise PlanError(f"ForestEvaluator: the key set lacks {relin}Galois keys for elements {missing}; "
                            "generate exactly the public model's keys")

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

    def evaluate(self, cts: list[Ciphertext]) -> list[Ciphertext]:
        """Encrypted class scores: one ciphertext per batch of ``plan.n_inputs`` inputs."""
        batches = self._check_inputs(cts)
        return [self._evaluate_batch(cts[b * self.plan.n_inputs:(b + 1) * self.plan.n_inputs])
                for b in range(batches)]

    def _check_inputs(self, cts) -> int:
        plan = self.plan
        if not isinstance(cts, (list, tuple)) or not cts:
            raise PlanError("ForestEvaluator.evaluate: expected a non-empty list of ciphertexts")
        if len(cts) % plan.n_inputs:
            raise PlanError(f"ForestEvaluator.evaluate: got {len(cts)} ciphertexts, expected a multiple of "
                            f"{plan.n_inputs} (the inputs of one batch)")
        for i, ct in enumerate(cts):
            if not isinstance(ct, Ciphertext):
                raise PlanError(f"ForestEvaluator.evaluate: input {i} is a {type(ct).__name__}, not a Ciphertext")
            if ct.params_id != self.ctx.params_id:
                raise ParamsMismatchError(f"ForestEvaluator.evaluate: input {i} belongs to other parameters")
            if ct.level != plan.level or ct.degree != 1:
                raise LevelMismatchError(f"ForestEvaluator.evaluate: input {i} is at level {ct.level}, degree "
                                         f"{ct.degree}; the plan needs level {plan.level}, degree 1")
            if ct.device != self.ctx.device:
                raise PlanError(f"ForestEvaluator.evaluate: input {i} is on {ct.device}, the evaluator on "
                                f"{self.ctx.device}")
        return len(cts) // plan.n_inputs

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
        result = result if base is None else ev.add_plain(result, base)
        return ev.mod_switch_to(result, plan.answer_level)  # the smallest modulus that still decrypts exactly
