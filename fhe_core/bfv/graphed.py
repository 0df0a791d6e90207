"""BFV operations from Python at device speed: each key-switching or multiplying operation captured in a CUDA graph
per input shape on its first call, then replayed (``Evaluator.graphed()``).

An eager BFV call at N = 2^13 issues 3 to 22 extension kernels from Python (a product and relinearization: 21), a
few microseconds of host time each, and the kernels are short: the call takes a few times its device time. A
replay launches them all at once; a call then costs the copy of its inputs into the graph's static buffers, the
replay and the copy of the result out (``fhe_core.rlwe.graphs.GraphedFunction``).

**One graph per operation (and step) and input signature** (levels, degrees, shapes): an operation's kernels
depend on nothing else (the keys, tables, BEHZ tables and kept plaintext forms are fixed while the evaluator lives),
so a graph captured once serves every later call with the same signature. The entry checks that the replay skips
(type, parameters, device, shape, and the residue range check of an operand seen for the first time) run before
it, as the eager call's; the rest (degrees, equal levels, keys, steps) is checked by the eager warm-up of the first
call of each signature, which raises as the eager operation would and captures nothing.

Holds one memory pool per graph (at most ``rlwe.graphs.MAX_GRAPHS`` per operation) while it lives; not for
concurrent use. CUDA only.
"""
from __future__ import annotations

from collections.abc import Callable

from fhe_core.errors import ParameterError
from fhe_core.rlwe import Ciphertext
from fhe_core.rlwe.graphs import GraphedFunction

GRAPHED = ("multiply", "relinearize", "multiply_relin", "rotate_rows", "swap_columns", "mod_switch_to_next")


class GraphedEvaluator:
    """An :class:`~fhe_core.bfv.Evaluator` whose operations in :data:`GRAPHED` replay CUDA graphs (module
    docstring); every other attribute is the evaluator's (eager). Same results as the eager calls, bit for bit."""

    def __init__(self, evaluator):
        if evaluator.ctx.device.type != "cuda":
            raise ParameterError(f"GraphedEvaluator: CUDA graphs need an evaluator on a CUDA device, this one runs "
                                 f"on {evaluator.ctx.device}")
        self.evaluator = evaluator
        self._functions: dict[tuple, GraphedFunction] = {}  # (op, step) -> its graphs by input signature

    def __getattr__(self, name: str):
        if name == "evaluator":  # (an instance made without __init__: copy, pickle)
            raise AttributeError(name)
        return getattr(self.evaluator, name)

    def _replay(self, op: str, fn: Callable[..., Ciphertext], cts: tuple[Ciphertext, ...], extra=()) -> Ciphertext:
        for ct in cts:
            self.evaluator._ct(ct, op, degree=None)  # the eager call's entry checks (residues once per object)
        key = (op, extra)
        if key not in self._functions:
            self._functions[key] = GraphedFunction(lambda *x: (fn(*x),))
        (out,) = self._functions[key](*cts)
        return out

    def multiply(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        return self._replay("multiply", self.evaluator.multiply, (a, b))

    def relinearize(self, a: Ciphertext) -> Ciphertext:
        return self._replay("relinearize", self.evaluator.relinearize, (a,))

    def multiply_relin(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        return self._replay("multiply_relin", self.evaluator.multiply_relin, (a, b))

    def rotate_rows(self, a: Ciphertext, steps: int) -> Ciphertext:
        if isinstance(steps, bool) or not isinstance(steps, int):  # (before it becomes part of a cache key)
            raise ParameterError(f"rotate_rows: steps must be an int, got {type(steps).__name__}")
        return self._replay("rotate_rows", lambda x: self.evaluator.rotate_rows(x, steps), (a,), steps)

    def swap_columns(self, a: Ciphertext) -> Ciphertext:
        return self._replay("swap_columns", self.evaluator.swap_columns, (a,))

    def mod_switch_to_next(self, a: Ciphertext) -> Ciphertext:
        return self._replay("mod_switch_to_next", self.evaluator.mod_switch_to_next, (a,))


__all__ = ["GRAPHED", "GraphedEvaluator"]
