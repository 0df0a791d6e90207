"""Encrypted tree inference sharded across ranks (GPUs, or gloo processes on CPUs).

A request's ciphertexts come in batches of ``plan.n_inputs`` (one batch of samples each); rank r of
k evaluates the contiguous batches ``fhe_core.distributed.shard_range(batches, r, k)`` with its own
:class:`~apps.xgboost.server.ForestEvaluator` (the same keys and model on every rank), and rank
``dst`` gathers the encrypted scores in batch order. Each batch's scores before flooding depend on
its inputs, the keys and the model only, through deterministic integer kernels, so they are the
one-device scores bit for bit; every rank then floods its answers afresh (``server.flooded_answers``),
so they decrypt to the one-device scores without being the same words. The batches are
independent, so k ranks take about 1/k of the time when the batches divide evenly (plus one gather
of the answers, at the answer level: a few limbs each).
"""
from __future__ import annotations

import torch.distributed as dist

from fhe_core import distributed
from fhe_core.rlwe import Ciphertext

from .plan import PlanError
from .server import ForestEvaluator


def evaluate_sharded(evaluator: ForestEvaluator, cts: list[Ciphertext], *, dst: int = 0,
                     group=None) -> list[Ciphertext] | None:
    """``evaluator.evaluate(cts)`` split by batches across the ranks of ``group``: every rank passes
    the same ``cts``; rank ``dst`` gets every batch's scores in order, the others None. A count
    that is not a whole number of batches is refused on every rank before any work."""
    per_batch = evaluator.plan.n_inputs
    if not isinstance(cts, (list, tuple)) or not cts or len(cts) % per_batch:
        raise PlanError(f"evaluate_sharded: expected a non-empty list of whole batches of {per_batch} ciphertexts, "
                        f"got {len(cts) if isinstance(cts, (list, tuple)) else type(cts).__name__}")
    share = distributed.shard_range(len(cts) // per_batch, dist.get_rank(group), dist.get_world_size(group))
    scores = evaluator.evaluate(list(cts[share.start * per_batch:share.stop * per_batch])) if share else []
    return distributed.gather(scores, evaluator.plan.params, dst=dst, group=group)


__all__ = ["evaluate_sharded"]
