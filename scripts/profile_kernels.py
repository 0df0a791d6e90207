"""Kernel time against wall time, by torch.profiler (CUPTI kernel records): where a bootstrap's and a
HELR iteration's device time goes, and how much of their wall time is host.

``--boot``: a 128-bit N16_H192_FULL bootstrap, its phases profiled one by one eagerly (ModRaise
skipped: a few kernels) with their top kernels, then the whole call eager and graphed.
``--helr``: full-MNIST HELR steps after six warm-up steps (every graph captured): per step the
kernel count, the summed kernel time, the first-to-last kernel span and the wall time.
Prints a table; ``--json`` appends one line per measurement (device, date, commit).

    python scripts/profile_kernels.py --boot --helr --mnist ../shared/data/mnist --json prof.jsonl
"""
from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from apps.logreg.client import HELRClient  # noqa: E402
from apps.logreg.config import HELRConfig  # noqa: E402
from apps.logreg.trainer import EncryptedHELRTrainer  # noqa: E402
from apps.logreg.twin import design_matrix  # noqa: E402
from data.helr import helr_dataset  # noqa: E402
from data.mnist import load_mnist  # noqa: E402
from fhe_core import ckks, rlwe  # noqa: E402
from fhe_core.ckks.bootstrapping import N16_H192_FULL, Bootstrapper, gen_bootstrapping_keys  # noqa: E402

ACTIVITIES = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]


def profiled(fn, top: int = 0) -> tuple[object, dict]:
    """fn() under the profiler, synchronised: (its result, {kernels, kernel_ms, span_ms, wall_ms, top})."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=ACTIVITIES) as prof:
        start = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        wall = time.perf_counter() - start
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    by_name: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for e in kernels:
        by_name[e.name][0] += 1
        by_name[e.name][1] += e.device_time
    span = max(e.time_range.end for e in kernels) - min(e.time_range.start for e in kernels) if kernels else 0
    tops = sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]
    return out, {"kernels": len(kernels), "kernel_ms": sum(e.device_time for e in kernels) / 1e3,
                 "span_ms": span / 1e3, "wall_ms": wall * 1e3,
                 "top": [{"kernel": name[:120], "count": n, "ms": t / 1e3} for name, (n, t) in tops]}


def boot_rows() -> list[dict]:
    bp = N16_H192_FULL
    params = bp.params(device="cuda")
    sk = rlwe.gen_secret_key(ckks.rlwe_context(params))
    boot = Bootstrapper(params, bp, gen_bootstrapping_keys(params, bp, sk))
    z = np.random.default_rng(1).uniform(-1, 1, bp.slots)
    ct = ckks.Encryptor(params, sk).encrypt(ckks.Encoder(params).encode(z, level=boot.min_input_level, slots=bp.slots))
    for _ in range(2):  # lazily built transforms and constants
        boot.bootstrap(ct)
    raised = boot.sub_sum(boot.mod_raise(boot.check_input(ct)))
    rows = []
    parts, row = profiled(lambda: boot.coeffs_to_slots(raised), top=8)
    rows.append({"phase": "CoeffsToSlots (eager)", **row})
    modded, row = profiled(lambda: boot.eval_mod(parts, ct.scale), top=12)
    rows.append({"phase": "EvalMod (eager)", **row})
    rows.append({"phase": "SlotsToCoeffs (eager)", **profiled(lambda: boot.slots_to_coeffs(modded), top=6)[1]})
    rows.append({"phase": "bootstrap (eager)", **profiled(lambda: boot.bootstrap(ct))[1]})
    graphed = boot.graphed()
    graphed.bootstrap(ct)  # captured
    rows.append({"phase": "bootstrap (graphed)", **profiled(lambda: graphed.bootstrap(ct))[1]})
    return [{"bench": "bootstrap_profile", "preset": "N16_H192_FULL", **r} for r in rows]


def helr_rows(mnist: Path | None, steps: int = 4) -> list[dict]:
    config = HELRConfig.secure(iterations=6 + steps)
    data = helr_dataset(load_mnist(mnist))
    x, y = design_matrix(data.x_train, data.levels), data.y_train
    schedule = config.schedule(len(x))
    client = HELRClient(config, device="cuda")
    trainer = EncryptedHELRTrainer(config, client.eval_keys(), client.encrypt_dataset(x, y, schedule), schedule)
    trainer.run(6)
    rows = []
    for _ in range(steps):
        bootstraps = trainer.bootstraps
        _, row = profiled(trainer.step)
        kind = "bootstrap of w + i v, then the iteration" if trainer.bootstraps > bootstraps else "iteration"
        rows.append({"bench": "helr_step_profile", "preset": config.bootstrapping, "iteration": trainer.iteration,
                     "step": kind, **row})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boot", action="store_true", help="profile a bootstrap by phase")
    parser.add_argument("--helr", action="store_true", help="profile HELR steps (full MNIST)")
    parser.add_argument("--mnist", type=Path, help="MNIST directory (default: the package's copy)")
    parser.add_argument("--json", type=Path, help="append the JSON lines here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("profile_kernels.py needs a CUDA device")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    common = {"date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(),
              "torch": torch.__version__, "commit": commit or None}
    rows = (boot_rows() if args.boot else []) + (helr_rows(args.mnist) if args.helr else [])
    for r in rows:
        label = r.get("phase") or f"step {r['iteration']}: {r['step']}"
        print(f"{label}: {r['kernels']} kernels, kernel time {r['kernel_ms']:.2f} ms, span {r['span_ms']:.2f} ms, "
              f"wall {r['wall_ms']:.2f} ms (profiled)")
        for t in r["top"]:
            print(f"    {t['ms']:7.2f} ms {t['count']:5d} x {1e3 * t['ms'] / t['count']:7.1f} us  {t['kernel']}")
    if args.json:
        with open(args.json, "a") as f:
            f.writelines(json.dumps({**common, **r}) + "\n" for r in rows)


if __name__ == "__main__":
    main()
