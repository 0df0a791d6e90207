"""A circuit of ciphertext operations captured once in a CUDA graph and replayed: device speed from Python.

An eager call issues every kernel from Python, a few microseconds of host time each; a circuit of short kernels
(BFV at N = 2^13, a forest evaluation) then takes several times its device time. A replayed graph launches them all
at once from the driver. :class:`CapturedCircuit` is the shared mechanism (CKKS's ``GraphedBootstrapper`` and the
tree-ensemble servers use it): ``fn(*ciphertexts)`` is captured once on static copies of its first inputs; a later
call copies its inputs' words into those, replays, and copies the outputs out.

**When one graph serves every call.** The graph repeats the first call's kernels with the first call's host-side
values (shapes, levels, Galois elements, constants, seeds). So ``fn``'s data path must not depend on anything but
the static inputs' words and its own fixed state: the same shapes and levels at every call, no randomness drawn
inside (flooding stays outside), no host reads of device data (they would be frozen at capture time).

**Costs.** The graph keeps its own memory pool (every intermediate of one call stays allocated while the circuit
lives). The first call runs ``fn`` twice eagerly on a side stream (warm-up: lazily built tables and cached operands
must exist before the capture; a plaintext's operand forms are not kept inside a capture) and captures a third.
Entry checks the graph skips (the residue range check of an input, ``fhe_core.rlwe.checks``: the static inputs
carry the canonical mark) are the caller's to run on every call's inputs.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from fhe_core.rlwe.checks import mark_canonical
from fhe_core.rlwe.ciphertext import Ciphertext

WARMUP_RUNS = 2  # eager runs on a side stream before the capture (tables, cached constants)


class CapturedCircuit:
    """``fn(*ciphertexts) -> tuple of ciphertexts`` captured once on static copies of ``inputs``; replayed by
    :meth:`run`. CUDA only; not safe for concurrent use."""

    def __init__(self, fn: Callable[..., tuple[Ciphertext, ...]], inputs: tuple[Ciphertext, ...]):
        self._static = tuple(mark_canonical(ct.replace(data=ct.data.clone())) for ct in inputs)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_RUNS):
                fn(*self._static)
        torch.cuda.current_stream().wait_stream(side)
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph):
            self._outputs = fn(*self._static)

    def run(self, data: tuple[torch.Tensor, ...]) -> tuple[Ciphertext, ...]:
        """Copy ``data`` (the static inputs' shapes, in order) in, replay, copy the outputs out (new tensors: the
        next replay overwrites the static ones)."""
        for static, d in zip(self._static, data, strict=True):
            static.data.copy_(d)
        self._graph.replay()
        return tuple(mark_canonical(out.replace(data=out.data.clone())) for out in self._outputs)


__all__ = ["CapturedCircuit"]
