"""End-to-end encrypted runs (client -> bytes -> server -> bytes -> client) for the command line,
the benchmark script and the GPU tests: the iDASH 2020 workload and SRBCT.

``idash_job`` / ``srbct_job`` prepare a model, its samples and the plaintext references;
``run_job`` plays both halves, times each step (the server's ``evaluate`` is the latency the
targets speak of) and checks the decrypted scores against the integer twin.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from fhe_core import serialize
from fhe_core.rlwe import Ciphertext, EvalKeySet

from .client import ForestClient, IdashSamples
from .plan import ForestPlan, IdashModel, PublicModel, named_params
from .server import ForestEvaluator
from .twin import predict_forest, predicted_classes


@dataclass
class Job:
    """A model, its samples, and what the encrypted scores are compared with."""

    name: str
    model: object                 # HEForest or IdashModel
    samples: object               # raw features [n, F] or IdashSamples
    n_samples: int
    labels: np.ndarray            # true classes [n]
    twin_scores: np.ndarray       # integer twin [n, C]
    library_predicted: np.ndarray | None = None  # xgboost's own argmax [n] (SRBCT)
    class_names: tuple[str, ...] = ()


@dataclass
class Run:
    """The outcome of one encrypted run: scores, predictions, timings (s), sizes (bytes), budget."""

    job: Job
    plan: ForestPlan
    scores: np.ndarray
    predicted: np.ndarray
    seconds: dict[str, float] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    budget_left: float = 0.0

    @property
    def exact(self) -> bool:
        return bool(np.array_equal(self.scores, self.job.twin_scores))

    @property
    def correct(self) -> int:
        return int((self.predicted == self.job.labels).sum())

    @property
    def same_as_library(self) -> int | None:
        lib = self.job.library_predicted
        return None if lib is None else int((self.predicted == lib).sum())

    @property
    def throughput(self) -> float:
        return self.job.n_samples / self.seconds["evaluate"]


def idash_job(directory: str | Path, n_samples: int = 99) -> Job:
    """The iDASH workload; more than 99 samples repeat them (the reference's 258)."""
    from data.idash import CLASS_NAMES, load_idash

    from .idash import evaluate_idash

    workload = load_idash(directory)
    reps = -(-n_samples // len(workload.labels))

    def tile(a):
        return np.concatenate([a] * reps)[:n_samples]

    return Job(f"iDASH, {n_samples} samples", IdashModel.from_workload(workload),
               IdashSamples(tile(workload.x0), tile(workload.x2)), n_samples, tile(workload.labels),
               tile(evaluate_idash(workload).scores), class_names=CLASS_NAMES)


def srbct_job(directory: str | Path | None = None, rounds: int = 50, depth: int = 2, frac_bits: int = 16,
              genes: int | None = None) -> Job:
    """SRBCT: XGBoost (hist) trained on the 63 training profiles, the 20 test samples.

    ``genes``: keep only the most variable genes of the training set (all 2,308 by default);
    fewer genes mean fewer thermometer bits, so fewer ciphertexts for small test rings."""
    import xgboost

    from data.genomics import load_khan
    from ml.baselines import XGBoostParams, xgboost_baseline

    from .encoding import PublicBinning
    from .export import export_booster

    data = load_khan(directory)
    if genes is not None:
        keep = np.sort(np.argsort(-data.x_train.var(axis=0))[:genes])
        data = dataclasses.replace(data, x_train=data.x_train[:, keep], x_test=data.x_test[:, keep])
    baseline = xgboost_baseline(data.x_train, data.y_train, data.x_test, data.y_test, len(data.classes),
                                XGBoostParams(rounds=rounds, max_depth=depth))
    binning = PublicBinning.from_dmatrix(baseline.train_matrix)
    forest = export_booster(baseline.booster, binning, frac_bits)
    margins = baseline.booster.predict(xgboost.DMatrix(data.x_test), output_margin=True)
    return Job(f"SRBCT, depth {forest.depth}, {len(forest.leaves)} trees", forest, data.x_test,
               len(data.x_test), data.y_test, predict_forest(forest, binning.encode(data.x_test)).scores,
               margins.argmax(axis=1), tuple(data.classes))


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_job(job: Job, preset: str = "BFVN13QP218L3D4T20", *, device: str = "cpu", width: int | None = None,
            repeats: int = 1, progress: bool = False, allow_insecure: bool = False, stacked: bool = True) -> Run:
    """Both halves of one encrypted run, everything the server gets going through bytes.

    ``repeats``: the server evaluates that many times; the median (and best) of all runs but the
    first (which builds the tables) is reported. ``stacked``: see ``ForestEvaluator``.
    """
    params = named_params(preset, allow_insecure=allow_insecure, device=device)
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    plan = ForestPlan.build(job.model, params, width=width or min(job.n_samples, params.n // 2 // job.model.n_classes))
    seconds["plan"] = time.perf_counter() - start
    public_json = plan.public_model(preset).to_json()

    start = time.perf_counter()
    client = ForestClient(PublicModel.from_json(public_json), device=device, allow_insecure=allow_insecure)
    keys = serialize.dumps(client.eval_keys(), packed=True)  # as the service sends them
    seconds["keys"] = time.perf_counter() - start
    start = time.perf_counter()
    upload = serialize.dumps_many(client.encrypt(job.samples, progress=progress), packed=True)
    seconds["encrypt"] = time.perf_counter() - start

    start = time.perf_counter()
    server = ForestEvaluator(params, serialize.loads(keys, params, expect=EvalKeySet), job.model, plan=plan,
                             stacked=stacked)
    cts = serialize.loads_many(upload, params, expect=Ciphertext, max_count=1 << 20, max_bytes=1 << 36)
    seconds["server setup"] = time.perf_counter() - start
    times, cpu_times = [], []
    for _ in range(max(repeats, 1)):
        _synchronize(params.device)
        start, cpu_start = time.perf_counter(), time.process_time()
        results = server.evaluate(cts)
        _synchronize(params.device)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    timed = slice(1, None) if len(times) > 2 else slice(None)  # the first run builds tables
    seconds["evaluate"] = float(np.median(times[timed]))
    seconds["evaluate best"] = float(np.min(times[timed]))
    seconds["evaluate cpu"] = float(np.median(cpu_times[timed]))  # process CPU time, all threads
    download = serialize.dumps_many(results, packed=True)

    start = time.perf_counter()
    back = serialize.loads_many(download, client.params, expect=Ciphertext)
    scores = client.decrypt_scores(back, job.n_samples)
    seconds["decrypt"] = time.perf_counter() - start
    predicted = predicted_classes(scores)
    return Run(job, plan, scores, predicted, seconds,
               {"keys": len(keys), "upload": len(upload), "download": len(download)},
               min(client.noise_budget(ct) for ct in back))


def plot_confusion(run: Run, path: str | Path) -> Path:
    """Confusion matrix (true rows, predicted columns) of the encrypted predictions, as a PNG."""
    from ml.plots import plt, save_figure  # pyplot with the Agg backend (no display)

    n_classes = run.scores.shape[1] if run.scores.shape[1] > 1 else 2
    matrix = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(matrix, (run.job.labels, run.predicted), 1)
    names = run.job.class_names or tuple(str(c) for c in range(n_classes))
    fig, ax = plt.subplots(figsize=(1.0 + 0.55 * n_classes, 0.8 + 0.5 * n_classes))
    ax.imshow(matrix, cmap="Blues")
    for (i, j), count in np.ndenumerate(matrix):
        if count:
            ax.text(j, i, str(count), ha="center", va="center", fontsize=8)
    ax.set_xticks(range(n_classes), names, rotation=90, fontsize=7)
    ax.set_yticks(range(n_classes), names, fontsize=7)
    ax.set_xlabel("predicted (encrypted)")
    ax.set_ylabel("true")
    ax.set_title(f"{run.job.name}: {run.correct}/{run.job.n_samples}", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)
