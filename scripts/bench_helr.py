"""Encrypted HELR training benchmark: MNIST 3 vs 8, the client and server halves in one process.

Reports key generation time, evaluation-key bytes (serialized: seed-compressed, and compressed +
bit-packed; in device memory), dataset encryption, milliseconds per iteration with bootstrapping
amortised and the split between iterations and bootstraps, peak device memory, and the decrypted
model against the plaintext twin (max |w - w_twin| over the iterations, accuracy, AUROC).
Decryptions for the check run outside the timed steps. Wall-clock times, synchronised.

    python scripts/bench_helr.py --device cuda --iterations 30 --markdown helr.md --json helr.jsonl
    python scripts/bench_helr.py --device cpu --iterations 2            # the 2-core CPU run
    python scripts/bench_helr.py --device cpu --tiny --iterations 6      # insecure N = 2^11, seconds
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

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from apps.logreg.client import HELRClient  # noqa: E402
from apps.logreg.config import HELRConfig  # noqa: E402
from apps.logreg.trainer import EncryptedHELRTrainer  # noqa: E402
from apps.logreg.twin import design_matrix, train_helr  # noqa: E402
from data.helr import helr_dataset  # noqa: E402
from data.mnist import load_mnist  # noqa: E402
from fhe_core import serialize  # noqa: E402
from ml.metrics import binary_report  # noqa: E402

DEFAULT_MNIST = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mnist"
REFERENCES = {"Cheddar, H100 PCIe (fastest published)": 40.7, "100x bootstrapping, V100 (reference design)": 775.0}


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(device: str, fn):
    sync(device)
    start = time.perf_counter()
    out = fn()
    sync(device)
    return out, time.perf_counter() - start


def key_bytes(keys) -> dict[str, int]:
    """Serialized (seed-compressed; compressed + bit-packed) and in-memory bytes of the key set.
    Every key has the same shape, so the relinearization key and one Galois key are serialized
    and the Galois size multiplied by the count (exact for the compressed size; the packed size
    can differ by a few bytes per key where a limb's largest residue is a bit shorter)."""
    galois = sorted(keys.galois_elements)
    relin, one = keys.relin_key("bench"), keys.galois_key(galois[0], "bench")
    members = [relin] + [keys.galois_key(k, "bench") for k in galois]
    return {"keys": len(members),
            "serialized_compressed": len(serialize.dumps(relin)) + len(galois) * len(serialize.dumps(one)),
            "serialized_packed": len(serialize.dumps(relin, packed=True))
                                 + len(galois) * len(serialize.dumps(one, packed=True)),
            "device": sum(k.data.numel() * k.data.element_size() for k in members)}


def run(args) -> dict:
    device = args.device
    data = helr_dataset(load_mnist(args.mnist))
    samples = args.samples or len(data.x_train)
    x, y = design_matrix(data.x_train[:samples], data.levels), data.y_train[:samples]
    x_test, y_test = design_matrix(data.x_test, data.levels), data.y_test
    changes = dict(iterations=args.iterations)
    if args.batch_size:
        changes["batch_size"] = args.batch_size
    config = HELRConfig.tiny(**changes) if args.tiny else HELRConfig.secure(bootstrapping=args.preset, **changes)
    schedule = config.schedule(samples)
    twin = train_helr(x, y, config.twin_config(), schedule=schedule)  # no test set: needs no scikit-learn
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()

    client, t_client = timed(device, lambda: HELRClient(config, device=device))
    keys, t_keys = timed(device, client.eval_keys)
    dataset, t_encrypt = timed(device, lambda: client.encrypt_dataset(x, y, schedule))
    trainer, t_setup = timed(device, lambda: EncryptedHELRTrainer(config, keys, dataset, schedule))

    bootstrap_times = []
    inner_bootstrap = trainer._bootstrap

    def timed_bootstrap(w, v):  # the bench's own instrumentation: time each bootstrap separately
        out, seconds = timed(device, lambda: inner_bootstrap(w, v))
        bootstrap_times.append(seconds)
        return out

    trainer._bootstrap = timed_bootstrap
    phases = instrument_phases(trainer, device) if args.phases else {}
    step_times, errors = [], []
    for t in range(config.iterations):
        _, seconds = timed(device, trainer.step)
        step_times.append(seconds)
        w, v = client.decrypt_weights(trainer.weights), client.decrypt_weights(trainer.velocity)
        record = twin.records[t]
        errors.append(float(max(np.abs(w - record.w).max(), np.abs(v - record.v).max())))
        print(f"iteration {t + 1}: {seconds * 1e3:.1f} ms, |w - twin| 2^{np.log2(errors[-1]):.1f}", flush=True)
    total = sum(step_times)
    steady_ms, same = steady_run(config, keys, dataset, schedule, device, trainer)
    result = {
        "date": datetime.date.today().isoformat(), "device": device_name(device), "host": platform.node(),
        "preset": config.bootstrapping, "config": json.loads(config.to_json()), "samples": samples,
        "rows_per_ciphertext": config.rows_per_ciphertext, "ciphertexts_per_batch": config.ciphertexts_per_batch,
        "iterations": config.iterations, "bootstraps": len(bootstrap_times),
        "ms_per_iteration_amortised": 1e3 * total / config.iterations,
        "ms_per_iteration_without_bootstrap": 1e3 * (total - sum(bootstrap_times)) / config.iterations,
        "ms_per_bootstrap": 1e3 * float(np.mean(bootstrap_times)) if bootstrap_times else None,
        "ms_first_iteration": 1e3 * step_times[0],
        "ms_per_iteration_one_run": steady_ms, "one_run_weights_identical": same,
        "ms_per_iteration_steady": (1e3 * (total - step_times[0] - sum(bootstrap_times)) / (config.iterations - 1)
                                    if config.iterations > 1 else None),
        "s_client_setup": t_client, "s_keygen": t_keys, "s_encrypt_dataset": t_encrypt, "s_trainer_setup": t_setup,
        "key_bytes": key_bytes(keys),
        "dataset_bytes": len(serialize.dumps(dataset.ciphertexts[0])) * len(dataset.ciphertexts),  # equal shapes
        "peak_device_bytes": torch.cuda.max_memory_allocated() if device.startswith("cuda") else None,
        "max_abs_w_error": max(errors), "errors_per_iteration": errors,
        "ms_per_iteration_by_phase": {name: 1e3 * sum(times) / config.iterations for name, times in phases.items()},
        "encrypted": test_report(y_test, x_test @ w),
        "twin": test_report(y_test, x_test @ twin.w),
    }
    return result


def steady_run(config, keys, dataset, schedule, device: str, checked, warmup: int = 4) -> tuple[float | None, bool]:
    """Milliseconds per iteration as ``trainer.run()`` goes, with no synchronisation between steps
    (the host issues the next step while the device runs this one): a fresh trainer takes ``warmup``
    steps (on CUDA: every graph captured, a bootstrap included), then the rest of the schedule is
    timed in one call. Also whether its final w and v equal the ``checked`` trainer's bit for bit."""
    trainer = EncryptedHELRTrainer(config, keys, dataset, schedule)
    trainer.run(warmup)
    _, seconds = timed(device, trainer.run)
    rest = config.iterations - warmup
    same = all(torch.equal(a.data, b.data) for a, b in ((trainer.weights, checked.weights),
                                                        (trainer.velocity, checked.velocity)))
    return (1e3 * seconds / rest if rest > 0 else None), same


def instrument_phases(trainer, device: str) -> dict[str, list[float]]:
    """Wrap the trainer's phases with synchronised timers (adds a sync per phase: --phases only):
    terms (f Z, z.v, cubic x z: the per-ciphertext work), gradient (sample sum, mask, replicate)."""
    times: dict[str, list[float]] = {"terms (f Z, z.v, cubic x z)": [], "gradient (sample sum, mask, replicate)": []}
    for (name, attr) in zip(times, ("_block_terms", "_gradient_call")):
        inner = getattr(trainer, attr)

        def wrapped(*a, _inner=inner, _name=name):
            out, seconds = timed(device, lambda: _inner(*a))
            times[_name].append(seconds)
            return out

        setattr(trainer, attr, wrapped)
    return times


def test_report(y: np.ndarray, margins: np.ndarray) -> dict:
    """Accuracy and AUROC (ml.metrics; AUROC None where scikit-learn is not installed, e.g. on a
    GPU image that has only torch and numpy)."""
    try:
        report = binary_report(y, margins)
    except ImportError:
        return {"accuracy": float(np.mean((margins > 0) == (y == 1))), "auroc": None}
    return {"accuracy": report.accuracy, "auroc": report.auroc}


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def _maybe(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def markdown(r: dict) -> str:
    kb = r["key_bytes"]
    rows = [
        ("device / date", f"{r['device']} / {r['date']}"),
        ("preset, layout", f"{r['preset']}, {r['rows_per_ciphertext']} rows x 256 per ciphertext, "
                           f"{r['ciphertexts_per_batch']} ciphertexts per batch of {r['config']['batch_size']}"),
        ("training rows, iterations, bootstraps", f"{r['samples']}, {r['iterations']}, {r['bootstraps']}"),
        ("ms per iteration, bootstrapping amortised: one run (no sync between steps, after 4)",
         "-" if r["ms_per_iteration_one_run"] is None else f"{r['ms_per_iteration_one_run']:.1f}"
         + ("" if r["one_run_weights_identical"] else " (weights DIFFER from the checked run)")),
        ("ms per iteration, bootstrapping amortised: every step synchronised (graph captures included)",
         f"{r['ms_per_iteration_amortised']:.1f}"),
        ("ms per iteration without bootstrapping", f"{r['ms_per_iteration_without_bootstrap']:.1f} (after the first: "
         + ("-" if r["ms_per_iteration_steady"] is None else f"{r['ms_per_iteration_steady']:.1f}") + ")"),
        ("ms per bootstrap (w + i v, with split)", "-" if r["ms_per_bootstrap"] is None
         else f"{r['ms_per_bootstrap']:.1f}"),
        ("key generation", f"{r['s_keygen']:.1f} s"),
        ("evaluation keys", f"{kb['keys']} keys: {kb['serialized_compressed'] / 1e9:.2f} GB serialized "
                            f"({kb['serialized_packed'] / 1e9:.2f} GB packed), {kb['device'] / 1e9:.2f} GB in memory"),
        ("encrypted training set", f"{r['dataset_bytes'] / 1e9:.3f} GB, encrypted in {r['s_encrypt_dataset']:.1f} s"),
        ("peak device memory", "-" if r["peak_device_bytes"] is None else f"{r['peak_device_bytes'] / 1e9:.2f} GB"),
        ("max abs(w - w_twin) over iterations", f"2^{np.log2(r['max_abs_w_error']):.1f}"),
        ("test accuracy / AUROC: encrypted", f"{r['encrypted']['accuracy']:.4f} / {_maybe(r['encrypted']['auroc'])}"),
        ("test accuracy / AUROC: twin", f"{r['twin']['accuracy']:.4f} / {_maybe(r['twin']['auroc'])}"),
    ]
    rows += [(f"ms per iteration in {name}", f"{ms:.1f}") for name, ms in r["ms_per_iteration_by_phase"].items()]
    rows += [(f"reference: {name}", f"{ms} ms per iteration") for name, ms in REFERENCES.items()]
    return "| quantity | value |\n| --- | --- |\n" + "\n".join(f"| {a} | {b} |" for a, b in rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--preset", default="N16_H192_FULL", choices=("N16_H192_FULL", "N16_H192_SPARSE"))
    parser.add_argument("--tiny", action="store_true", help="insecure TINY_N11_HELR preset (batch 16)")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--batch-size", type=int, help="default: the preset's config (1024; 16 with --tiny)")
    parser.add_argument("--samples", type=int, help="first N training rows (default: all 11,982)")
    parser.add_argument("--mnist", type=Path, default=DEFAULT_MNIST)
    parser.add_argument("--phases", action="store_true",
                        help="also time the trainer's phases (one synchronisation each)")
    parser.add_argument("--json", type=Path, help="append the result as one JSON line")
    parser.add_argument("--markdown", type=Path, help="write the table to this file")
    args = parser.parse_args()
    result = run(args)
    table = markdown(result)
    print(table)
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(result) + "\n")
    if args.markdown:
        args.markdown.write_text(table)


if __name__ == "__main__":
    main()
