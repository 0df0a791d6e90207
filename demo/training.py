"""Encrypted HELR training through the service: the data owner encrypts MNIST 3 vs 8 and its
keys, uploads them, runs a training job, decrypts the model after every iteration and compares
it with the plaintext twin (same public schedule) and scikit-learn."""
from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from apps.logreg.client import HELRClient
from apps.logreg.config import HELRConfig
from apps.logreg.trainer import bootstraps_after, read_checkpoint
from apps.logreg.twin import HelrResult, design_matrix, train_helr
from data.helr import helr_dataset
from data.mnist import load_mnist
from ml.baselines import LogregBaseline, logreg_baseline
from ml.metrics import binary_report
from server.client import ServiceClient, Traffic


@dataclass
class HelrData:
    """Design matrices (bias column first, features scaled to [0, 1)) and 0/1 labels."""

    source: str
    x: np.ndarray
    y: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_helr_data(mnist: Path | None, samples: int | None = None, seed: int = 0) -> HelrData:
    """MNIST 3 vs 8 HELR features (bundled digits when ``mnist`` is None); with ``samples``, a
    seeded random subset of that many training rows (in their original order: the bundled
    digits come sorted by class, so the first rows would all be 3s)."""
    digits = load_mnist(mnist)
    data = helr_dataset(digits)
    rows = np.arange(len(data.x_train))
    if samples is not None and samples < len(rows):
        rows = np.sort(np.random.default_rng(seed).choice(rows, samples, replace=False))
    return HelrData(digits.source, design_matrix(data.x_train[rows], data.levels), data.y_train[rows],
                    design_matrix(data.x_test, data.levels), data.y_test)


@dataclass
class TrainingOutcome:
    """The encrypted job beside the twin and scikit-learn; per-iteration lists have one entry
    per iteration (from the decrypted checkpoint of that iteration)."""

    config: HELRConfig
    data_source: str
    samples: int
    baseline: LogregBaseline
    twin: HelrResult
    accuracy: list[float] = field(default_factory=list)
    auroc: list[float] = field(default_factory=list)
    max_error: list[float] = field(default_factory=list)       # max |w - w_twin|, |v - v_twin|
    decrypted: list[tuple[list[float], list[float]]] = field(default_factory=list)  # (w, v) per iteration
    iteration_seconds: list[float] = field(default_factory=list)
    final_accuracy: float = float("nan")
    final_auroc: float = float("nan")
    bootstraps: int = 0             # run by the job so far (the public level schedule)
    seconds: dict[str, float] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    traffic: dict[str, Traffic] = field(default_factory=dict)  # per step: bytes and seconds on the wire
    server_seconds: float = float("nan")  # the job on the server, started to finished


def train_through_service(user: ServiceClient, config: HELRConfig, data: HelrData, *, device: str,
                          work_dir: Path, progress: bool = True) -> TrainingOutcome:
    """Everything the data owner does, in order; the server sees keys, ciphertexts and the config."""
    seconds: dict[str, float] = {}
    schedule = config.schedule(len(data.x))
    start = time.perf_counter()
    baseline = logreg_baseline(data.x[:, 1:], data.y, data.x_test[:, 1:], data.y_test)
    seconds["sklearn"] = time.perf_counter() - start
    start = time.perf_counter()
    twin = train_helr(data.x, data.y, config.twin_config(), data.x_test, data.y_test, schedule=schedule)
    seconds["twin"] = time.perf_counter() - start
    outcome = TrainingOutcome(config, data.source, len(data.x), baseline, twin, seconds=seconds)

    client = HELRClient(config, device=device)
    keyset = _register_keys(user, client, work_dir, outcome, progress)
    start = time.perf_counter()
    dataset = client.encrypt_dataset(data.x, data.y, schedule).to_bytes()
    seconds["encrypt dataset"] = time.perf_counter() - start
    outcome.bytes["dataset"] = len(dataset)
    start, before = time.perf_counter(), user.traffic.snapshot()
    dataset_id = user.upload_dataset(dataset, client.params)
    seconds["upload dataset"] = time.perf_counter() - start
    outcome.traffic["upload dataset"] = user.traffic.since(before)
    del dataset

    start, before = time.perf_counter(), user.traffic.snapshot()
    job = user.train(config, keyset, dataset_id)
    follow = _Follower(user, client, job, data, outcome)
    final = user.wait(job, on_progress=follow, timeout=24 * 3600)
    follow(final)
    seconds["training job (server)"] = time.perf_counter() - start
    outcome.traffic["training job (status, checkpoints)"] = user.traffic.since(before)
    outcome.server_seconds = final["finished"] - final["started"]
    before = user.traffic.snapshot()
    w = client.decrypt_weights(user.download_model(job, client.params), data.x.shape[1])
    outcome.traffic["download model"] = user.traffic.since(before)
    report = binary_report(data.y_test, data.x_test @ w)
    outcome.final_accuracy, outcome.final_auroc = report.accuracy, report.auroc
    return outcome


def _register_keys(user: ServiceClient, client: HELRClient, work_dir: Path, outcome: TrainingOutcome,
                   progress: bool) -> str:
    """Keys are written to a file one at a time (a 128-bit bootstrapping key set is about 10 GB
    in memory), uploaded from it in parts, and the file is removed."""
    with tempfile.TemporaryDirectory(dir=work_dir, prefix="helr-keys-") as tmp:
        path = Path(tmp) / "eval-keys.bin"
        start = time.perf_counter()
        outcome.bytes["keys"] = client.write_eval_keys(path, progress=progress)
        outcome.seconds["keygen"] = time.perf_counter() - start
        start, before = time.perf_counter(), user.traffic.snapshot()
        keyset = user.register_keys(path, client.params)
        outcome.seconds["register keys"] = time.perf_counter() - start
        outcome.traffic["register keys"] = user.traffic.since(before)
    return keyset


class _Follower:
    """Called with each job status while it runs: decrypts the checkpoint of every iteration
    finished since the last call (the data owner can; the server never could) and compares it
    with the twin's record of the same iteration."""

    def __init__(self, user: ServiceClient, client: HELRClient, job: str, data: HelrData, outcome: TrainingOutcome):
        self.user, self.client, self.job, self.data, self.outcome = user, client, job, data, outcome
        self.last = time.perf_counter()

    def __call__(self, status: dict) -> None:
        done = len(self.outcome.accuracy)
        if status["iteration"] <= done:
            return
        now = time.perf_counter()
        fresh = status["iteration"] - done
        features = self.data.x.shape[1]
        for t in range(done, status["iteration"]):
            iteration, w_ct, v_ct = read_checkpoint(self.user.checkpoint(self.job, t + 1), self.client.params)
            w, v = self.client.decrypt_weights(w_ct, features), self.client.decrypt_weights(v_ct, features)
            record = self.outcome.twin.records[iteration - 1]
            report = binary_report(self.data.y_test, self.data.x_test @ w)
            self.outcome.accuracy.append(report.accuracy)
            self.outcome.auroc.append(report.auroc)
            self.outcome.max_error.append(float(max(np.abs(w - record.w).max(), np.abs(v - record.v).max())))
            self.outcome.decrypted.append((w.tolist(), v.tolist()))
            self.outcome.iteration_seconds.append((now - self.last) / fresh)
        self.last = now
        self.outcome.bootstraps = bootstraps_after(self.outcome.config, status["iteration"])
