"""Bytes on the wire of the encrypted predictions, by format, and the cost of writing and reading them.

For the SRBCT thermometer model (20 test profiles) and iDASH (258 samples) at the 128-bit
BFVN13QP218L3D4T20 preset: the request (the client's ciphertexts) as 64-bit words, packed at the
primes' widths, seeded (c_1 as its 32-byte seed), and both (the default); the answer at the input
level (as it was sent before modulus switching) and at the plan's answer level; zstandard (level 3)
on the default format when the package is installed (it is not a dependency: the measurement is
why); and the seconds ``dumps_many`` / ``loads_many`` take for the request on this device.

    python scripts/bench_wire.py --json docs/results/wire.jsonl
    python scripts/bench_wire.py --device cuda --only srbct
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from apps.table import format_table  # noqa: E402
from apps.xgboost.client import ForestClient  # noqa: E402
from apps.xgboost.encrypted import idash_job, srbct_job  # noqa: E402
from apps.xgboost.plan import ForestPlan, PublicModel, named_params  # noqa: E402
from apps.xgboost.server import ForestEvaluator  # noqa: E402
from fhe_core import serialize  # noqa: E402
from fhe_core.rlwe import Ciphertext  # noqa: E402

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
PRESET = "BFVN13QP218L3D4T20"
MiB = 2.0**20


def _best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _zstd_ratio(blob: bytes) -> tuple[float, float] | None:
    try:
        import zstandard
    except ImportError:
        return None
    start = time.perf_counter()
    size = len(zstandard.ZstdCompressor(level=3).compress(blob))
    return size / len(blob), time.perf_counter() - start


def measure(name: str, job, device: str, repeats: int) -> dict:
    params = named_params(PRESET, device=device)
    plan = ForestPlan.build(job.model, params, width=job.n_samples)
    client = ForestClient(PublicModel.from_json(plan.public_model(PRESET).to_json()), device=device)
    cts = client.encrypt(job.samples)
    request = {f"{'seeded' if c else 'whole'} {'packed' if p else 'words'}": len(serialize.dumps_many(
        cts, compress=c, packed=p)) for c in (False, True) for p in (False, True)}
    blob = serialize.dumps_many(cts, packed=True)   # what ServiceClient.predict sends
    write = _best(lambda: serialize.dumps_many(cts, packed=True), repeats)
    read = _best(lambda: serialize.loads_many(blob, params, expect=Ciphertext, max_count=4096), repeats)
    results = ForestEvaluator(params, client.eval_keys(), job.model, plan=plan).evaluate(
        serialize.loads_many(blob, params, expect=Ciphertext, max_count=4096))
    answer = len(serialize.dumps_many(results, packed=True))
    before = len(results) * len(serialize.dumps(cts[0], compress=False, packed=False))  # level plan.level, words
    zstd = _zstd_ratio(blob)
    return {"workload": name, "samples": job.n_samples, "ciphertexts": len(cts), "preset": PRESET,
            "input_level": plan.level, "answer_level": plan.answer_level, "request_bytes": request,
            "answer_bytes": {"input level, words": before, "answer level, packed": answer},
            "zstd3_ratio_of_default": None if zstd is None else zstd[0],
            "zstd3_seconds": None if zstd is None else zstd[1],
            "dumps_seconds": write, "loads_seconds": read, "device": device,
            "device_name": torch.cuda.get_device_name() if device.startswith("cuda") else
            f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=("srbct", "idash-258"))
    parser.add_argument("--islp", type=Path, default=SHARED / "srbct_khan2001")
    parser.add_argument("--idash", type=Path, default=SHARED / "idash2020_sabanci_xgb")
    parser.add_argument("--json", type=Path, help="append one JSON line per workload")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    jobs = {"srbct": lambda: srbct_job(args.islp, rounds=50, depth=2), "idash-258": lambda: idash_job(args.idash, 258)}
    rows = []
    for name, make in jobs.items():
        if args.only and name != args.only:
            continue
        m = measure(name, make(), args.device, args.repeats)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(m) + "\n")
        r, a = m["request_bytes"], m["answer_bytes"]
        rows.append((name, m["ciphertexts"], *(f"{r[k] / MiB:.1f}" for k in ("whole words", "whole packed",
                                                                           "seeded words", "seeded packed")),
                     f"{m['dumps_seconds']:.2f} / {m['loads_seconds']:.2f}",
                     "-" if m["zstd3_ratio_of_default"] is None else f"{m['zstd3_ratio_of_default']:.4f}",
                     f"{a['input level, words'] / MiB:.2f} (level {m['input_level']}) -> "
                     f"{a['answer level, packed'] / MiB:.2f} (level {m['answer_level']})"))
    print(format_table(["workload", "cts", "MiB words", "packed", "seeded", "seeded+packed (default)",
                        "dumps / loads s", "zstd-3 ratio", "answer MiB"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
