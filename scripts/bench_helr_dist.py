"""Data-parallel encrypted HELR on 1 and k GPUs (apps.logreg.parallel) and the ciphertext all-reduce.

One client (keys, full MNIST 3 vs 8 encrypted at N16_H192_FULL) on the first GPU, then the same
schedule trained by ``train_data_parallel`` on 1 rank and on k ranks (NCCL, one GPU each): per
step milliseconds (synchronised on rank 0; each step ends in the all-reduce, so rank 0 waits for
the slowest rank), split into steps with and without a bootstrap; the first step and the first
bootstrap (CUDA-graph capture) are left out of the medians. The runs' final checkpoints must be
byte-identical (the weights on k GPUs are those of one). Then the all-reduce alone: one HELR
iteration's payload (the term sum at 7 limbs and the z sum at 10 limbs, N = 2^16) by the centred
sum and by all-gather, milliseconds (synchronised, median of 20) and bytes each rank receives.

    python scripts/bench_helr_dist.py --mnist ../shared/data/mnist --gpus 2 --iterations 10 --json dist.jsonl
    python scripts/bench_helr_dist.py --tiny --device cpu --gpus 2 --iterations 4   # gloo, insecure, CPU
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from apps.logreg.client import HELRClient  # noqa: E402
from apps.logreg.config import HELRConfig  # noqa: E402
from apps.logreg.parallel import train_data_parallel  # noqa: E402
from apps.logreg.twin import design_matrix  # noqa: E402
from data.helr import helr_dataset  # noqa: E402
from data.mnist import load_mnist  # noqa: E402
from fhe_core import ckks, distributed  # noqa: E402


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def synced(device: str) -> float:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter()


def step_summary(seconds: list[float], bootstrapped: list[bool]) -> dict:
    """Medians of the steps without and with a bootstrap (leaving out the first step and the first
    bootstrap: warm-up and graph capture) and the amortised iteration (a bootstrap every second
    iteration at this preset: their mean)."""
    first_boot = bootstrapped.index(True) if True in bootstrapped else len(seconds)
    plain = [s for i, (s, b) in enumerate(zip(seconds, bootstrapped)) if i > 0 and not b]
    boot = [s for i, (s, b) in enumerate(zip(seconds, bootstrapped)) if i > first_boot and b]
    ms_plain = 1e3 * statistics.median(plain) if plain else None
    ms_boot = 1e3 * statistics.median(boot) if boot else None
    return {"ms_per_iteration_without_bootstrap": ms_plain, "ms_per_iteration_with_bootstrap": ms_boot,
            "ms_per_iteration_amortised": (ms_plain + ms_boot) / 2 if ms_plain and ms_boot else None,
            "ms_per_step": [round(1e3 * s, 3) for s in seconds], "bootstrapped": bootstrapped}


def collective_on_rank(rank: int, world: int, preset: str, repeats: int) -> dict | None:
    """One HELR iteration's all-reduce payload (random canonical residues), timed by method (synchronised
    wall clock, median of ``repeats``; rank 0 reports)."""
    config = HELRConfig(bootstrapping=preset, allow_insecure=preset.startswith("TINY"))
    device = f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cpu"
    params = config.bootstrapping_parameters.params(device=device, allow_insecure=config.allow_insecure)
    top = config.bootstrapping_parameters.output_level
    generator = torch.Generator(device=device).manual_seed(rank)
    objs = []
    for level in (top - 3, top):
        q = torch.tensor(params.q_primes[:level + 1], device=device).view(-1, 1)
        data = torch.randint(0, 2 ** 62, (2, level + 1, params.n), generator=generator, device=device) % q
        objs.append(ckks.Ciphertext(data=data, level=level, params_id=params.params_id, scale=2.0 ** 40,
                                    slots=params.n // 2))
    nbytes = sum(o.data.numel() * 8 for o in objs)
    out = {}
    for method in ("sum", "gather"):
        times = []
        for _ in range(repeats + 2):  # two warm-up calls
            start = synced(device)
            distributed.all_reduce_sum(objs, params, method=method, check=False)
            times.append(synced(device) - start)
        out[method] = {"ms": 1e3 * statistics.median(times[2:]),
                       "bytes_received_per_rank": distributed.bytes_received(method, world, nbytes)}
    return {"payload_bytes": nbytes, **out} if rank == 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mnist", type=Path, help="MNIST directory (default: the package's copy)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--gpus", type=int, default=2, help="k: ranks of the parallel run (and 1)")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--samples", type=int, help="training rows (default all 11,982)")
    parser.add_argument("--tiny", action="store_true", help="insecure TINY_N11_HELR (CPU check of the script)")
    parser.add_argument("--json", type=Path, help="append the JSON lines here")
    args = parser.parse_args()

    config = (HELRConfig.tiny(iterations=args.iterations) if args.tiny
              else HELRConfig.secure(iterations=args.iterations))
    data = helr_dataset(load_mnist(args.mnist))
    samples = min(args.samples or len(data.x_train), len(data.x_train))
    x, y = design_matrix(data.x_train[:samples], data.levels), data.y_train[:samples]
    schedule = config.schedule(samples)
    device = args.device
    client = HELRClient(config, device=device)
    lines = []
    common = {"date": datetime.date.today().isoformat(), "device": device_name(device), "host": platform.node(),
              "torch": torch.__version__, "preset": config.bootstrapping, "samples": samples,
              "batch_size": config.batch_size, "ciphertexts_per_batch": config.ciphertexts_per_batch}
    with tempfile.TemporaryDirectory(prefix="bench-helr-dist-") as folder:
        keys = Path(folder) / "eval-keys.bin"
        start = time.perf_counter()
        client.write_eval_keys(keys)
        print(f"keys written: {keys.stat().st_size / 1e9:.2f} GB in {time.perf_counter() - start:.1f} s", flush=True)
        dataset = client.encrypt_dataset(x, y, schedule)
        checkpoints = {}
        for world in dict.fromkeys((1, args.gpus)):
            start = time.perf_counter()
            result = train_data_parallel(config, keys, dataset, schedule, world, device=device)
            checkpoints[world] = result.checkpoint
            line = {"bench": "helr_data_parallel", **common, "ranks": world, "iterations": config.iterations,
                    "s_wall_with_setup": time.perf_counter() - start,
                    **step_summary(result.seconds, result.bootstrapped)}
            lines.append(line)
            print(json.dumps({k: v for k, v in line.items() if k != "ms_per_step"}), flush=True)
    identical = len(set(checkpoints.values())) == 1
    base, parallel = lines[0], lines[-1]
    speedup = {key: (base[key] / parallel[key] if base[key] and parallel[key] else None)
               for key in ("ms_per_iteration_without_bootstrap", "ms_per_iteration_amortised")}
    # T_k = (1 - p) T_1 + p T_1 / k  =>  p = (1 - T_k / T_1) k / (k - 1): the fraction that splits
    plain = speedup["ms_per_iteration_without_bootstrap"]
    split_fraction = (1 - 1 / plain) * args.gpus / (args.gpus - 1) if plain and args.gpus > 1 else None
    lines.append({"bench": "helr_data_parallel_summary", **common, "ranks": args.gpus,
                  "checkpoints_bit_identical": identical, "speedup": speedup,
                  "split_fraction_without_bootstrap": split_fraction,
                  "amdahl_bound_without_bootstrap": 1 / (1 - split_fraction) if split_fraction and split_fraction < 1
                  else None})
    print(json.dumps(lines[-1]), flush=True)
    if args.gpus > 1:
        backend = "nccl" if device.startswith("cuda") else "gloo"
        collective = distributed.spawn(collective_on_rank, args.gpus, config.bootstrapping, 20, backend=backend)[0]
        lines.append({"bench": "ciphertext_all_reduce", **common, "ranks": args.gpus, "backend": backend, **collective})
        print(json.dumps(lines[-1]), flush=True)
    if args.json:
        with open(args.json, "a") as f:
            f.writelines(json.dumps(line) + "\n" for line in lines)
    if not identical:
        raise SystemExit("the checkpoints of 1 and k ranks differ: the weights are not bit-identical")


if __name__ == "__main__":
    main()
