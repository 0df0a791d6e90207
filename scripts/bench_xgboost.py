"""Encrypted XGBoost inference benchmark: the iDASH 2020 workload (99 and 258 samples) and SRBCT.

For each workload: the server's latency (``ForestEvaluator.evaluate`` on one batch, wall clock,
synchronised; median and best of ``--repeats`` runs after a warm-up run that builds the tables;
"CPU s" is the process CPU time of one run, all threads, which a shared machine inflates less
than the wall clock), the throughput in samples per second (from the median), the ciphertext
operations per batch, the input level and the noise budget left (measured by the client against
the plan's conservative estimate), the client's key/encryption/decryption times and the bytes on
the wire. Every run checks that the decrypted scores equal the integer twin's exactly. Reference
(iDASH, 258 samples, Özcan et al.
Table/section V-D): SEAL 25.62 s on one thread, 3.4 s on 16 threads, 0.596 s on an RTX 3060 Ti.

    python scripts/bench_xgboost.py --device cuda --markdown xgb.md --json xgb.jsonl
    python scripts/bench_xgboost.py --device cpu --threads 2
    python scripts/bench_xgboost.py --device cpu --only idash-258 --preset BFVN13QP218L3D4T20

SRBCT needs xgboost (to train); without it that row is skipped with a note.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from apps.table import format_table  # noqa: E402
from apps.xgboost.encrypted import idash_job, run_job, srbct_job  # noqa: E402

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
WORKLOADS = ("idash-99", "idash-258", "srbct")
REFERENCES = [("SEAL, 1 thread (Özcan et al.)", 25.62), ("SEAL, 16 threads", 3.4), ("RTX 3060 Ti, N=2^13", 0.596),
              ("target (GPU)", 0.05), ("goal (GPU)", 0.005)]


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"


def make_job(name: str, args: argparse.Namespace):
    if name.startswith("idash"):
        return idash_job(args.idash, int(name.split("-")[1]))
    try:
        import xgboost  # noqa: F401
    except ImportError:
        return None
    return srbct_job(args.islp, rounds=50, depth=2)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument("--preset", default="BFVN13QP218L3D4T20")
    parser.add_argument("--repeats", type=int, default=5, help="timed server runs after a warm-up")
    parser.add_argument("--only", nargs="*", choices=WORKLOADS, help="a subset of the workloads")
    parser.add_argument("--per-group", action="store_true",
                        help="evaluate group by group through the evaluator (not the stacked tree stage)")
    parser.add_argument("--idash", type=Path, default=SHARED / "idash2020_sabanci_xgb")
    parser.add_argument("--islp", type=Path, default=SHARED / "srbct_khan2001")
    parser.add_argument("--markdown", type=Path, help="append the table to this file")
    parser.add_argument("--json", type=Path, help="append one JSON line per workload")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    device = device_name(args.device)
    rows, records = [], []
    for name in args.only or WORKLOADS:
        job = make_job(name, args)
        if job is None:
            print(f"skipped {name}: xgboost is not installed", file=sys.stderr)
            continue
        run = run_job(job, args.preset, device=args.device, repeats=args.repeats + 1, stacked=not args.per_group)
        if not run.exact:
            print(f"error: {name}: the decrypted scores differ from the integer twin's", file=sys.stderr)
            return 1
        ops = run.plan.ops
        rows.append((name, job.n_samples, args.device, f"{run.seconds['evaluate'] * 1e3:.1f}",
                     f"{run.seconds['evaluate best'] * 1e3:.1f}", f"{run.seconds['evaluate cpu']:.2f}",
                     f"{run.throughput:.1f}", ops.get("multiply", 0), ops.get("multiply_plain", 0),
                     ops.get("rotate", 0), run.plan.n_inputs, run.plan.level,
                     f"{run.budget_left:.1f} / {run.plan.answer_budget:.1f}", f"{run.correct}/{job.n_samples}",
                     f"{run.seconds['encrypt']:.2f}", f"{run.bytes['upload'] / 2**20:.0f}"))
        records.append({"workload": name, "samples": job.n_samples, "device": device, "preset": args.preset,
                        "path": "per-group" if args.per_group else "stacked",
                        "date": stamp, "seconds": run.seconds, "bytes": run.bytes, "ops": ops,
                        "level": run.plan.level, "inputs": run.plan.n_inputs, "groups": run.plan.n_groups,
                        "budget_left": run.budget_left, "budget_planned": run.plan.answer_budget,
                        "correct": run.correct, "exact": run.exact})
    headers = ["workload", "samples", "device", "server ms", "best ms", "CPU s", "samples/s", "ct x ct", "ct x pt",
               "rotations", "input cts", "level", "budget left (meas./plan)", "correct", "client encrypt s",
               "upload MiB"]
    table = format_table(headers, rows)
    print(f"\nEncrypted XGBoost, {args.preset}, {device}, {stamp}\n{table}")
    print("\nreference, iDASH 258 samples: " + ", ".join(f"{k} {v:g} s" for k, v in REFERENCES))
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(f"\n### Encrypted XGBoost, {args.preset}, {device}, {stamp}\n\n")
            f.write("| " + " | ".join(headers) + " |\n|" + "---|" * len(headers) + "\n")
            for row in rows:
                f.write("| " + " | ".join(str(v) for v in row) + " |\n")
    if args.json:
        with open(args.json, "a") as f:
            for record in records:
                f.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
