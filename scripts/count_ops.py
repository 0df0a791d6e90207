"""Host cost of the BFV operations and of the forest evaluations: ops issued per call, CPU wall time per call.

Every op that reaches torch's dispatcher from Python is counted (a ``TorchDispatchMode``: what an eager call
launches, one entry per kernel or view, nothing inside an op), in four kinds:

    extension   the extension's ops (``fhe_core::*``): the arithmetic, one or a few kernels each
    aten        aten's compute ops (allocations, copies, elementwise, stack/cat: a kernel each on a GPU)
    views       aten's metadata ops (view, slice, select, expand, ...): no kernel, host time only
    syncs       ops that make the host wait for the device (``.item()``, ``bool(tensor)``, nonzero, equal, a copy
                to the host)
    host data   tensors made from host data (``torch.tensor(...)``, a copy from the host: on a GPU a host-to-device
                copy, which waits for the stream; on the CPU only ``torch.tensor`` shows)

On a GPU an eager call costs roughly (extension + aten + views) times a few microseconds of host time, plus a
full wait for the device per sync; this is what the host-overhead work of issue 29 (item 4) counts down.
Wall time: the median of ``--repeats`` calls on this machine's device (``--device``).

    python scripts/count_ops.py                      # BFV ops at N = 2^13 on the CPU
    python scripts/count_ops.py --forest --json out.jsonl
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

SYNC_OPS = {"aten::_local_scalar_dense", "aten::nonzero", "aten::is_nonzero", "aten::equal", "aten::item",
            "aten::allclose", "aten::unique", "aten::masked_select"}
HOST_DATA_OPS = {"aten::lift_fresh", "aten::lift_fresh_copy"}
COPY_OPS = {"aten::_to_copy", "aten::copy_"}
KINDS = ("extension", "aten", "views", "syncs", "host data")


class OpCounter(TorchDispatchMode):
    """Counts the ops dispatched while active, by name, and keeps each name's kind."""

    def __init__(self):
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.kinds: dict[str, str] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.name()
        kind = op_kind(func, args, kwargs)
        if kind != "aten" and name in COPY_OPS:  # a copy across devices counts apart from the same op on one
            name = f"{name} ({kind})"
        self.ops[name] += 1
        self.kinds[name] = kind
        return func(*args, **kwargs)


def op_kind(func, args, kwargs) -> str:
    """The kind of one dispatched op (module docstring): by namespace, by name, a copy by its devices (host to
    device: host data; device to host: a sync), else a view when its schema returns an alias of an input."""
    name = func.name()
    if name.startswith("fhe_core::"):
        return "extension"
    if name in SYNC_OPS:
        return "syncs"
    if name in HOST_DATA_OPS:
        return "host data"
    if name in COPY_OPS:
        devices = [a.device.type for a in args if isinstance(a, torch.Tensor)]
        if name == "aten::_to_copy":
            devices.append(torch.device(kwargs.get("device") or devices[0]).type)
        else:  # copy_(self = destination, src)
            devices.reverse()
        if devices[0] == "cpu" and devices[-1] != "cpu":
            return "host data"
        if devices[0] != "cpu" and devices[-1] == "cpu":
            return "syncs"
    returns = func._schema.returns
    return "views" if returns and returns[0].alias_info is not None and not returns[0].alias_info.is_write else "aten"


def count(fn) -> OpCounter:
    """The ops one call of ``fn()`` dispatches (``.ops`` by name, ``.kinds``), in the steady state (after a first
    call: lazily built tables and kept operands exist)."""
    fn()
    with OpCounter() as counter:
        fn()
    return counter


def by_kind(counter: OpCounter) -> dict[str, int]:
    totals = dict.fromkeys(KINDS, 0)
    for name, n in counter.ops.items():
        totals[counter.kinds[name]] += n
    return totals


def wall_time(fn, device: str, repeats: int) -> float:
    """Median seconds per call (synchronised on CUDA), after two warm-up calls."""
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    for _ in range(2):
        fn()
    samples = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def bfv_cases(preset: str, device: str):
    """(name, fn) of the BFV evaluator's operations at ``preset``'s top level (bench.py's BFV rows, plus the
    plaintext ones and hoisted rotations)."""
    from fhe_core import bfv, rlwe
    from fhe_core.params import Params, preset_literal

    ctx = bfv.BFVContext(Params.from_literal(preset_literal(preset), device=device,
                                            allow_insecure=preset.endswith("Insecure")))
    sk = rlwe.gen_secret_key(ctx.rlwe)
    keys = rlwe.gen_eval_keys(ctx.rlwe, sk, bfv.galois_elements(ctx.n, [1, 2], column_swap=True))
    encoder, encryptor = bfv.BatchEncoder(ctx), bfv.Encryptor(ctx, sk)
    rng = np.random.default_rng(2)
    pa, pb = (encoder.encode(rng.integers(0, ctx.t, ctx.n)) for _ in range(2))
    ev, a, b = bfv.Evaluator(ctx, keys), encryptor.encrypt(pa), encryptor.encrypt(pb)
    product = ev.multiply(a, b)
    ev.mod_switch_to_next(a)  # (tables built before counting)
    return [
        ("add", lambda: ev.add(a, b)),
        ("sub", lambda: ev.sub(a, b)),
        ("negate", lambda: ev.negate(a)),
        ("add_plain", lambda: ev.add_plain(a, pb)),
        ("multiply_plain", lambda: ev.multiply_plain(a, pb)),
        ("multiply_scalar", lambda: ev.multiply_scalar(a, 3)),
        ("multiply", lambda: ev.multiply(a, b)),
        ("relinearize", lambda: ev.relinearize(product)),
        ("multiply_relin", lambda: ev.multiply_relin(a, b)),
        ("rotate_rows", lambda: ev.rotate_rows(a, 1)),
        ("rotate_rows_hoisted [1, 2]", lambda: ev.rotate_rows_hoisted(a, [1, 2])),
        ("swap_columns", lambda: ev.swap_columns(a)),
        ("mod_switch_to_next", lambda: ev.mod_switch_to_next(a)),
    ]


def forest_cases(device: str, data: Path):
    """(name, fn) of one server evaluation (one batch, flooding included) of the iDASH workload (99 samples) and
    of SRBCT in both encodings (needs xgboost; skipped without it), at their smallest 128-bit preset."""
    from apps.xgboost.client import ForestClient
    from apps.xgboost.encrypted import build_plan, evaluator_for, idash_job, public_part, smallest_preset, srbct_job
    from apps.xgboost.plan import named_params

    jobs = [("iDASH 99", lambda: idash_job(data / "idash2020_sabanci_xgb", 99))]
    try:
        import xgboost  # noqa: F401
        jobs += [(f"SRBCT {enc}", lambda enc=enc: srbct_job(data / "srbct_khan2001", rounds=50, depth=2,
                                                            encoding=enc))
                 for enc in ("private", "thermometer")]
    except ImportError:
        print("xgboost not installed: SRBCT skipped", file=sys.stderr)
    cases = []
    for name, make in jobs:
        job = make()
        preset = smallest_preset(job)
        params = named_params(preset, device=device)
        plan = build_plan(job.model, params, None, job.n_samples)
        client = ForestClient(public_part(plan, preset), device=device)
        server = evaluator_for(plan, params, client.eval_keys(), client.public_key, job.model)
        cts = client.encrypt(job.samples)
        server.evaluate(cts)  # (tables and plaintexts built before counting)
        cases.append((f"forest {name} ({preset})", lambda server=server, cts=cts: server.evaluate(cts)))
    return cases


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--preset", default="BFVN13QP218L3D4T17", help="the BFV ops' preset (bench.py's N = 2^13)")
    parser.add_argument("--repeats", type=int, default=51, help="timed calls per BFV op (forests: a tenth)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--forest", action="store_true", help="also the forest evaluations (iDASH, SRBCT)")
    parser.add_argument("--no-ops", action="store_true", help="only the forest evaluations")
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared" / "data")
    parser.add_argument("--label", default="", help="a label for the JSON lines (e.g. before / after)")
    parser.add_argument("--json", type=Path, help="append one JSON line per case")
    parser.add_argument("--verbose", action="store_true", help="print every op name with its count")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cases = [] if args.no_ops else [(f"bfv {name}", fn, args.repeats) for name, fn in bfv_cases(args.preset,
                                                                                                  args.device)]
    if args.forest:
        cases += [(name, fn, max(3, args.repeats // 10)) for name, fn in forest_cases(args.device, args.data)]
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    machine = f"{platform.processor() or platform.machine()}, {args.threads} thread(s)" \
        if args.device == "cpu" else torch.cuda.get_device_name()
    print(f"| case | {' | '.join(KINDS)} | wall time (us) |")
    print("| --- |" + " ---: |" * (len(KINDS) + 1))
    for name, fn, repeats in cases:
        counter = count(fn)
        ops, totals = counter.ops, by_kind(counter)
        seconds = wall_time(fn, args.device, repeats)
        print(f"| {name} | {' | '.join(str(totals[k]) for k in KINDS)} | {seconds * 1e6:.0f} |", flush=True)
        if args.verbose:
            for op, n in ops.most_common():
                print(f"    {n:5d}  {op}  ({counter.kinds[op]})")
        if args.json:
            row = {"date": stamp, "commit": commit(), "label": args.label, "device": args.device,
                   "machine": machine, "case": name, "preset": args.preset if name.startswith("bfv") else None,
                   "counts": totals, "ops": dict(ops.most_common()), "wall_us": seconds * 1e6, "repeats": repeats}
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
