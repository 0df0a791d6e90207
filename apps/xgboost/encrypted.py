"""End-to-end encrypted runs (client -> bytes -> server -> bytes -> client) for the command line,
the benchmark script and the GPU tests: the iDASH 2020 workload and SRBCT (model-private encoding
by default, thermometer as an option).

``idash_job`` / ``srbct_job`` prepare a model, its samples and the plaintext references;
``run_job`` plays both halves, times each step (the server's ``evaluate`` is the latency the
targets speak of) and checks the decrypted scores against the integer twin. Ciphertexts travel
bit-packed (``serialize.dumps_many(..., packed=True)``); answers are flooded at level 0.
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

from fhe_core.rlwe import PublicKey

from .client import ForestClient, IdashSamples
from .grid import FixedPointGrid
from .plan import ForestPlan, IdashModel, PlanError, PublicModel, named_params
from .private_forest import PrivateForest
from .private_plan import PrivatePlan
from .private_server import PrivateForestEvaluator
from .server import ForestEvaluator
from .twin import predict_forest, predict_private, predicted_classes

SRBCT_GRID = FixedPointGrid(6, 2)  # 64 cells of 1/4 over [-8, 8): every test profile keeps its XGBoost class
SECURE_PRESETS = ("BFVN13QP218L3D4T20", "BFVN14QP438L7D8T20")  # smallest first


@dataclass
class Job:
    """A model, its samples, and what the encrypted scores are compared with."""

    name: str
    model: object                 # HEForest, PrivateForest or IdashModel
    samples: object               # raw features [n, F] or IdashSamples
    n_samples: int
    labels: np.ndarray            # true classes [n]
    twin_scores: np.ndarray       # integer twin [n, C]
    library_predicted: np.ndarray | None = None  # xgboost's argmax [n] on what the encoding sees (SRBCT)
    class_names: tuple[str, ...] = ()
    raw_predicted: np.ndarray | None = None      # xgboost's argmax on the raw features (the grid's cost)

    @property
    def encoding(self) -> str:
        return {PrivateForest: "private", IdashModel: "idash"}.get(type(self.model), "thermometer")


@dataclass
class Run:
    """The outcome of one encrypted run: scores, predictions, timings (s), sizes (bytes), the
    answers' measured noise budget (the flooding level)."""

    job: Job
    plan: ForestPlan
    scores: np.ndarray
    predicted: np.ndarray
    seconds: dict[str, float] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    budget_left: float = 0.0
    preset: str = ""

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
              genes: int | None = None, encoding: str = "private", grid: FixedPointGrid = SRBCT_GRID) -> Job:
    """SRBCT: XGBoost (hist) trained on the 63 training profiles, the 20 test samples.

    ``encoding``: "private" (the model-private encoding on ``grid``) or "thermometer" (the lab's
    cuts). ``genes``: keep only the most variable genes of the training set (all 2,308 by default);
    fewer genes mean fewer ciphertexts for small test rings."""
    import xgboost

    from data.genomics import load_khan
    from ml.baselines import XGBoostParams, xgboost_baseline

    from .encoding import PublicBinning
    from .export import export_booster
    from .private_forest import export_private

    data = load_khan(directory)
    if genes is not None:
        keep = np.sort(np.argsort(-data.x_train.var(axis=0))[:genes])
        data = dataclasses.replace(data, x_train=data.x_train[:, keep], x_test=data.x_test[:, keep])
    baseline = xgboost_baseline(data.x_train, data.y_train, data.x_test, data.y_test, len(data.classes),
                                XGBoostParams(rounds=rounds, max_depth=depth))
    raw = baseline.booster.predict(xgboost.DMatrix(data.x_test), output_margin=True).argmax(axis=1)
    if encoding == "private":
        forest = export_private(baseline.booster, grid, frac_bits)
        cells, missing = grid.index(data.x_test)
        twin = predict_private(forest, cells, missing).scores
        seen = baseline.booster.predict(xgboost.DMatrix(grid.quantize(data.x_test)), output_margin=True).argmax(axis=1)
    elif encoding == "thermometer":
        binning = PublicBinning.from_dmatrix(baseline.train_matrix)
        forest = export_booster(baseline.booster, binning, frac_bits)
        twin, seen = predict_forest(forest, binning.encode(data.x_test)).scores, raw
    else:
        raise PlanError(f"srbct_job: encoding must be 'private' or 'thermometer', got {encoding!r}")
    return Job(f"SRBCT ({encoding}), depth {forest.depth}, {len(forest.leaves)} trees", forest, data.x_test,
               len(data.x_test), data.y_test, twin, seen, tuple(data.classes), raw)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build_plan(model, params, width: int | None = None, n_samples: int = 1) -> ForestPlan | PrivatePlan:
    """The plan of any model kind, for batches of ``width`` samples (default: ``n_samples``, as
    many as the slots hold)."""
    if isinstance(model, PrivateForest):
        return PrivatePlan.build(model, params, width=width or n_samples)
    return ForestPlan.build(model, params, width=width or min(n_samples, params.n // 2 // model.n_classes))


def public_part(plan, preset: str | None = None) -> PublicModel:
    return PublicModel.private(plan.layout, preset) if isinstance(plan, PrivatePlan) else plan.public_model(preset)


def evaluator_for(plan, params, keys: EvalKeySet, public_key: PublicKey, model, *, stacked: bool = True,
                  graphed: bool = False):
    """The server half of ``plan``'s kind (no secret key); ``graphed``: batches replayed from a CUDA graph."""
    if isinstance(plan, PrivatePlan):
        return PrivateForestEvaluator(params, keys, model, public_key, plan=plan, graphed=graphed)
    return ForestEvaluator(params, keys, model, public_key=public_key, plan=plan, stacked=stacked, graphed=graphed)


def smallest_preset(job: Job, width: int | None = None) -> str:
    """The smallest 128-bit preset that evaluates (and floods) the job's model."""
    for name in SECURE_PRESETS:
        try:
            build_plan(job.model, named_params(name), width, job.n_samples)
            return name
        except PlanError:
            continue
    raise PlanError(f"{job.name}: no preset of {SECURE_PRESETS} evaluates this model with flooding")


def run_job(job: Job, preset: str | None = None, *, device: str = "cpu", width: int | None = None,
            repeats: int = 1, progress: bool = False, allow_insecure: bool = False, stacked: bool = True,
            graphed: bool = False) -> Run:
    """Both halves of one encrypted run, everything the server gets going through bytes.

    ``preset``: default the smallest 128-bit one that fits. ``repeats``: the server evaluates that
    many times; the median (and best) of all runs but the first (which builds the tables) is
    reported (with ``graphed``, the first also captures the CUDA graph). ``stacked``, ``graphed``: see
    ``ForestEvaluator``.
    """
    preset = preset or smallest_preset(job, width)
    params = named_params(preset, allow_insecure=allow_insecure, device=device)
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    plan = build_plan(job.model, params, width, job.n_samples)
    seconds["plan"] = time.perf_counter() - start
    public_json = public_part(plan, preset).to_json()

    start = time.perf_counter()
    client = ForestClient(PublicModel.from_json(public_json), device=device, allow_insecure=allow_insecure)
    keys = serialize.dumps_many([client.eval_keys(), client.public_key], packed=True)  # as the service sends them
    seconds["keys"] = time.perf_counter() - start
    start = time.perf_counter()
    upload = serialize.dumps_many(client.encrypt(job.samples, progress=progress), packed=True)
    seconds["encrypt"] = time.perf_counter() - start

    start = time.perf_counter()
    eval_keys, public_key = serialize.loads_many(keys, params, expect=(EvalKeySet, PublicKey), max_bytes=1 << 36)
    server = evaluator_for(plan, params, eval_keys, public_key, job.model, stacked=stacked, graphed=graphed)
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
               min(client.noise_budget(ct) for ct in back), preset)


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
