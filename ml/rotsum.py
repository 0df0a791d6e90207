"""Rotate-and-sum and replicate on CKKS ciphertexts, with their Galois-key account.

``rotate_sum(ev, ct, count, stride)`` leaves in slot j the sum of the ``count`` slots
j, j + stride, ..., j + (count - 1) stride (indices mod the slot count); ``replicate`` is the
same with a negative stride: a value at slot j, with zeros in the ``count - 1`` slots before the
next value, is copied to slots j, j + stride, ..., j + (count - 1) stride. With
:class:`ml.packing.RowMajorLayout`: stride 1 and count ``columns`` sum (or replicate) along a
row, stride ``columns`` and count ``rows`` sum over the rows of a ciphertext.

Both run in stages of a power-of-two ``radix``: a stage adds the rotations by k * span * stride,
k = 1 .. radix - 1, of the running sum, which share their input and go through one hoisted call
(one ModUp); span grows by the radix. Radix 2 is the usual log2(count) rotate-and-add chain
(log2(count) keys and key switches); radix 4 halves the stages (and ModUps) for 1.5x the key
switches and keys. Depth 0: no level is consumed, scale and level are kept.
"""
from __future__ import annotations

from fhe_core.errors import ParameterError


def _check(count: int, stride: int, radix: int) -> None:
    for name, value in (("count", count), ("radix", radix)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value & (value - 1):
            raise ParameterError(f"rotate_sum: {name} must be a positive power of two, got {value!r}")
    if radix < 2:
        raise ParameterError(f"rotate_sum: radix must be >= 2, got {radix}")
    if isinstance(stride, bool) or not isinstance(stride, int) or stride == 0:
        raise ParameterError(f"rotate_sum: stride must be a nonzero int, got {stride!r}")


def _stages(count: int, stride: int, radix: int) -> list[list[int]]:
    """The rotation steps of each stage: [[k * span * stride for k in 1 .. r - 1], ...]."""
    _check(count, stride, radix)
    stages, span = [], 1
    while span < count:
        width = min(radix, count // span)
        stages.append([k * span * stride for k in range(1, width)])
        span *= width
    return stages


def rotation_steps(count: int, stride: int = 1, *, radix: int = 2) -> list[int]:
    """Every rotation step :func:`rotate_sum` (``count``, ``stride``, ``radix``) uses (left
    rotations; negative = right). Pass them to :func:`fhe_core.ckks.galois_elements`."""
    return [s for stage in _stages(count, stride, radix) for s in stage]


def replicate_steps(count: int, stride: int = 1, *, radix: int = 2) -> list[int]:
    """The rotation steps :func:`replicate` uses (right rotations: negative steps)."""
    return rotation_steps(count, -stride, radix=radix)


def rotate_sum(ev, ct, count: int, stride: int = 1, *, radix: int = 2):
    """Slot j receives sum_(k < count) ct[j + k * stride] (indices mod the slot count).

    ev: a :class:`fhe_core.ckks.Evaluator` with the keys of :func:`rotation_steps`; ct: degree 1,
    ``[2, l+1, N]``. Returns the same shape, level and scale. Depth 0; (radix - 1) key switches
    and one ModUp per stage, log_radix(count) stages.
    """
    out = ct
    for steps in _stages(count, stride, radix):
        rotated = [ev.rotate(out, steps[0])] if len(steps) == 1 else list(ev.rotate_hoisted(out, steps).values())
        for term in rotated:
            out = ev.add(out, term)
    return out


def replicate(ev, ct, count: int, stride: int = 1, *, radix: int = 2):
    """Copies slot j to slots j + k * stride, k < count, assuming the ``count - 1`` slots
    j - stride, ..., j - (count - 1) stride before each value hold zeros (e.g. after a mask that
    keeps column 0 of each row). :func:`rotate_sum` with stride -stride; keys of
    :func:`replicate_steps`; depth 0."""
    return rotate_sum(ev, ct, count, -stride, radix=radix)
