"""Two ciphertexts through one circuit: EvalMod on the real and imaginary parts of a full-slot
bootstrap as one batched pair.

With full packing EvalMod must run on two ciphertexts (the N real coefficients need two
ciphertexts of N/2 real slots; see the bootstrapper). Both evaluations make the same operations
at the same levels and scales, so a :class:`CiphertextPair` stores them as one tensor and every
step of the polynomial and the double angles is one launch for both: the element-wise
operations, the rescales (one INTT, lift and NTT for both), the tensor products and the
ModDowns of the relinearizations; only each relinearization's ModUp and inner product run per
ciphertext. The results are bit for bit those of two separate evaluations.

:class:`PairEvaluator` implements the evaluator methods that
:class:`~fhe_core.ckks.polynomial.PolynomialEvaluator` and
:class:`~fhe_core.ckks.bootstrapping.mod1.EvalModEvaluator` call, on pairs.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from fhe_core import ops
from fhe_core.ckks.ciphertext import Ciphertext
from fhe_core.ckks.evaluator import SCALE_TOLERANCE, Evaluator
from fhe_core.errors import ParameterError
from fhe_core.ops import KernelPlan
from fhe_core.rlwe import switching
from fhe_core.rlwe.checks import mark_canonical


def _pair_view(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor | None:
    """``[d+1, 2, l+1, N]`` over the memory of a and b where they are the halves ``[:, 0]`` and ``[:, 1]`` of one such
    tensor (:meth:`CiphertextPair.buffer`): a view whose halves are a and b element for element; else None."""
    if a.dim() != 3 or a.shape != b.shape or a.dtype != b.dtype or a.device != b.device \
            or a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return None
    d1, limbs, n = a.shape
    strides = (2 * limbs * n, n, 1)
    if any(size > 1 and stride != want for size, stride, want in zip(a.shape, a.stride(), strides)) \
            or any(size > 1 and stride != want for size, stride, want in zip(b.shape, b.stride(), strides)) \
            or b.data_ptr() - a.data_ptr() != limbs * n * a.element_size():
        return None
    return a.as_strided((d1, 2, limbs, n), (2 * limbs * n, limbs * n, n, 1))


@dataclass(frozen=True, eq=False)
class CiphertextPair:
    """Two CKKS ciphertexts of one level, scale, degree and slot count.

    data: ``[d+1, 2, l+1, N]`` int64, NTT domain, component-major: ``data[c, i]`` is component c
    of ciphertext i (so the c_0 of both, ``data[0]``, is one contiguous block).
    """

    data: torch.Tensor
    level: int
    scale: float
    slots: int
    params_id: str

    @classmethod
    def of(cls, a: Ciphertext, b: Ciphertext) -> CiphertextPair:
        """Stack two ciphertexts of equal level, scale, degree and slots (ParameterError otherwise)."""
        if (a.level, a.degree, a.slots, a.params_id) != (b.level, b.degree, b.slots, b.params_id) \
                or abs(a.scale - b.scale) > SCALE_TOLERANCE * a.scale:
            raise ParameterError("CiphertextPair: the two ciphertexts differ in level, degree, slots, params or scale")
        pair = _pair_view(a.data, b.data)
        if pair is not None:
            return cls(pair, a.level, a.scale, a.slots, a.params_id)  # the two halves of one pair tensor: no copy
        return cls(torch.stack((a.data, b.data), dim=1), a.level, a.scale, a.slots, a.params_id)

    @classmethod
    def buffer(cls, like: Ciphertext) -> torch.Tensor:
        """An empty ``[d+1, 2, l+1, N]`` pair tensor for two ciphertexts shaped like ``like``: write them
        into ``buffer[:, 0]`` and ``buffer[:, 1]`` and :meth:`of` wraps it without a copy."""
        d1, limbs, n = like.data.shape
        return torch.empty((d1, 2, limbs, n), dtype=like.data.dtype, device=like.data.device)

    @property
    def degree(self) -> int:
        return self.data.shape[0] - 1

    def parts(self) -> tuple[Ciphertext, Ciphertext]:
        """The two ciphertexts (copies, ``[d+1, l+1, N]`` each)."""
        return tuple(mark_canonical(Ciphertext(data=self.data[:, i].contiguous(), level=self.level,
                                               params_id=self.params_id, scale=self.scale, slots=self.slots))
                     for i in (0, 1))

    def views(self) -> tuple[Ciphertext, Ciphertext]:
        """The two ciphertexts as views (``[d+1, l+1, N]`` of contiguous ``[l+1, N]`` blocks, no copy),
        for operations that read strided operands (Evaluator.linear_combination)."""
        return tuple(mark_canonical(Ciphertext(data=self.data[:, i], level=self.level, params_id=self.params_id,
                                               scale=self.scale, slots=self.slots))
                     for i in (0, 1))

    def flat(self) -> Ciphertext:
        """A view as one ciphertext of 2(d+1) components, for the operations that treat every
        component alike (rescale, level drop, constant product, sum of two pairs)."""
        d, _, limbs, n = self.data.shape
        return mark_canonical(Ciphertext(data=self.data.reshape(2 * d, limbs, n), level=self.level,
                                         params_id=self.params_id, scale=self.scale, slots=self.slots))

    def unflat(self, ct: Ciphertext) -> CiphertextPair:
        """The pair of a result of :meth:`flat` (its level and scale)."""
        data = ct.data.reshape(-1, 2, ct.level + 1, ct.n)
        return CiphertextPair(data, ct.level, ct.scale, self.slots, self.params_id)

    def replace(self, **changes) -> CiphertextPair:
        return dataclasses.replace(self, **changes)


class PairEvaluator:
    """:class:`~fhe_core.ckks.Evaluator`'s add, sub, mul (by a constant), tensor, relinearize,
    mul_relin, rescale and drop_level on :class:`CiphertextPair`\\ s, with the same level and
    scale rules; both ciphertexts get the same operation in one launch where the operation
    allows it. Holds the evaluator (its relinearization key); never a secret key."""

    def __init__(self, evaluator: Evaluator):
        self.evaluator = evaluator
        self.params = evaluator.params
        self._ctx = evaluator.context
        self._moduli_twice: dict[int, torch.Tensor] = {}

    @property
    def plan(self) -> KernelPlan:
        """The evaluator's kernel plan. Its fused circuit: one tensor product launch for both ciphertexts, both
        d_2 in one INTT, both inner products in one pass over the key and the addition of (d_0, d_1) in ModDown's
        pass; else the composed ops."""
        return self.evaluator.plan

    def _pair_moduli(self, level: int) -> torch.Tensor:
        """``[2 (l+1), 4]``: Q_l's moduli twice, for ops over both ciphertexts' rows as one ``[2 (l+1), N]`` block."""
        if level not in self._moduli_twice:
            self._moduli_twice[level] = self._ctx.q_at(level).moduli.repeat(2, 1)
        return self._moduli_twice[level]

    # ---- component-agnostic: through the flat view -------------------------------------------------

    def rescale(self, p: CiphertextPair) -> CiphertextPair:
        return p.unflat(self.evaluator.rescale(p.flat()))

    def drop_level(self, p: CiphertextPair, level: int) -> CiphertextPair:
        return p.unflat(self.evaluator.drop_level(p.flat(), level))

    def mul(self, p: CiphertextPair, value, *, constant_scale: float | None = None) -> CiphertextPair:
        """p times a real or complex constant (see :meth:`Evaluator.mul`); pair x pair is :meth:`mul_relin`."""
        if isinstance(value, CiphertextPair):
            return self.mul_relin(p, value)
        return p.unflat(self.evaluator.mul(p.flat(), value, constant_scale=constant_scale))

    def linear_combination(self, terms, level: int, constant: tuple[complex, int] | None = None) -> CiphertextPair:
        """:meth:`Evaluator.linear_combination` on pairs (terms ``[(pair, value, constant_scale, sign)]``):
        one pass for both ciphertexts, the constant on both c_0."""
        flat = [(p.flat(), value, constant_scale, sign) for p, value, constant_scale, sign in terms]
        out = self.evaluator.linear_combination(flat, level, constant, constant_components=2)
        return terms[0][0].unflat(out)

    def add(self, a: CiphertextPair, b) -> CiphertextPair:
        return self._add_or_sub(a, b, "add", ops.add)

    def sub(self, a: CiphertextPair, b) -> CiphertextPair:
        return self._add_or_sub(a, b, "sub", ops.sub)

    def _add_or_sub(self, a: CiphertextPair, b, op: str, fn) -> CiphertextPair:
        if isinstance(b, CiphertextPair):
            if a.degree != b.degree:
                raise ParameterError(f"{op}: degrees differ ({a.degree} vs {b.degree})")
            flat = self.evaluator.add(a.flat(), b.flat()) if op == "add" else self.evaluator.sub(a.flat(), b.flat())
            return a.unflat(flat)
        # a constant: onto the c_0 of both ciphertexts, one contiguous block; the evaluator's exact
        # encoding of the constant at a's scale (re + im X^(N/2), as Evaluator.add does)
        constant = self.evaluator.encode_constant(complex(b), a.scale, a.level, op=op)
        moduli = self._ctx.q_at(a.level).moduli
        out = torch.empty_like(a.data)
        out[1:].copy_(a.data[1:])
        fn(a.data[0], constant, moduli, out=out[0])
        return a.replace(data=out)

    # ---- products ----------------------------------------------------------------------------------

    def tensor(self, a: CiphertextPair, b: CiphertextPair) -> CiphertextPair:
        """(a0 b0, a0 b1 + a1 b0, a1 b1) for both, at the lower level; scale a.scale * b.scale."""
        if a.degree != 1 or b.degree != 1:
            raise ParameterError(f"tensor: expected degree-1 pairs, got degrees {a.degree} and {b.degree}")
        level = min(a.level, b.level)
        x, y = (p.data[:, :, :level + 1].contiguous() for p in (a, b))  # views unless a level is dropped
        moduli = self._ctx.q_at(level).moduli
        if self.plan.fused_circuit:  # one tensor_product over [2, 2 (l+1), N]: both ciphertexts' rows side by side
            rows = 2 * (level + 1)
            data = ops.tensor_product(x.view(2, rows, -1), y.view(2, rows, -1), self._pair_moduli(level))
            return CiphertextPair(data.view(3, 2, level + 1, -1), level, a.scale * b.scale, a.slots, a.params_id)
        by_y0 = ops.mul(x, y[0], moduli)                      # (x0 y0, x1 y0) of both
        d1 = ops.mul_add(x[0], y[1], by_y0[1], moduli)
        d2 = ops.mul(x[1], y[1], moduli)
        return CiphertextPair(torch.stack((by_y0[0], d1, d2)), level, a.scale * b.scale, a.slots, a.params_id)

    def relinearize(self, p: CiphertextPair) -> CiphertextPair:
        """Degree 2 -> 1: each d_2 key-switched (ModUp and inner product per ciphertext), one
        ModDown for both, added to (d_0, d_1). Needs the relinearization key."""
        op = "relinearize"
        if p.degree != 2:
            raise ParameterError(f"{op}: expected a degree-2 pair, got degree {p.degree}")
        ctx, level = self._ctx, p.level
        key = self.evaluator.keys.relin_key(op)
        if self.plan.fused_circuit:  # both d_2 in one INTT, both inner products in one pass over the key
            extended = torch.empty((2, 2, len(ctx.qp_at(level)), ctx.n), dtype=torch.int64, device=p.data.device)
            coeffs = ctx.q_at(level).intt(p.data[2])
            digits = [switching.decompose_mod_up(ctx, p.data[2, i], level, coeffs[i]) for i in (0, 1)]
            switching.inner_product_pair_into(ctx, *digits, key, level, extended)
            d01 = p.data[:2].reshape(4, level + 1, ctx.n)  # a view: (d0, d1) of both, in ModDown's batch order
            out = switching.mod_down(ctx, extended.view(4, -1, ctx.n), level, add=d01)
            return p.replace(data=out.view(2, 2, level + 1, ctx.n))
        extended = torch.stack([switching.inner_product(ctx, switching.decompose_mod_up(ctx, p.data[2, i], level),
                                                        key, level) for i in (0, 1)], dim=1)  # [2, 2, QP_l, N]
        out = switching.mod_down(ctx, extended, level)
        ops.add(out, p.data[:2], ctx.q_at(level).moduli, out=out)
        return p.replace(data=out)

    def mul_relin(self, a: CiphertextPair, b: CiphertextPair) -> CiphertextPair:
        return self.relinearize(self.tensor(a, b))


__all__ = ["CiphertextPair", "PairEvaluator"]
