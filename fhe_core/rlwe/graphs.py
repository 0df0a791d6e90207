"""Ciphertext circuits replayed from CUDA graphs: launches from the driver, not from Python.

An evaluator call issues a few kernels and a few dozen tensor operations from Python (~5 us of
host time each); a circuit of a few thousand of them at small levels takes longer to issue
than to run. Captured once in a CUDA graph, it is replayed with one call.

**What may be captured.** A function of ciphertexts whose kernels and their arguments depend
only on the inputs' metadata (level, scale, slots, shape: everything but the residues) and on
state that does not change while the graph lives (keys, parameters, constants of fixed value).
:class:`GraphedFunction` captures one graph per metadata signature, so a circuit whose
constants follow the scales gets a graph per scale; a constant that changes between calls
with equal metadata (a step size, a counter) must be computed outside, eagerly, and passed in
as a ciphertext.

**What a graph holds.** The inputs are copied into static buffers, the graph replays, the
outputs are copied out (the next replay overwrites them). The graph reads, by address, every
tensor its kernels read: keys, tables and the evaluator's cached constants. The caches are
bounded and drop their tensors when full, so a capture keeps a reference to each tensor
``keep()`` returns at the end of the capture (the evaluators' ``device_constants``) for as long
as the graph lives: dropped from a cache, a constant stays allocated and unchanged. Each graph
keeps its own memory pool (every intermediate of one call).

The first call per signature runs the function eagerly twice (lazily built tables and cached
constants must exist before the capture: a capture cannot copy from the host) and captures a
third run. Results are those of the eager calls bit for bit (the same kernels on the same data).
"""
from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Sequence

import torch

from fhe_core.errors import ParameterError
from fhe_core.rlwe.checks import is_marked_canonical, mark_canonical
from fhe_core.rlwe.ciphertext import Ciphertext

WARMUP_RUNS = 2    # eager runs on a side stream before the capture (tables, cached constants)
MAX_GRAPHS = 8     # signatures a GraphedFunction keeps (least recently used dropped: its memory freed)


def _no_tensors() -> list[torch.Tensor]:
    return []


class CapturedCircuit:
    """``fn(*inputs) -> tuple of ciphertexts`` captured once on static copies of ``inputs``;
    replayed by :meth:`run`. ``keep()``: the tensors the graph reads that others may drop
    (module docstring), called once the capture is done."""

    def __init__(self, fn: Callable[..., tuple[Ciphertext, ...]], inputs: Sequence[Ciphertext],
                 keep: Callable[[], list[torch.Tensor]] = _no_tensors):
        if not inputs or any(ct.data.device.type != "cuda" for ct in inputs):
            raise ParameterError("CapturedCircuit: CUDA graphs need ciphertexts on a CUDA device")
        self._static = tuple(mark_canonical(ct.replace(data=ct.data.clone())) for ct in inputs)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_RUNS):
                fn(*self._static)
        torch.cuda.current_stream().wait_stream(side)
        self._graph = torch.cuda.CUDAGraph()
        # thread_local: a server's worker captures a training job's circuits in its job thread while its
        # main thread evaluates predictions on the same device; "global" would fail those threads' syncs
        with torch.cuda.graph(self._graph, capture_error_mode="thread_local"):
            self._outputs = tuple(fn(*self._static))
        self._kept = list(keep())

    def run(self, data: Sequence[torch.Tensor]) -> tuple[Ciphertext, ...]:
        """Copy ``data`` (the static inputs' shapes, in order) in, replay, copy the outputs out
        (new tensors, with the metadata of the captured outputs)."""
        for static, d in zip(self._static, data, strict=True):
            static.data.copy_(d)
        self._graph.replay()
        return tuple(mark_canonical(out.replace(data=out.data.clone())) for out in self._outputs)


def signature(ct: Ciphertext) -> tuple:
    """Everything of ``ct`` but its residues: its dataclass fields (level, params_id, a CKKS scale
    and slots, ...), the data's shape and device."""
    fields = tuple((f.name, getattr(ct, f.name)) for f in dataclasses.fields(ct)
                   if f.name not in ("data", "uniform_seed"))
    return type(ct), fields, tuple(ct.data.shape), ct.data.device


class GraphedFunction:
    """``fn(*ciphertexts) -> tuple of ciphertexts`` replayed from a CUDA graph per metadata
    signature of the inputs (module docstring: what ``fn`` may do). Same results as ``fn`` bit
    for bit. Inputs: ciphertexts on a CUDA device with checked residues (the canonical mark);
    ``keep``: see :class:`CapturedCircuit`. Not safe for concurrent use."""

    def __init__(self, fn: Callable[..., tuple[Ciphertext, ...]], *,
                 keep: Callable[[], list[torch.Tensor]] = _no_tensors, max_graphs: int = MAX_GRAPHS):
        self._fn, self._keep, self._max = fn, keep, max_graphs
        self._circuits: OrderedDict[tuple, CapturedCircuit] = OrderedDict()

    def __call__(self, *inputs: Ciphertext) -> tuple[Ciphertext, ...]:
        if not all(isinstance(ct, Ciphertext) and is_marked_canonical(ct) for ct in inputs):
            # a replay skips the residue checks an eager call runs once per object
            raise ParameterError("GraphedFunction: every input must be a ciphertext with checked residues (a result "
                                 "of an evaluator operation, or passed through rlwe.checks.check_canonical)")
        key = tuple(signature(ct) for ct in inputs)
        circuit = self._circuits.pop(key, None)
        if circuit is None:
            if len(self._circuits) >= self._max:
                self._circuits.popitem(last=False)
            circuit = CapturedCircuit(self._fn, inputs, self._keep)
        self._circuits[key] = circuit
        return circuit.run([ct.data for ct in inputs])

    @property
    def graphs(self) -> int:
        """How many captured graphs it holds now."""
        return len(self._circuits)


__all__ = ["CapturedCircuit", "GraphedFunction", "MAX_GRAPHS", "WARMUP_RUNS", "signature"]
