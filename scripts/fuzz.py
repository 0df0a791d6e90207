"""The long fuzz run: every deserializer's target (tests/fuzz_targets.py) on many inputs, spread
over worker processes, with the same contract as the bounded runs in the test suite (a typed
error or a correct round trip; per-input time limit; traced memory bounded by the input's size).

    python scripts/fuzz.py --inputs 1000000 --workers 2          # the documented run (docs/fuzzing.md)
    python scripts/fuzz.py --inputs 20000 --targets archive,loads  # some targets only
    python scripts/fuzz.py --replay fuzz-out/<file>.bin --targets fhe_core.serialize.loads

The inputs are split evenly over the targets (and over the workers); ``--seed`` makes a run
reproducible. An input that breaks the contract is saved under ``--out`` and reported; the run goes
on. The summary table (per target: inputs, accepted, typed errors, failures) is printed and, with
``--markdown``, written to a file. Exit status 1 when any input failed.
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import multiprocessing
import os
import platform
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import fuzz_targets  # noqa: E402  (after the path set-up: it lives in tests/)

PROGRESS_EVERY_S = 60.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python scripts/fuzz.py", description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=100_000, help="inputs in total, over all targets")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--targets", default="", help="comma-separated substrings of target names (default: all)")
    parser.add_argument("--seed", type=int, default=None, help="run seed (default: from the OS)")
    parser.add_argument("--no-memory", action="store_true", help="skip the traced-memory bound (faster)")
    parser.add_argument("--out", type=Path, default=Path("fuzz-out"), help="where failing inputs are saved")
    parser.add_argument("--markdown", type=Path, help="also write the summary table to this file")
    parser.add_argument("--replay", type=Path, help="check one saved input against --targets and exit")
    args = parser.parse_args(argv)
    if args.inputs < 1 or args.workers < 1:
        parser.error("--inputs and --workers must be positive")
    return args


def selected(spec: str) -> list[str]:
    names = list(fuzz_targets.targets())
    if not spec:
        return names
    wanted = [s for s in spec.split(",") if s]
    chosen = [n for n in names if any(s in n for s in wanted)]
    if not chosen:
        raise SystemExit(f"no target matches {spec!r}; targets: {', '.join(names)}")
    return chosen


def worker(index: int, seed: int, quotas: dict[str, int], memory: bool, out: Path, progress) -> dict:
    """Check ``quotas[name]`` inputs of each target, interleaved; returns the outcome counts and failures."""
    import torch

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")        # numpy's cast warnings on hostile arrays are expected
    targets = fuzz_targets.targets()
    streams = {name: fuzz_targets.input_stream(targets[name], seed * 1_000_003 + index * 7919 + i)
                        for i, name in enumerate(sorted(quotas))}
    for name in quotas:
        targets[name].corpus()
    left = dict(quotas)
    counts = {name: collections.Counter() for name in quotas}
    failures, busy, done, last = [], collections.Counter(), 0, time.monotonic()
    while left:
        for name in list(left):
            data = next(streams[name])
            start = time.perf_counter()
            try:
                counts[name][fuzz_targets.check(targets[name], data, memory=memory)] += 1
            except fuzz_targets.FuzzFailure as exc:
                counts[name]["FAILED"] += 1
                out.mkdir(parents=True, exist_ok=True)
                path = out / f"{name}-{hashlib.sha256(data).hexdigest()[:16]}.bin"
                path.write_bytes(data)
                failures.append((name, str(exc), str(path)))
            busy[name] += time.perf_counter() - start
            done += 1
            left[name] -= 1
            if not left[name]:
                del left[name]
        if time.monotonic() - last > PROGRESS_EVERY_S:
            progress.put((index, done, len(failures)))
            last = time.monotonic()
    progress.put((index, done, len(failures)))
    return {"counts": counts, "failures": failures, "busy": busy}


def split(total: int, parts: int) -> list[int]:
    return [total // parts + (i < total % parts) for i in range(parts)]


def summary(names: list[str], results: list[dict], wall: float, args: argparse.Namespace, seed: int) -> str:
    lines = [f"fuzz run: {sum(sum(c.values()) for r in results for c in r['counts'].values())} inputs, "
             f"{args.workers} workers, {wall:.0f} s wall, seed {seed}, memory bound "
             f"{'off' if args.no_memory else 'on'}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"{platform.processor() or platform.machine()} ({os.cpu_count()} CPUs), "
             f"Python {platform.python_version()}",
             "", "| target | inputs | accepted (round trip checked) | typed errors | failures | CPU s |",
             "| --- | ---: | ---: | --- | ---: | ---: |"]
    for name in names:
        counts = sum((r["counts"].get(name, collections.Counter()) for r in results), collections.Counter())
        busy = sum(r["busy"].get(name, 0.0) for r in results)
        errors = {k: v for k, v in counts.items() if k not in ("ok", "FAILED")}
        top = ", ".join(f"{k} {v}" for k, v in sorted(errors.items(), key=lambda kv: -kv[1])[:4])
        more = len(errors) - 4
        lines.append(f"| `{name}` | {sum(counts.values())} | {counts['ok']} | {sum(errors.values())} ({top}"
                     f"{f', +{more} kinds' if more > 0 else ''}) | {counts['FAILED']} | {busy:.0f} |")
    failures = [f for r in results for f in r["failures"]]
    lines += ["", f"failures: {len(failures)}"] + [f"- {name}: {message} -> {path}" for name, message, path in
                                                   failures[:50]]
    return "\n".join(lines)


def replay(args: argparse.Namespace) -> int:
    data = args.replay.read_bytes()
    status = 0
    for name in selected(args.targets):
        try:
            print(f"{name}: {fuzz_targets.check(fuzz_targets.targets()[name], data, memory=not args.no_memory)}")
        except fuzz_targets.FuzzFailure as exc:
            print(f"{name}: FAILED {exc}")
            status = 1
    return status


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.replay:
        return replay(args)
    names = selected(args.targets)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    per_target = dict(zip(names, split(args.inputs, len(names))))
    shares = {name: split(count, args.workers) for name, count in per_target.items()}
    plans = [{name: share[w] for name, share in shares.items() if share[w]} for w in range(args.workers)]
    print(f"fuzzing {len(names)} targets, {args.inputs} inputs, {args.workers} workers, seed {seed}", flush=True)
    start = time.monotonic()
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, context.Pool(args.workers) as pool:
        progress = manager.Queue()
        jobs = [pool.apply_async(worker, (w, seed, plan, not args.no_memory, args.out, progress))
                for w, plan in enumerate(plans) if plan]
        done = {}
        while not all(job.ready() for job in jobs):
            time.sleep(1.0)
            while not progress.empty():
                index, count, failed = progress.get()
                done[index] = (count, failed)
                inputs = sum(c for c, _ in done.values())
                print(f"  {time.monotonic() - start:7.0f} s: {inputs} inputs, "
                      f"{sum(f for _, f in done.values())} failures", flush=True)
        results = [job.get() for job in jobs]
    text = summary(names, results, time.monotonic() - start, args, seed)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    return 1 if any(r["failures"] for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
