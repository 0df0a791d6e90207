"""SubSum: the trace onto the sparse subring, for bootstrapping a sparsely packed ciphertext.

With n slots, n < N/2, a plaintext lives in the subring Z[Y], Y = X^g, g = N/(2n). After
:func:`~fhe_core.ckks.bootstrapping.mod_raise` the ciphertext decrypts to m'(Y) + q_0 I(X) with
I a general polynomial, whose coefficients outside the subring spoil the n-slot decoding.
The automorphisms fixing Z[Y] are X -> X^k for k = 1 mod 4n: the g powers of 5^n mod 2N
(the full-slot rotations by multiples of n). Their sum, the trace, is

    Tr(X^k) = sum_(t < g) X^(k 5^(n t)) = g X^k  if g | k,   0 otherwise,

so Tr(m'(Y) + q_0 I(X)) = g * (m'(Y) + q_0 I_g(Y)), I_g keeping the coefficients of I at
multiples of g. It takes log2(g) rotate-and-add steps, by n, 2n, ..., (g/2) n full-ring slots.

**The factor g** = N/(2n): the message comes out multiplied by g (scale unchanged). The
bootstrapper folds 1/g into CoeffsToSlots (``dft.coeffs_to_slots_factors(..., scaling=...)``);
alternatively relabel the scale as ct.scale * g, which is exact and costs nothing.
"""
from __future__ import annotations

from fhe_core import rlwe
from fhe_core.ckks.ciphertext import Ciphertext
from fhe_core.errors import MissingKeyError, ParameterError
from fhe_core.rlwe.checks import is_marked_canonical, mark_canonical


def sub_sum_steps(n: int, slots: int) -> list[int]:
    """The full-ring rotation steps n, 2n, ..., N/4 (log2(N/(2 slots)) of them) for ring degree
    ``n`` = N and ``slots`` = n slots; empty for full packing."""
    if slots < 1 or slots & (slots - 1) or 2 * slots > n:
        raise ParameterError(f"sub_sum: slots must be a power of two <= N/2 = {n // 2}, got {slots}")
    steps, step = [], slots
    while step < n // 2:
        steps.append(step)
        step *= 2
    return steps


def sub_sum_galois_elements(n: int, slots: int) -> list[int]:
    """The Galois elements 5^(step) mod 2N of :func:`sub_sum_steps`: the keys SubSum needs."""
    return [rlwe.galois_element_for_rotation(s, n) for s in sub_sum_steps(n, slots)]


def sub_sum(evaluator, ct: Ciphertext, slots: int | None = None) -> Ciphertext:
    """Tr onto Z[X^g], g = N/(2 slots): slot values (and every coefficient at a multiple of g)
    multiplied by g, the other coefficients cancelled (module docstring).

    evaluator: a :class:`fhe_core.ckks.Evaluator` with the Galois keys of
        :func:`sub_sum_galois_elements` (checked before any work).
    ct: degree 1, ``[2, l+1, N]`` NTT domain, any level. ``slots`` defaults to ct.slots.
    Returns the same shape, level, scale and slots (log2(g) key switches: noise of about
    log2(g) rotations, amplified by up to g). Consumes no level. For slots = N/2 it returns a copy.
    """
    op = "sub_sum"
    if not isinstance(ct, Ciphertext):
        raise ParameterError(f"{op}: expected a ckks.Ciphertext, got {type(ct).__name__}")
    slots = ct.slots if slots is None else slots
    n = evaluator.params.n
    steps = sub_sum_steps(n, slots)
    keys = evaluator.keys
    missing = [s for s, k in zip(steps, sub_sum_galois_elements(n, slots)) if keys is None or k not in keys]
    if missing:
        raise MissingKeyError(f"{op}: missing Galois keys for the full-ring rotations {missing} "
                              f"(elements {sub_sum_galois_elements(n, slots)})")
    # The evaluator reduces rotation steps modulo ct.slots, so rotate a full-slot view: a rotation
    # by a multiple of n is the identity on the n slots but not on the coefficients.
    out = ct.replace(data=ct.data.clone(), slots=n // 2)
    if is_marked_canonical(ct):  # the same residues (else the first add checks them)
        mark_canonical(out)
    for step in steps:
        out = evaluator.add(out, evaluator.rotate(out, step))
    return mark_canonical(out.replace(slots=ct.slots))


__all__ = ["sub_sum", "sub_sum_steps", "sub_sum_galois_elements"]
