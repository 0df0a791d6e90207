"""Data-parallel encrypted HELR over ``torch.distributed``: k ranks (GPUs, or CPU processes on gloo)
share every batch's ciphertexts; the weights stay bit-identical on every rank and to one device.

**Split.** Rank r of k holds, of every block of c ciphertexts, the contiguous share
``shard_range(c, r, k)`` (:func:`shard_dataset`) and runs :class:`DataParallelHELRTrainer`, the
trainer of :mod:`apps.logreg.trainer` with one change: the two partial sums of its share (the
cubic terms at level l - 3 and the z sum at level l, :meth:`EncryptedHELRTrainer._terms`) go
through one exact all-reduce mod Q (:func:`fhe_core.distributed.all_reduce_sum`, one flat
buffer). Sums mod Q are exact in any order and grouping, so every rank then holds the residues
the single-device trainer computes, and everything after (the constant, rotate-and-sum over the
samples, the mask, the Nesterov update, the bootstrap) runs on every rank on identical inputs.
The evaluation draws no randomness and its kernels are deterministic integer arithmetic, so w
and v stay bit-identical on every rank with no broadcast at all; :func:`train_rank` proves it at
the end (``distributed.check_replicated``) and the tests compare with one device bit for bit.

**Bootstrapping: every rank, not rank 0 and a broadcast.** The pair w + i v is one ciphertext,
bootstrapped once; by counting, rank 0 bootstrapping and broadcasting costs T_boot + T_bcast
(two ciphertexts at the output level: 2 x 2 x 10 x 2^16 x 8 B = 21 MB at N16_H192_FULL, about
0.1 ms on NVLink) while the other ranks wait, and every rank bootstrapping costs T_boot with no
communication: never slower, and no synchronisation point. Splitting the pair (w on one GPU, v on
another) would run two bootstraps of the same cost side by side: no faster either. What would
be faster is splitting one bootstrap's linear transforms across GPUs (an all-reduce per BSGS
stage); not done here.

**Amdahl.** Per iteration the split part is the c ciphertexts' work: all 4c ciphertext products and
c log2(columns) of the rotations (at N16_H192_FULL, c = 8: 32 products and 64 of the 78
rotations). The replicated part is the 2 log2(rows) = 14 rotations over the samples, the mask
product, the constant products of the update, one all-reduce (2 x (7 + 10) limbs x 2^16 x 8 B =
17.8 MB right after a bootstrap, 2 x (3 + 6) limbs = 9.4 MB the iteration after; 2 (k - 1) / k of
it sent per rank), and the bootstrap every second iteration. With a
fraction p of the time split k ways the speedup is 1 / ((1 - p) + p / k); docs/benchmarks.md
has the measured times.

**Sharded predictions** (:func:`score_sharded`): the ciphertexts of a scoring batch are split
contiguously across the ranks, each scores its share with its replica of w, and rank ``dst``
gathers the scores in order: bit-identical to one device (each ciphertext's score depends on it
and w only).

:func:`train_data_parallel` runs it all on k spawned processes from files a client wrote (the
evaluation keys, the encrypted dataset, the schedule): ``python -m apps.logreg train --nproc k``.
"""
from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from tqdm import tqdm

from fhe_core import distributed, rlwe, serialize
from fhe_core.ckks import Ciphertext
from fhe_core.params import Params

from .config import HELRConfig
from .dataset import EncryptedDataset
from .schedule import MiniBatchSchedule
from .trainer import EncryptedHELRTrainer, HELRTrainingError


def shard_dataset(dataset: EncryptedDataset, rank: int, world: int) -> EncryptedDataset:
    """The share of rank ``rank`` of ``world``: of every block, the ciphertexts
    ``distributed.shard_range(len(block), rank, world)`` (same samples, features and batch size)."""
    blocks = tuple(tuple(block[i] for i in distributed.shard_range(len(block), rank, world))
                   for block in dataset.blocks)
    return EncryptedDataset(blocks, dataset.samples, dataset.features, dataset.batch_size)


class DataParallelHELRTrainer(EncryptedHELRTrainer):
    """:class:`EncryptedHELRTrainer` on rank ``rank`` of ``world`` (default: the process group's)
    holding ``shard_dataset(dataset, rank, world)``; every rank calls :meth:`step` in lockstep
    (each step is a collective). Needs world <= ciphertexts per batch: a rank without a share
    would have no partial sum to contribute."""

    def __init__(self, config: HELRConfig, keys: rlwe.EvalKeySet, shard: EncryptedDataset,
                 schedule: MiniBatchSchedule, *, group=None, params: Params | None = None):
        self.group = group
        self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        if self.world > config.ciphertexts_per_batch:
            raise HELRTrainingError(f"DataParallelHELRTrainer: {self.world} ranks for {config.ciphertexts_per_batch} "
                                    "ciphertexts per batch; use at most one rank per ciphertext")
        super().__init__(config, keys, shard, schedule, params=params)

    def _block_length(self) -> int:
        return len(distributed.shard_range(self.config.ciphertexts_per_batch, self.rank, self.world))

    def _block_sums(self, sums: tuple[Ciphertext, Ciphertext]) -> tuple[Ciphertext, Ciphertext]:
        # every rank runs the same schedule, so the shapes, levels and scales agree by construction:
        # the metadata check (a small all-gather and a device sync per iteration) is skipped
        total, z_sum = distributed.all_reduce_sum(sums, self.params, group=self.group, check=False)
        return total, z_sum

    def check_replicas(self) -> None:
        """CollectiveError on every rank unless w and v are identical on every rank."""
        distributed.check_replicated([self.weights, self.velocity], self.params, group=self.group)


def score_sharded(trainer: EncryptedHELRTrainer, features: list[Ciphertext], *, dst: int = 0,
                  group=None) -> list[Ciphertext] | None:
    """``trainer.score(features)`` split across the ranks: each scores its contiguous share, rank
    ``dst`` gets every score in order (None elsewhere). Every rank passes the same list."""
    share = distributed.shard_range(len(features), dist.get_rank(group), dist.get_world_size(group))
    scores = trainer.score([features[i] for i in share])
    return distributed.gather(scores, trainer.params, dst=dst, group=group)


# ---- k processes from the client's files ----------------------------------------------------------------

@dataclass(frozen=True)
class ParallelJob:
    """What every rank reads: the files a client wrote (paths), the settings, the device kind.

    features: optional encrypted test samples (``serialize.dumps_many`` of
    ``HELRClient.encrypt_features``) scored at the end with :func:`score_sharded`."""

    config_json: str
    keys: str
    dataset: str
    schedule: str
    device: str = "cpu"
    features: str | None = None
    progress: bool = False


@dataclass
class ParallelResult:
    """Rank 0's account: per iteration the seconds of the step (synchronised) and whether it
    bootstrapped, and ``client_checkpoint()`` (w, v at level 0) after it; the full ``checkpoint()``
    at the end (resumable, bit for bit); the serialized scores and their seconds when features
    were given."""

    seconds: list[float] = field(default_factory=list)
    bootstrapped: list[bool] = field(default_factory=list)
    client_checkpoints: list[bytes] = field(default_factory=list)
    checkpoint: bytes = b""
    scores: bytes | None = None
    score_seconds: float = 0.0


def _synced(device: str) -> float:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter()


def train_rank(rank: int, world: int, job: ParallelJob) -> ParallelResult | None:
    """One rank of :func:`train_data_parallel` (in an initialized process group): load the keys and
    this rank's share on its device, train through the schedule, check the replicas, score."""
    config = HELRConfig.from_json(job.config_json)
    device = f"cuda:{torch.cuda.current_device()}" if job.device.startswith("cuda") else "cpu"
    params = config.bootstrapping_parameters.params(device=device, allow_insecure=config.allow_insecure)
    keys = serialize.load(job.keys, params, expect=rlwe.EvalKeySet)
    dataset = EncryptedDataset.from_bytes(Path(job.dataset).read_bytes(), params)
    schedule = MiniBatchSchedule.from_npz(job.schedule)
    trainer = DataParallelHELRTrainer(config, keys, shard_dataset(dataset, rank, world), schedule, params=params)
    del dataset
    result = ParallelResult()
    for _ in tqdm(range(schedule.iterations), desc=f"encrypted HELR on {world} ranks", unit="it",
                  disable=rank != 0 or not job.progress):
        bootstraps, start = trainer.bootstraps, _synced(device)
        trainer.step()
        result.seconds.append(_synced(device) - start)
        result.bootstrapped.append(trainer.bootstraps > bootstraps)
        if rank == 0:
            result.client_checkpoints.append(trainer.client_checkpoint())
    trainer.check_replicas()
    if job.features:
        features = serialize.loads_many(Path(job.features).read_bytes(), params, expect=Ciphertext)
        start = _synced(device)
        scores = score_sharded(trainer, features)
        result.score_seconds = _synced(device) - start
        result.scores = None if scores is None else serialize.dumps_many(scores, packed=True)
    if rank != 0:
        return None
    result.checkpoint = trainer.checkpoint()
    return result


def train_data_parallel(config: HELRConfig, keys_path: str | os.PathLike, dataset: EncryptedDataset,
                        schedule: MiniBatchSchedule, world: int, *, device: str = "cpu",
                        features: list[Ciphertext] | None = None, progress: bool = False) -> ParallelResult:
    """Train on ``world`` spawned ranks (NCCL, one GPU each, for ``device="cuda"``; gloo on the CPU)
    from the evaluation keys at ``keys_path`` (``HELRClient.write_eval_keys``), the encrypted
    dataset and the schedule; returns rank 0's :class:`ParallelResult`."""
    if not 1 <= world <= config.ciphertexts_per_batch:
        raise HELRTrainingError(f"train_data_parallel: {world} ranks for {config.ciphertexts_per_batch} ciphertexts "
                                "per batch; use 1 to that many")
    if device.startswith("cuda") and world > torch.cuda.device_count():
        raise HELRTrainingError(f"train_data_parallel: {world} ranks need {world} GPUs (NCCL takes one GPU per rank); "
                                f"this machine has {torch.cuda.device_count()}")
    with tempfile.TemporaryDirectory(prefix="helr-parallel-") as folder:
        folder = Path(folder)
        (folder / "dataset.bin").write_bytes(dataset.to_bytes())
        schedule.to_npz(folder / "schedule.npz")
        if features is not None:
            (folder / "features.bin").write_bytes(serialize.dumps_many(features, packed=True))
        job = ParallelJob(config.to_json(), os.fspath(keys_path), os.fspath(folder / "dataset.bin"),
                          os.fspath(folder / "schedule.npz"), device,
                          None if features is None else os.fspath(folder / "features.bin"), progress)
        backend = "nccl" if device.startswith("cuda") else "gloo"
        return distributed.spawn(train_rank, world, job, backend=backend, timeout_s=24 * 3600)[0]


__all__ = ["DataParallelHELRTrainer", "ParallelJob", "ParallelResult", "score_sharded", "shard_dataset",
           "train_data_parallel", "train_rank"]
