"""The server half of the model-private encoding: routing, comparisons, paths, class sums, flooding.

``PrivateForestEvaluator(params, keys, forest, public_key, width=...)`` lays the forest out
(:class:`~apps.xgboost.private_plan.PrivatePlan`), lifts its plaintexts once (the routing masks,
``[C_out, 2, G, C_in n1, l+1, N]`` words on the device: 2.5 GiB for SRBCT at N = 2^14) and evaluates
batches of ``layout.n_inputs`` client ciphertexts into one answer each: the class scores of sample
s, class c at row 0, column c B W + s, every other slot zero, noise flooded, at ``layout.answer_level``. The
operation sequence is the layout's (``layout.ops``), whatever the trees. Holds no secret key.
"""
from __future__ import annotations

import numpy as np
import torch

from fhe_core import bfv, ops
from fhe_core.bfv.encryption import lifted_many
from fhe_core.errors import ParamsMismatchError
from fhe_core.params import Params
from fhe_core.rlwe import Ciphertext, EvalKeySet, PublicKey
from fhe_core.rlwe.checks import mark_canonical

from .plan import PlanError, power_steps, tree_value
from .server import GraphedBatches, check_batches, check_keys, flooded_answers
from .private_forest import PrivateForest
from .private_plan import MAX_BABIES, PrivatePlan

_LIFT_CHUNK = 256  # masks lifted per batched transform (bounds the temporaries)


class PrivateForestEvaluator:
    """Evaluates a private forest on the client's digit ciphertexts (see ``private_plan``).

    Args:
        params: BFV parameters (the client's). keys: relinearization and the layout's Galois keys.
        forest: the :class:`PrivateForest`. public_key: the client's, for flooding the answers.
        width: samples per batch (the public width); max_trees_per_class, max_depth: the public
            bounds (default the forest's own). ``plan``: a prebuilt plan instead.
        graphed: replay each batch from a CUDA graph captured on the first (``server.GraphedBatches``; CUDA only;
            the same words as eager).
    """

    def __init__(self, params: Params, keys: EvalKeySet, forest: PrivateForest, public_key: PublicKey, *,
                 width: int | None = None, max_trees_per_class: int | None = None, max_depth: int | None = None,
                 plan: PrivatePlan | None = None, graphed: bool = False):
        if plan is None:
            if width is None:
                raise PlanError("PrivateForestEvaluator: give the batch width (or a plan)")
            plan = PrivatePlan.build(forest, params, width=width, max_trees_per_class=max_trees_per_class,
                                     max_depth=max_depth)
        self.plan, self.layout = plan, plan.layout
        if self.layout.params.params_id != params.params_id:
            raise ParamsMismatchError("PrivateForestEvaluator: the plan belongs to other parameters")
        self.ctx = bfv.BFVContext(params)
        check_keys("PrivateForestEvaluator", keys, self.layout.galois_elements, public_key, params.params_id)
        self.evaluator = bfv.Evaluator(self.ctx, keys)
        self.public_key = public_key
        self.encoder = bfv.BatchEncoder(self.ctx)
        level = self.layout.level
        self.moduli = self.ctx.rlwe.q_at(level).moduli
        self._routing = self._lift_masks()
        self._coefficients = [[tuple(None if poly is None else self._plaintexts(poly) for poly in pair)
                               for pair in per_output] for per_output in plan.coefficients]
        self._mask = self.encoder.encode(plan.score_mask)
        self._base = self.encoder.encode(plan.base)
        self._ones = self.encoder.encode(np.ones(self.ctx.n, dtype=np.int64))
        # not a bound method of this object kept on it (a reference cycle: the model's device memory would wait for
        # the cycle collector once the model is dropped)
        self._graphed_batches = (GraphedBatches(self.ctx, self._evaluate_batch, "PrivateForestEvaluator")
                                 if graphed else None)

    # ---- plaintexts, once ------------------------------------------------------------------------

    def _lift_masks(self) -> torch.Tensor:
        """The routing masks as lifted NTT-domain plaintexts ``[C_out, 2, G, C_in n1, l+1, N]``: for
        one (output, swap, giant), the masks of every input's babies are contiguous (one
        ``giant_products`` operand per group of inputs)."""
        layout = self.layout
        masks = self.plan.masks.transpose(0, 2, 3, 1, 4, 5)  # [o, swap, g, c, j, N]
        shape = masks.shape[:3] + (masks.shape[3] * masks.shape[4],)
        flat = masks.reshape(-1, self.ctx.n)
        out = torch.empty((len(flat), layout.level + 1, self.ctx.n), dtype=torch.int64, device=self.ctx.device)
        for start in range(0, len(flat), _LIFT_CHUNK):
            coefficients = self.encoder.encode_many(flat[start:start + _LIFT_CHUNK])
            out[start:start + _LIFT_CHUNK] = lifted_many(self.ctx, coefficients, layout.level)
        return out.view(shape + (layout.level + 1, self.ctx.n))

    def _plaintexts(self, poly: np.ndarray) -> list:
        """A comparison polynomial's coefficient vectors `[d+1, N]` as plaintexts."""
        return [self.encoder.encode(row) for row in poly]

    # ---- evaluation ------------------------------------------------------------------------------

    def evaluate(self, cts: list[Ciphertext], *, seed: bytes | None = None) -> list[Ciphertext]:
        """One flooded answer at ``layout.answer_level`` per batch of ``layout.n_inputs`` ciphertexts. ``seed``:
        fixes the flooding (tests only)."""
        layout = self.layout
        batches = check_batches("PrivateForestEvaluator.evaluate", cts, layout.n_inputs, layout.level, self.ctx)
        evaluate = self._graphed_batches or self._evaluate_batch
        return flooded_answers(self.evaluator, [evaluate(batch) for batch in batches], self.public_key,
                               layout.answer_level, seed)

    def _evaluate_batch(self, inputs: list[Ciphertext]) -> Ciphertext:
        layout, ev = self.layout, self.evaluator
        per_digit = layout.inputs_per_digit
        routed = [self._route(inputs[i * per_digit:(i + 1) * per_digit]) for i in range(len(layout.digits))]
        tests = [self._compare(o, [routed[i][o] for i in range(len(layout.digits))]) for o in range(layout.outputs)]
        value = tree_value(_SlabAlgebra(self, tests), layout.schedule, 0)
        for i in range(layout.block.bit_length() - 1):  # class sums inside each block of B lanes
            value = ev.add(value, ev.rotate_rows(value, layout.width << i))
        return ev.add_plain(ev.multiply_plain(value, self._mask), self._base)  # flooded by evaluate

    # -- routing -------------------------------------------------------------------------------------

    def _route(self, inputs: list[Ciphertext]) -> list[Ciphertext]:
        """One digit's inputs -> its routed ciphertexts (one per output), by baby-step giant-step
        diagonals (module docstring of ``private_plan``)."""
        layout, ev = self.layout, self.evaluator
        n1, giants = layout.babies, layout.giants
        per_call = max(MAX_BABIES // n1, 1)  # inputs whose babies share one giant_products call
        babies = [self._babies(x) for x in inputs]
        out = []
        for o in range(layout.outputs):
            total = None
            for first in range(0, len(inputs), per_call):
                stack = torch.cat(babies[first:first + per_call])                  # [m, 2, l+1, N]
                acc = self._giant_sums(stack, self._routing[o, :, :, first * n1:first * n1 + len(stack)])
                total = acc if total is None else ops.add(total, acc, self.moduli, out=total)
            moved = []
            for swap in (0, 1):  # Horner over the giants: y = rot_{n1 W}(y) + A_g, g descending
                y = self._ciphertext(total[:, swap * giants + giants - 1])
                for g in range(giants - 2, -1, -1):
                    y = ev.add(ev.rotate_rows(y, n1 * layout.width), self._ciphertext(total[:, swap * giants + g]))
                moved.append(y)
            out.append(ev.add(moved[0], ev.swap_columns(moved[1])))
        return out

    def _babies(self, x: Ciphertext) -> torch.Tensor:
        """``[n1, 2, l+1, N]``: x rotated left by 0, W, 2W, ... (n1 - 1) W columns."""
        rotated = [x]
        for _ in range(self.layout.babies - 1):
            rotated.append(self.evaluator.rotate_rows(rotated[-1], self.layout.width))
        return torch.stack([ct.data for ct in rotated])

    def _giant_sums(self, babies: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
        """``[2, 2G, l+1, N]``: for every (swap, giant), sum_j masks[swap, g, j] * babies[j]."""
        m, giants = babies.shape[0], masks.shape[1]
        blocks = [masks[swap, g] for swap in (0, 1) for g in range(giants)]          # each [m, l+1, N], contiguous
        acc = torch.empty((2, len(blocks)) + babies.shape[2:], dtype=torch.int64, device=babies.device)
        for start in range(0, len(blocks), 4):  # up to 4 giants per pass over the babies
            group = blocks[start:start + 4]
            ops.giant_products(babies, group, list(range(m)) * len(group), self.moduli,
                               out=acc[:, start:start + len(group)])
        return acc

    def _ciphertext(self, data: torch.Tensor) -> Ciphertext:
        return mark_canonical(Ciphertext(data=data.contiguous(), level=self.layout.level,
                                         params_id=self.ctx.params_id))

    # -- comparisons ---------------------------------------------------------------------------------

    def _compare(self, o: int, digits: list[Ciphertext]) -> Ciphertext:
        """Node tests (values, on the leaf level) of output o: LT_0 + EQ_0 (LT_1 + EQ_1 (...))."""
        ev, result = self.evaluator, None
        for i in reversed(range(len(digits))):
            powers = self._powers(digits[i], self.layout.degree(i))
            lt, eq = self._coefficients[o][i]
            below = self._polynomial(powers, lt)
            result = below if result is None else ev.add(below, ev.multiply_relin(self._polynomial(powers, eq), result))
        return result

    def _powers(self, x: Ciphertext, degree: int) -> list[Ciphertext]:
        """[x, x^2, ..., x^degree]: x^e = x^a x^(e-a), a the largest power of two below e."""
        powers = [None, x]
        for e in range(2, degree + 1):
            a = 1 << (e - 1).bit_length() - 1
            powers.append(self.evaluator.multiply_relin(powers[a], powers[e - a]))
        return powers

    def _polynomial(self, powers: list[Ciphertext], coefficients: list) -> Ciphertext:
        """sum_e c_e x^e with plaintext coefficient vectors (every term, zero or not)."""
        ev = self.evaluator
        acc = ev.multiply_plain(powers[1], coefficients[1])
        for e in range(2, len(coefficients)):
            acc = ev.add(acc, ev.multiply_plain(powers[e], coefficients[e]))
        return ev.add_plain(acc, coefficients[0])

    def move(self, ct: Ciphertext, columns: int, swap: bool) -> Ciphertext:
        """Left rotation by ``columns`` (powers of two times W) after an optional row swap."""
        if swap:
            ct = self.evaluator.swap_columns(ct)
        for step in power_steps(columns // self.layout.width):
            ct = self.evaluator.rotate_rows(ct, step * self.layout.width)
        return ct


class _SlabAlgebra:
    """tree_value's operations on ciphertexts: node p's value is slab p moved onto slab 0."""

    def __init__(self, server: PrivateForestEvaluator, tests: list[Ciphertext]):
        self.server, self.tests = server, tests
        self._aligned: dict[int, Ciphertext] = {}

    def test(self, group, node):
        if node not in self._aligned:
            o, _, _ = self.server.layout.slab_place(node)
            self._aligned[node] = self.server.move(self.tests[o], *self.server.layout.slab_move(node))
        return self._aligned[node]

    depth1 = test  # the leaf-level slabs hold Lr + (Ll - Lr) s already

    def mul(self, a, b, final):
        return self.server.evaluator.multiply_relin(a, b)

    def add(self, a, b):
        return self.server.evaluator.add(a, b)

    def sub(self, a, b):
        return self.server.evaluator.sub(a, b)

    def one_minus(self, a):
        ev = self.server.evaluator
        return ev.add_plain(ev.negate(a), self.server._ones)
