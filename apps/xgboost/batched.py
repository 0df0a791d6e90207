"""The tree stage on all groups at once: ciphertexts stacked as ``[d+1, G, l+1, N]`` tensors.

Every group of a plan runs the same circuit (only its plaintexts differ), so the evaluator can
stack the groups and issue each operation once: a plaintext product is one elementwise kernel
over all G groups, a ciphertext product one BEHZ multiplication (its kernels take leading batch
dimensions), a sum over groups a log2(G)-deep tree of additions. On a GPU this turns ~20 G
small launches from Python into a few dozen large ones; the arithmetic is the same word for word
(the tests compare both paths bit for bit).

Node-test forms whose terms need no move (the iDASH encoding) are materialized stacked too:
gather the inputs ``[2, G, S, l+1, N]``, one product with the pre-lifted coefficients
``[G, S, l+1, N]``, S - 1 additions. Forms with moves (thermometer models) go through the
per-group evaluator path and are stacked afterwards. Relinearization (needed only inside trees
deeper than 2) runs per group through the evaluator (key switching takes one ciphertext).
"""
from __future__ import annotations

import numpy as np
import torch

from fhe_core import bfv, ops
from fhe_core.bfv.encryption import lifted_message, scaled_message
from fhe_core.rlwe import Ciphertext
from fhe_core.rlwe.checks import mark_canonical

from .plan import ForestPlan, LinearForm


class StackedForms:
    """The plaintexts of one node position's forms for all groups, pre-lifted at the plan level:
    source_list (the ``[G, S]`` input indices, flat), coefs ``[G, S, l+1, N]`` (zeros pad
    unequal S), const ``[G, l+1, N]`` scaled (or None)."""

    def __init__(self, forms: list[LinearForm], ctx: bfv.BFVContext, encoder: bfv.BatchEncoder, level: int):
        width = max(len(f.terms.get((0, False), {})) for f in forms)
        sources = np.zeros((len(forms), width), dtype=np.int64)  # padding: input 0 times a zero coef
        self.coefs = torch.zeros((len(forms), width, level + 1, ctx.n), dtype=torch.int64, device=ctx.device)
        for g, form in enumerate(forms):
            for s, (k, coef) in enumerate(sorted(form.terms.get((0, False), {}).items())):
                sources[g, s] = k
                self.coefs[g, s] = lifted_message(ctx, encoder.encode(np.mod(coef, ctx.t)), level)
        self.shape = sources.shape
        self.source_list = sources.reshape(-1).tolist()
        self.const = None
        if any(f.const.any() for f in forms):
            self.const = torch.stack([scaled_message(ctx, encoder.encode(np.mod(f.const, ctx.t)), level)
                                      for f in forms])


class StackedAlgebra:
    """tree_value's operations on group stacks (tensors ``[d+1, G, l+1, N]``) and on public
    plaintext values (``[G, N]`` slot vectors mod t)."""

    def __init__(self, plan: ForestPlan, evaluator: bfv.Evaluator, encoder: bfv.BatchEncoder, per_group):
        self.plan, self.ev, self.encoder = plan, evaluator, encoder
        self.ctx = evaluator.ctx
        self.level = plan.level
        self.moduli = self.ctx.rlwe.q_at(self.level).moduli
        self.t = self.ctx.t
        self.per_group = per_group  # the per-group (evaluator) algebra, for forms with moves
        self.groups = plan.n_groups
        self.stacked: dict = {}
        positions = {(p, kind) for (_, p, kind) in plan.forms}
        for p, kind in sorted(positions):
            forms = [plan.forms[g, p, kind] for g in range(self.groups)]
            if all(set(f.terms) <= {(0, False)} for f in forms) and not all(f.is_plain for f in forms):
                self.stacked[p, kind] = StackedForms(forms, self.ctx, encoder, self.level)
        self._ones = scaled_message(self.ctx, encoder.encode(np.ones(self.ctx.n, dtype=np.int64)), self.level)
        self._public: dict[tuple, torch.Tensor] = {}  # public slot values -> their operands, see _plain
        self.inputs: list[Ciphertext] = []

    # ---- node tests -----------------------------------------------------------------------------

    def _materialize(self, node, kind):
        if (node, kind) in self.stacked:
            forms = self.stacked[node, kind]
            gathered = torch.stack([self.inputs[k].data for k in forms.source_list], dim=1)
            shape = (2,) + forms.shape + tuple(gathered.shape[-2:])
            products = ops.mul(gathered.view(shape), forms.coefs, self.moduli)  # [2, G, S, l+1, N]
            acc = products[:, :, 0].contiguous()
            for s in range(1, products.shape[2]):
                ops.add(acc, products[:, :, s].contiguous(), self.moduli, out=acc)
            if forms.const is not None:
                ops.add(acc[0], forms.const, self.moduli, out=acc[0])
            return acc
        values = [self.per_group._materialize(self.per_group.encoded((g, node, kind))) for g in range(self.groups)]
        if all(isinstance(v, np.ndarray) for v in values):
            return np.stack(values)
        return torch.stack([self._as_ciphertext_data(v) for v in values], dim=1)

    def _as_ciphertext_data(self, value) -> torch.Tensor:
        """A group's value as ``[2, l+1, N]`` (a public plaintext becomes (Delta m, 0): it is only
        ever combined with the other groups' real ciphertexts)."""
        if isinstance(value, Ciphertext):
            return value.data
        data = torch.zeros((2, self.level + 1, self.ctx.n), dtype=torch.int64, device=self.ctx.device)
        data[0] = self._plain(value[None], scaled=True)[0]
        return data

    def depth1(self, group, node):
        return self._materialize(node, "value")

    def test(self, group, node):
        return self._materialize(node, "test")

    # ---- arithmetic --------------------------------------------------------------------------------

    def _plain(self, values: np.ndarray, scaled: bool) -> torch.Tensor:
        """``[G, N]`` slot values -> ``[G, l+1, N]`` lifted (for products) or scaled (for sums), made once per
        distinct value: every batch meets the same public values (no re-encoding and no host-to-device copy per
        batch, nothing a CUDA graph could not replay). Read-only: callers never write into it."""
        values = np.mod(values, self.t)
        key = (values.tobytes(), values.shape, scaled)
        if key not in self._public:
            convert = scaled_message if scaled else lifted_message
            self._public[key] = torch.stack([convert(self.ctx, self.encoder.encode(v), self.level) for v in values])
        return self._public[key]

    def mul(self, a, b, final):
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return np.mod(a * b, self.t)
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            data, plain = (b, a) if isinstance(a, np.ndarray) else (a, b)
            return ops.mul(data, self._plain(plain, scaled=False), self.moduli)
        product = bfv.behz.multiply(self.ctx.behz(self.level), a, b)  # [3, G, l+1, N]
        if final:
            return product
        return torch.stack([self._relinearize(product[:, g]) for g in range(self.groups)], dim=1)

    def _relinearize(self, data: torch.Tensor) -> torch.Tensor:
        ct = Ciphertext(data=data.contiguous(), level=self.level, params_id=self.ctx.params_id)
        return self.ev.relinearize(mark_canonical(ct)).data  # a product of canonical stacks: no range pass

    def add(self, a, b, sign: int = 1):
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return np.mod(a + sign * b, self.t)
        if isinstance(a, np.ndarray):  # plain + ct, or plain - ct = -(ct - plain)
            return self.add(b, a) if sign == 1 else ops.neg(self.add(b, a, -1), self.moduli)
        if isinstance(b, np.ndarray):
            out = a.clone()
            fn = ops.add if sign == 1 else ops.sub
            fn(out[0], self._plain(b, scaled=True), self.moduli, out=out[0])
            return out
        fn = ops.add if sign == 1 else ops.sub
        if a.shape[0] == b.shape[0]:
            return fn(a, b, self.moduli)
        if a.shape[0] > b.shape[0]:
            out = a.clone()
            fn(out[:b.shape[0]], b, self.moduli, out=out[:b.shape[0]])
            return out
        out = b.clone() if sign == 1 else ops.neg(b, self.moduli)
        ops.add(out[:a.shape[0]], a, self.moduli, out=out[:a.shape[0]])
        return out

    def sub(self, a, b):
        return self.add(a, b, -1)

    def one_minus(self, a):
        if isinstance(a, np.ndarray):
            return np.mod(1 - a, self.t)
        out = ops.neg(a, self.moduli)
        ops.add(out[0], self._ones, self.moduli, out=out[0])
        return out

    # ---- the sum over groups --------------------------------------------------------------------

    def sum_groups(self, stack: torch.Tensor) -> Ciphertext:
        """``[d+1, G, l+1, N]`` -> the ciphertext of the sum over G (a log2(G)-deep tree), marked canonical (sums
        of the kernels' canonical words: the evaluator need not re-read it, which on a GPU waits for the device)."""
        while stack.shape[1] > 1:
            half = stack.shape[1] // 2
            summed = ops.add(stack[:, :half].contiguous(), stack[:, half:2 * half].contiguous(), self.moduli)
            stack = torch.cat([summed, stack[:, 2 * half:]], dim=1) if stack.shape[1] % 2 else summed
        return mark_canonical(Ciphertext(data=stack[:, 0].contiguous(), level=self.level, params_id=self.ctx.params_id))
