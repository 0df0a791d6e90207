"""BFV benchmarks (issue 5): add, multiply, relinearize, multiply+relinearize, rotate, and the
plaintext product at SEAL's 128-bit default sets N = 2^13, 2^14, 2^15 (t = 65537), side by side
with the GPU timings of "Homomorphic Encryption on GPU" (RTX 3060 Ti, BFV of SEAL).

One environment per parameter set (keys and inputs made once), warm-up calls, then the median of
``--repeat`` timed calls: CUDA events around each eager call on the GPU, wall clock on the CPU
(torch's intra-op threads as set by ``--threads``). Output: a markdown table on stdout and, with
``--json``, one JSON line per measurement ``{name, device, us_median, us_p90, budget_bits}``.

    python scripts/bench_bfv.py --device cuda --json bench-out/bfv.jsonl
    python scripts/bench_bfv.py --device cpu --sets BFVN13QP218L3D4T17 --repeat 5
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fhe_core import bfv, rlwe  # noqa: E402
from fhe_core.params import preset  # noqa: E402

SETS = ["BFVN13QP218L3D4T17", "BFVN14QP438L7D8T17", "BFVN15QP881L14D15T17"]
# The paper's RTX 3060 Ti timings in microseconds, by log N (its table covers 2^12..2^15).
PAPER_US = {
    "multiply": {13: 202, 14: 768, 15: 3757},
    "relinearize": {13: 88.5, 14: 377, 15: 3150},
    "rotate_rows": {13: 103, 14: 459, 15: 3464},
}


def _timer(device: torch.device):
    if device.type == "cuda":
        def run(fn) -> float:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            return start.elapsed_time(stop) * 1e3
    else:
        def run(fn) -> float:
            begin = time.perf_counter()
            fn()
            return (time.perf_counter() - begin) * 1e6
    return run


def _environment(name: str, device: str):
    ctx = bfv.BFVContext(preset(name, device=device, allow_insecure=name.endswith("Insecure")))  # tiny: tests
    sk = rlwe.gen_secret_key(ctx.rlwe)
    keys = rlwe.gen_eval_keys(ctx.rlwe, sk, bfv.galois_elements(ctx.n, [1]))
    encoder, encryptor = bfv.BatchEncoder(ctx), bfv.Encryptor(ctx, rlwe.gen_public_key(ctx.rlwe, sk))
    rng = np.random.default_rng()
    a, b = (encoder.encode(rng.integers(0, ctx.t, ctx.n)) for _ in range(2))
    return ctx, bfv.Evaluator(ctx, keys), bfv.Decryptor(ctx, sk), encryptor.encrypt(a), encryptor.encrypt(b), b


def bench_set(name: str, device: str, repeat: int, warmup: int) -> list[dict]:
    ctx, ev, dec, ca, cb, pb = _environment(name, device)
    product = ev.multiply(ca, cb)
    cases = {
        "add": lambda: ev.add(ca, cb),
        "multiply_plain": lambda: ev.multiply_plain(ca, pb),
        "multiply": lambda: ev.multiply(ca, cb),
        "relinearize": lambda: ev.relinearize(product),
        "multiply_relin": lambda: ev.multiply_relin(ca, cb),
        "rotate_rows": lambda: ev.rotate_rows(ca, 1),
        "mod_switch_to_next": lambda: ev.mod_switch_to_next(ca),
    }
    budgets = {"multiply_relin": dec.invariant_noise_budget(ev.multiply_relin(ca, cb)),
               "add": dec.invariant_noise_budget(ev.add(ca, cb))}
    timer, rows = _timer(ctx.device), []
    for op, fn in cases.items():
        for _ in range(warmup):
            fn()
        times = sorted(timer(fn) for _ in range(repeat))
        rows.append({"name": f"bfv/logN={ctx.params.log_n}/{op}", "set": name, "op": op, "log_n": ctx.params.log_n,
                     "device": torch.cuda.get_device_name(ctx.device) if ctx.device.type == "cuda" else "cpu",
                     "us_median": statistics.median(times), "us_p90": times[min(len(times) - 1, int(0.9 * len(times)))],
                     "budget_bits": budgets.get(op)})
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["| set | op | median (us) | p90 (us) | paper RTX 3060 Ti (us) |", "| --- | --- | ---: | ---: | ---: |"]
    for r in rows:
        paper = PAPER_US.get(r["op"], {}).get(r["log_n"], "")
        lines.append(f"| {r['set']} | {r['op']} | {r['us_median']:.1f} | {r['us_p90']:.1f} | {paper} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sets", nargs="*", default=SETS)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    parser.add_argument("--json", help="append JSON lines here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = [row for name in args.sets for row in bench_set(name, args.device, args.repeat, args.warmup)]
    print(markdown(rows))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
