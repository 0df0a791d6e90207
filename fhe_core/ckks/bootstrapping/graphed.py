"""Repeated bootstraps from Python at device speed: one bootstrap captured in a CUDA graph, then
replayed (the ``scripts/bench.py`` measurement, as an API).

An eager bootstrap at N = 2^16 issues a few thousand kernel launches from Python; the host time
(~60 ms) then only partly overlaps the ~60 ms of kernels, so a call takes longer than the device
time. A replayed graph launches them all at once from the driver.

**Why one graph serves every call.** The circuit's data path does not depend on the input's
scale (the scale only enters the final bookkeeping: ModRaise declares q_0 whatever it is) nor on
its level (inputs are first dropped to ``min_input_level``), and the slot count is the
bootstrapper's. So one capture per mode (``bootstrap`` or ``bootstrap_pair``) is replayed for
every input: the input's first ``min_input_level + 1`` limbs are copied into a static buffer
(the level drop costs no extra copy), the graph replays, and the static output is copied out
into a new ciphertext with the input's scale.

**Costs.** The graph keeps its own memory pool: every intermediate of one bootstrap stays
allocated (at N16_H192_FULL a few GB) while the :class:`GraphedBootstrapper` lives, and the
evaluator's constants it reads (:class:`fhe_core.rlwe.graphs.CapturedCircuit`). The first call per
mode runs the bootstrap twice eagerly (warm-up: lazily built tables and the evaluator's constant
cache must exist before capture) and captures a third.
"""
from __future__ import annotations

import torch

from fhe_core.ckks.ciphertext import Ciphertext, rlwe_context
from fhe_core.errors import ParameterError
from fhe_core.rlwe.checks import check_canonical, mark_canonical
from fhe_core.rlwe.graphs import CapturedCircuit


class GraphedBootstrapper:
    """A :class:`~fhe_core.ckks.bootstrapping.Bootstrapper` whose :meth:`bootstrap` and
    :meth:`bootstrap_pair` replay a CUDA graph captured on their first call (module docstring).

    Same contract, checks and results as the eager methods, bit for bit (the same kernels on
    the same data). Only for a bootstrapper on a CUDA device (ParameterError otherwise). Not
    safe for concurrent use; at most one replay runs at a time on the current stream.
    """

    def __init__(self, bootstrapper):
        device = torch.device(bootstrapper.params.device)
        if device.type != "cuda":
            raise ParameterError(f"GraphedBootstrapper: CUDA graphs need a bootstrapper on a CUDA device, "
                                 f"this one runs on {device}")
        self.bootstrapper = bootstrapper
        self._single: CapturedCircuit | None = None
        self._pair: CapturedCircuit | None = None

    def __getattr__(self, name: str):
        # the rest of the Bootstrapper interface (levels, keys, evaluator, steps) unchanged; an
        # instance without its bootstrapper (copy, pickle: made without __init__) has none
        if name == "bootstrapper":
            raise AttributeError(name)
        return getattr(self.bootstrapper, name)

    def bootstrap(self, ct: Ciphertext) -> Ciphertext:
        """:meth:`Bootstrapper.bootstrap` by graph replay (captured on the first call)."""
        boot = self.bootstrapper
        checked = boot.check_input(ct, "bootstrap")  # a view of the first limbs when it drops levels
        check_canonical(rlwe_context(boot.params), ct, ct.level, "bootstrap")  # as the eager call's first op
        if self._single is None:
            self._single = CapturedCircuit(lambda x: (boot.bootstrap(x),), (checked,), boot.evaluator.device_constants)
        (out,) = self._single.run((checked.data,))
        return mark_canonical(out.replace(scale=ct.scale))

    def bootstrap_pair(self, a: Ciphertext, b: Ciphertext) -> tuple[Ciphertext, Ciphertext]:
        """:meth:`Bootstrapper.bootstrap_pair` by graph replay (captured on the first call)."""
        boot = self.bootstrapper
        checked = boot.check_pair(a, b)
        for ct in (a, b):
            check_canonical(rlwe_context(boot.params), ct, ct.level, "bootstrap_pair")
        if self._pair is None:
            self._pair = CapturedCircuit(boot.bootstrap_pair, checked, boot.evaluator.device_constants)
        out_a, out_b = self._pair.run(tuple(ct.data for ct in checked))
        return mark_canonical(out_a.replace(scale=a.scale)), mark_canonical(out_b.replace(scale=a.scale))


__all__ = ["GraphedBootstrapper"]
