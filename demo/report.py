"""The main job's report: Markdown with tables and plots, and the same numbers as JSON."""
from __future__ import annotations

import json
import math
import platform
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from apps.logreg.cli import plot_run

from .forest import ForestOutcome
from .training import TrainingOutcome

MiB = 2.0**20


@dataclass
class Environment:
    """Where and how the job ran."""

    date: str
    device: str
    device_name: str
    cpu: str
    cores: int
    memory_gib: float
    torch: str
    secure: bool
    wall_seconds: float = 0.0
    peak_client_bytes: int = 0
    peak_server_bytes: int = 0
    peak_total_bytes: int = 0
    notes: list[str] = field(default_factory=list)


def describe_machine(device: str, secure: bool, date: str) -> Environment:
    import psutil

    name = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "CPU"
    return Environment(date, device, name, platform.processor() or platform.machine(), psutil.cpu_count() or 0,
                       psutil.virtual_memory().total / 2**30, torch.__version__, secure)


def forest_rows(outcomes: list[ForestOutcome]) -> list[tuple]:
    rows = []
    for o in outcomes:
        n = o.n_samples
        rows.append((
            o.name, o.preset, f"{o.correct}/{n}",
            "-" if o.library_correct is None else f"{o.library_correct}/{n}",
            "yes" if o.exact else "NO",
            "-" if o.same_as_library is None else f"{o.same_as_library}/{n}",
            f"{o.seconds['first predict (loads keys and model)']:.2f} s / "
            f"{o.seconds['predict (HTTP round trip)']:.2f} s",
            f"{n / o.seconds['predict (HTTP round trip)']:.1f}",
            f"{o.bytes['keys'] / MiB:.1f} / {o.bytes['request'] / MiB:.1f} / {o.bytes['response'] / MiB:.1f}",
            f"{o.budget_left:.1f}",
        ))
    return rows


TRAFFIC_HEADERS = ["job", "step", "requests", "MiB sent", "MiB received", "seconds in HTTP", "MB/s",
                   "client serialization s", "server work s"]


def traffic_rows(forests: list[ForestOutcome], training: TrainingOutcome | None) -> list[tuple]:
    """Per job and step: what the client's HTTP calls moved and how long they took, beside the
    server's own work (its Server-Timing for predictions; started to finished for the training
    job, whose row also counts the status polls and checkpoint downloads that ran meanwhile)."""
    steps = [(o.name, step, t, None) for o in forests for step, t in o.traffic.items()]
    if training is not None:
        job = "training job (status, checkpoints)"
        steps += [("helr", step, t, training.server_seconds if step == job else None)
                  for step, t in training.traffic.items()]
    rows = []
    for name, step, t, server in steps:
        moved = t.sent + t.received
        work = server if server is not None else t.server_seconds
        rows.append((name, step, t.requests, f"{t.sent / MiB:.1f}", f"{t.received / MiB:.2f}", f"{t.seconds:.2f}",
                     f"{moved / t.seconds / 1e6:.0f}" if t.seconds > 0 else "-", f"{t.serialize_seconds:.2f}",
                     f"{work:.2f}" if work else "-"))
    return rows


FOREST_HEADERS = ["workload", "parameters", "accuracy (encrypted)", "accuracy (XGBoost)", "scores = integer twin",
                  "argmax = XGBoost", "HTTP round trip: first / next batch", "samples/s",
                  "MiB keys / request / response",
                  "noise budget left (bits)"]


def training_rows(t: TrainingOutcome) -> list[tuple]:
    last = len(t.accuracy)
    record = t.twin.records[last - 1]
    server = t.seconds.get("training job (server)", float("nan"))
    return [
        (f"encrypted HELR, decrypted after iteration {last}", f"{t.final_accuracy:.4f}", f"{t.final_auroc:.4f}",
         f"{server:.1f} s (job, {t.bootstraps} bootstrap{'' if t.bootstraps == 1 else 's'})"),
        (f"plaintext twin, iteration {last} (same schedule)", f"{record.test_accuracy:.4f}",
         f"{record.test_auroc:.4f}", f"{t.seconds['twin']:.2f} s (all {len(t.twin.records)} iterations)"),
        ("scikit-learn LogisticRegression", f"{t.baseline.report.accuracy:.4f}", f"{t.baseline.report.auroc:.4f}",
         f"{t.seconds['sklearn']:.2f} s"),
    ]


def _md_table(headers: list[str], rows: list[tuple]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _log2(x: float) -> str:
    return "-inf" if x <= 0 else f"2^{math.log2(x):.1f}"


def write_report(out_dir: Path, env: Environment, forests: list[ForestOutcome],
                 training: TrainingOutcome | None) -> Path:
    """report.md (+ PNGs beside it) and report.json in ``out_dir``; returns report.md's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    md = [f"# fhe-ml main job: report ({env.date})", "",
          f"Device: **{env.device}** ({env.device_name}); host {env.cpu}, {env.cores} cores, "
          f"{env.memory_gib:.0f} GiB; torch {env.torch}. Total wall time {env.wall_seconds / 60:.1f} min. "
          + ("Every parameter set is 128-bit secure (HE Standard table; sparse-secret bound for h = 192)."
             if env.secure else "**Tiny insecure parameters: a test run, not a demonstration of security.**"),
          "", *[f"> {note}" for note in env.notes], ""]
    md += ["## Encrypted predictions over HTTP (XGBoost on BFV)", "",
           "The clinic encrypts its samples, the server evaluates the lab's trees on ciphertexts, the clinic "
           "decrypts the class scores. Exact: the decrypted scores must equal the integer twin's.", "",
           _md_table(FOREST_HEADERS, forest_rows(forests)), ""]
    for o in forests:
        steps = ", ".join(f"{k} {v:.2f} s" for k, v in o.seconds.items())
        md += [f"**{o.name}** ({o.model}): {steps}.", "",
               f"![confusion matrix {o.name}]({o.confusion_png.name})", ""]
    if training is not None:
        md += _training_section(out_dir, training)
    md += ["## Bytes on the wire", "",
           "Per job and step, what the client's HTTP calls moved (request and response bodies) and the "
           "seconds inside them, the client's own serialization, and the server's work (what its "
           "Server-Timing header reports for a prediction: reading the batch, evaluating, writing the "
           "answer; started to finished for the training job). Fresh ciphertexts travel seeded, residues "
           "at their primes' widths, answers modulus-switched down (README: what travels).", "",
           _md_table(TRAFFIC_HEADERS, traffic_rows(forests, training)), ""]
    md += ["## Resources", "",
           f"Peak resident memory: client {env.peak_client_bytes / 2**30:.1f} GiB, server "
           f"{env.peak_server_bytes / 2**30:.1f} GiB, both together {env.peak_total_bytes / 2**30:.1f} GiB "
           "(sampled twice a second).", ""]
    path = out_dir / "report.md"
    path.write_text("\n".join(md))
    (out_dir / "report.json").write_text(json.dumps(_as_json(env, forests, training), indent=2))
    return path


def _training_section(out_dir: Path, t: TrainingOutcome) -> list[str]:
    plot = plot_run(t, out_dir / "helr-per-iteration.png")
    cfg, layout = t.config, t.config.layout
    worst = max(t.max_error) if t.max_error else float("nan")
    per_it = np.mean(t.iteration_seconds) if t.iteration_seconds else float("nan")
    lines = ["## Encrypted training over HTTP (HELR on CKKS with bootstrapping)", "",
             f"MNIST 3 vs 8 from {t.data_source}: {t.samples} training rows, batch {cfg.batch_size} "
             f"({cfg.ciphertexts_per_batch} ciphertexts of {layout.rows} rows x {layout.columns} columns), "
             f"{len(t.accuracy)} of {len(t.twin.records)} planned iterations, preset {cfg.bootstrapping}.", "",
             _md_table(["model", "test accuracy", "AUROC", "time"], training_rows(t)), "",
             f"Decrypted w and v against the twin's at every iteration: worst max |difference| {worst:.2e} "
             f"({_log2(worst)}; target 2^-10). Mean {per_it:.2f} s per iteration as the client saw it "
             "(bootstrapping included).", "",
             "Client steps: " + ", ".join(f"{k} {v:.1f} s" for k, v in t.seconds.items()) + ".", "",
             "Sizes: " + ", ".join(f"{k} {v / MiB:.1f} MiB" for k, v in t.bytes.items()) + ".", "",
             f"![HELR accuracy and AUROC per iteration]({plot.name})", ""]
    return lines


def _as_json(env: Environment, forests: list[ForestOutcome], t: TrainingOutcome | None) -> dict:
    data = {"environment": env.__dict__, "forests": [], "training": None}
    for o in forests:
        data["forests"].append({
            "name": o.name, "model": o.model, "preset": o.preset, "samples": o.n_samples, "correct": o.correct,
            "library_correct": o.library_correct, "exact": o.exact, "same_as_library": o.same_as_library,
            "scores": o.scores.tolist(), "predicted": o.predicted.tolist(), "seconds": o.seconds,
            "bytes": o.bytes, "budget_left": o.budget_left,
            "traffic": {step: t.__dict__ for step, t in o.traffic.items()}})
    if t is not None:
        data["training"] = {
            "config": json.loads(t.config.to_json()), "samples": t.samples, "iterations": len(t.accuracy),
            "accuracy": t.accuracy, "auroc": t.auroc, "max_error": t.max_error,
            "decrypted_w": [w for w, _ in t.decrypted], "decrypted_v": [v for _, v in t.decrypted],
            "twin_accuracy": [r.test_accuracy for r in t.twin.records],
            "twin_auroc": [r.test_auroc for r in t.twin.records],
            "final_accuracy": t.final_accuracy, "final_auroc": t.final_auroc,
            "sklearn_accuracy": t.baseline.report.accuracy, "sklearn_auroc": t.baseline.report.auroc,
            "bootstraps": t.bootstraps, "seconds": t.seconds, "bytes": t.bytes,
            "traffic": {step: x.__dict__ for step, x in t.traffic.items()}, "server_seconds": t.server_seconds,
            "iteration_seconds": t.iteration_seconds}
    return data
