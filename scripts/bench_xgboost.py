"""Encrypted XGBoost inference benchmark: the iDASH 2020 workload (99 and 258 samples) and SRBCT in
both encodings (``srbct-private``: the model-private one, the client learns only the grid and the
public bounds; ``srbct``: the thermometer of the lab's cuts).

For each workload: the server's latency (the evaluator's ``evaluate`` on one batch, flooding and
the switch to level 0 included, wall clock, synchronised; median and best of ``--repeats`` runs
after a warm-up run that builds the tables; "CPU s" is the process CPU time of one run, all
threads, which a shared machine inflates less than the wall clock), the throughput in samples per
second (from the median), the ciphertext operations per batch, the input level, the plan's
estimated budget before flooding and the answers' measured budget (the flooding level), the
client's encryption time and the bytes on the wire (bit-packed ciphertexts). Every run checks that
the decrypted scores equal the integer twin's exactly. The preset is the smallest 128-bit one that
evaluates and floods the workload, unless ``--preset`` says otherwise. References (iDASH, 258
samples, Özcan et al. Table/section V-D): SEAL 25.62 s on one thread, 3.4 s on 16 threads, 0.596 s
on an RTX 3060 Ti.

    python scripts/bench_xgboost.py --device cuda --markdown xgb.md --json xgb.jsonl
    python scripts/bench_xgboost.py --device cpu --threads 2 --only srbct-private srbct
    python scripts/bench_xgboost.py --device cpu --only idash-258 --preset BFVN13QP218L3D4T20
    python scripts/bench_xgboost.py --device cuda --graphed    # batches replayed from a CUDA graph

SRBCT needs xgboost (to train); without it those rows are skipped with a note.
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
WORKLOADS = ("idash-99", "idash-258", "srbct-private", "srbct")
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
    encoding = "private" if name == "srbct-private" else "thermometer"
    return srbct_job(args.islp, rounds=50, depth=2, encoding=encoding)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument("--preset", help="BFV preset (default: the smallest 128-bit one that floods the workload)")
    parser.add_argument("--repeats", type=int, default=5, help="timed server runs after a warm-up")
    parser.add_argument("--only", nargs="*", choices=WORKLOADS, help="a subset of the workloads")
    parser.add_argument("--per-group", action="store_true",
                        help="evaluate group by group through the evaluator (not the stacked tree stage)")
    parser.add_argument("--graphed", action="store_true",
                        help="replay each batch from a CUDA graph (graphed=True: about the device time)")
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
        run = run_job(job, args.preset, device=args.device, repeats=args.repeats + 1, stacked=not args.per_group,
                      graphed=args.graphed)
        ops = run.plan.ops
        if not run.exact:
            print(f"error: {name}: the decrypted scores differ from the integer twin's", file=sys.stderr)
            return 1
        rows.append((name, job.n_samples, run.preset, f"{run.seconds['evaluate'] * 1e3:.1f}",
                     f"{run.seconds['evaluate best'] * 1e3:.1f}", f"{run.seconds['evaluate cpu']:.2f}",
                     f"{run.throughput:.1f}", ops.get("multiply", 0) + ops.get("multiply_relin", 0),
                     ops.get("multiply_plain", 0),
                     ops.get("rotate", 0), run.plan.n_inputs, run.plan.level,
                     f"{run.plan.budget_left:.0f} / {run.budget_left:.1f} / {run.plan.answer_budget:.1f}",
                     f"{run.correct}/{job.n_samples}",
                     f"{run.seconds['encrypt']:.2f}", f"{run.bytes['upload'] / 2**20:.1f}",
                     f"{run.bytes['download'] / 2**20:.2f}"))
        records.append({"workload": name, "samples": job.n_samples, "device": device, "preset": run.preset,
                        "encoding": job.encoding,
                        "path": ("per-group" if args.per_group else "stacked") + (", graphed" if args.graphed else ""),
                        "date": stamp, "seconds": run.seconds, "bytes": run.bytes, "ops": ops,
                        "level": run.plan.level, "answer_level": run.plan.answer_level, "inputs": run.plan.n_inputs,
                        "budget_before_flooding": run.plan.budget_left, "budget_left": run.budget_left,
                        "budget_planned": run.plan.answer_budget,
                        "correct": run.correct, "exact": run.exact})
    headers = ["workload", "samples", "preset", "server ms", "best ms", "CPU s", "samples/s", "ct x ct", "ct x pt",
               "rotations", "input cts", "level", "budget: plan before flooding / answers (meas./plan)", "correct",
               "client encrypt s", "request MiB", "answer MiB"]
    table = format_table(headers, rows)
    print(f"\nEncrypted XGBoost on {args.device}, {device}, {stamp}\n{table}")
    print("\nreference, iDASH 258 samples: " + ", ".join(f"{k} {v:g} s" for k, v in REFERENCES))
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(f"\n### Encrypted XGBoost, {device}, {stamp}\n\n")
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
