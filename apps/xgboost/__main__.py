"""`python -m apps.xgboost predict --workload idash|srbct [options]`: encrypted tree inference.

Plays the client (keys, encryption, decryption) and the server (evaluation, no secret key)
in one process, everything the server receives going through the serialized format, and
prints accuracy, agreement with the plaintext twin and XGBoost, latency, throughput, sizes,
and the noise budget left.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from data.errors import DataError

from ..table import format_table
from .encrypted import idash_job, plot_confusion, run_job, srbct_job
from .twin import predicted_classes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m apps.xgboost", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("predict", help="encrypted inference on a workload")
    p.add_argument("--workload", choices=("idash", "srbct"), required=True)
    p.add_argument("--idash", type=Path, help="directory of the iDASH 2020 workload files")
    p.add_argument("--islp", type=Path, help="directory with Khan_*.csv[.gz] (default: installed islp)")
    p.add_argument("--samples", type=int, default=99, help="iDASH samples (more than 99 repeat them)")
    p.add_argument("--rounds", type=int, default=50, help="SRBCT boosting rounds")
    p.add_argument("--depth", type=int, default=2, help="SRBCT tree depth")
    p.add_argument("--preset", default="BFVN13QP218L3D4T20", help="BFV preset (128-bit by default)")
    p.add_argument("--allow-insecure", action="store_true", help="accept a tiny insecure preset (tests only)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--repeats", type=int, default=3,
                   help="server evaluations; the median of those after the first (which builds tables)")
    p.add_argument("--plot", type=Path, help="write the confusion matrix to this PNG")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    return parser


def predict(args: argparse.Namespace) -> None:
    if args.workload == "idash":
        if args.idash is None:
            raise DataError("give the workload directory with --idash DIR (e.g. ../shared/data/idash2020_sabanci_xgb)")
        job = idash_job(args.idash, args.samples)
    else:
        job = srbct_job(args.islp, args.rounds, args.depth)
    run = run_job(job, args.preset, device=args.device, repeats=args.repeats, progress=not args.no_progress,
                  allow_insecure=args.allow_insecure)
    plan, n = run.plan, job.n_samples
    print(f"\n{job.name}: {args.preset} on {args.device}, input level {plan.level}, "
          f"{plan.n_inputs} ciphertexts per batch of {plan.layout.width}, tree groups: {plan.n_groups}")
    rows = [("accuracy (encrypted)", f"{run.correct}/{n}"),
            ("scores equal the integer twin", "yes" if run.exact else "NO"),
            ("argmax equals xgboost" if run.same_as_library is not None else "argmax equals the twin",
             f"{run.same_as_library}/{n}" if run.same_as_library is not None
             else f"{int((run.predicted == predicted_classes(job.twin_scores)).sum())}/{n}"),
            ("server latency (median, warm)", f"{run.seconds['evaluate'] * 1e3:.1f} ms"),
            ("throughput", f"{run.throughput:.1f} samples/s"),
            ("client: keys / encrypt / decrypt", " / ".join(f"{run.seconds[k]:.2f} s" for k in ("keys", "encrypt",
                                                                                           "decrypt"))),
            ("bytes: keys / upload / download", " / ".join(f"{run.bytes[k] / 2**20:.1f} MiB" for k in ("keys", "upload",
                                                                                                  "download"))),
            ("noise budget left (measured / planned)", f"{run.budget_left:.1f} / {plan.answer_budget:.1f} bits"),
            ("ops per batch", ", ".join(f"{k} {v}" for k, v in sorted(plan.ops.items())))]
    print(format_table(["", "value"], rows))
    if args.plot:
        print(f"plot: {plot_confusion(run, args.plot)}")
    if not run.exact:
        raise SystemExit("error: the decrypted scores differ from the twin's")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        predict(args)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
