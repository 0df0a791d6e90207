"""Load test of the service: N concurrent clients sending encrypted XGBoost predictions to a
server on the loopback interface for a bounded time (not a unit test).

    python scripts/loadtest.py [--clients 16 --duration 300 --preset BFVN13QP218L3D4T17
                                --samples 64 --device cpu --json out.json]

It starts ``python -m server serve`` on 127.0.0.1 (a fresh data directory), registers a small
XGBoost model (trained here on synthetic data, exported for the preset) as the administrator,
builds a ForestClient from the model's public part, registers its evaluation keys and encrypts
one batch. Then:

1. **overhead**: the same prediction in process (``ForestEvaluator.evaluate``, keys and model
   already loaded) against one HTTP client (dumps_many, POST, the server's loads_many +
   evaluate + dumps_many, loads_many), median of ``--repeat`` sequential runs each;
2. **load**: ``--clients`` threads, each with its own connection, POST the batch in a loop until
   ``--duration`` seconds have passed; every answer is checked (status 200; the first answer of
   each client is decrypted and compared with the plaintext twin's scores); the server's RSS is
   sampled every second.

It prints a Markdown report (throughput, latency percentiles, errors, RSS first/max/last and
its drift, request/response bytes) for docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx
import numpy as np
import psutil
import torch
import xgboost

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from apps.xgboost.client import ForestClient  # noqa: E402
from apps.xgboost.encoding import PublicBinning  # noqa: E402
from apps.xgboost.export import HEForest, export_booster  # noqa: E402
from apps.xgboost.plan import PublicModel  # noqa: E402
from apps.xgboost.server import ForestEvaluator  # noqa: E402
from apps.xgboost.twin import predict_forest  # noqa: E402
from fhe_core.params import preset  # noqa: E402
from fhe_core.serialize import dumps_many, loads_many  # noqa: E402
from fhe_core.rlwe import Ciphertext  # noqa: E402
from server.client import ServiceClient  # noqa: E402
from server.db import Database  # noqa: E402
from server.embedded import free_port, serve_subprocess  # noqa: E402
from server.tenants import create_token  # noqa: E402


def demo_forest(features: int = 8, classes: int = 3, depth: int = 3, rounds: int = 4,
                frac_bits: int = 8) -> HEForest:
    """A small multi-class model on synthetic data (hist, 8 bins per feature, some NaN)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, features)).astype(np.float32)
    x[rng.random(x.shape) < 0.05] = np.nan
    y = (np.nan_to_num(x[:, 0]) > 0).astype(int) + (np.nan_to_num(x[:, 1]) > 0.5).astype(int)
    train = xgboost.QuantileDMatrix(x, label=y % classes, max_bin=8)
    booster = xgboost.train({"objective": "multi:softprob", "num_class": classes, "tree_method": "hist",
                             "max_depth": depth, "max_bin": 8, "seed": 0, "nthread": 1}, train,
                            num_boost_round=rounds)
    return export_booster(booster, PublicBinning.from_dmatrix(train), frac_bits=frac_bits)


def start_server(data_dir: Path, port: int, device: str, insecure: bool) -> subprocess.Popen:
    env = {"FHE_SERVER_DEVICE": device, "FHE_SERVER_ALLOW_INSECURE": "1" if insecure else "0"}
    return serve_subprocess(data_dir, port, env=env, start_timeout=120)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def overhead(api: ServiceClient, model: str, keyset: str, client: ForestClient, keys, forest: HEForest, cts,
             repeat: int):
    """Median seconds: in-process evaluate vs the same prediction over HTTP."""
    evaluator = ForestEvaluator(client.params, keys, forest, public_key=client.public_key)
    sync = torch.cuda.synchronize if client.params.device.type == "cuda" else (lambda: None)
    evaluator.evaluate(cts)  # warm-up (plaintext caches)
    api.predict(model, keyset, cts, client.params)  # warm-up (server caches)
    local, remote = [], []
    for _ in range(repeat):  # interleaved, so that a busy moment of the machine hits both alike
        sync()
        start = time.perf_counter()
        evaluator.evaluate(cts)
        sync()  # the kernels have finished (the HTTP path waits for them when it serializes)
        local.append(time.perf_counter() - start)
        start = time.perf_counter()
        api.predict(model, keyset, cts, client.params)
        remote.append(time.perf_counter() - start)
    ratio = statistics.median(r / x for r, x in zip(remote, local))
    return statistics.median(local), statistics.median(remote), ratio


def load(url: str, token: str, model: str, keyset: str, body: bytes, client: ForestClient, n: int, expected,
         clients: int, duration: float, server_pid: int):
    """Run ``clients`` threads for ``duration`` seconds; returns latencies, errors, RSS samples."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[str] = []
    rss: list[tuple[float, int]] = []
    stop = threading.Event()
    process = psutil.Process(server_pid)
    t0 = time.monotonic()

    def sample_rss() -> None:
        while not stop.is_set():
            rss.append((time.monotonic() - t0, process.memory_info().rss))
            stop.wait(1.0)

    def worker(i: int) -> None:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/octet-stream"}
        with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
            checked = False
            while time.monotonic() - t0 < duration:
                start = time.perf_counter()
                try:
                    response = http.post("/predictions", params={"model": model, "keyset": keyset}, content=body)
                except httpx.HTTPError as exc:
                    errors.append(f"client {i}: {type(exc).__name__}: {exc}")
                    continue
                latencies[i].append(time.perf_counter() - start)
                if response.status_code != 200:
                    errors.append(f"client {i}: HTTP {response.status_code} {response.text[:200]}")
                elif not checked:  # decrypt one answer per client: the scores must be the twin's
                    scores = client.decrypt_scores(loads_many(response.content, client.params, expect=Ciphertext), n)
                    if not np.array_equal(scores, expected):
                        errors.append(f"client {i}: decrypted scores differ from the twin's")
                    checked = True

    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    sampler.join()
    return [x for per in latencies for x in per], errors, rss, time.monotonic() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of load")
    parser.add_argument("--preset", default="BFVN13QP218L3D4T17", help="BFV preset (128-bit by default)")
    parser.add_argument("--samples", type=int, default=64, help="samples per request (one batch)")
    parser.add_argument("--repeat", type=int, default=20, help="sequential runs for the overhead medians")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", type=Path, help="also write the numbers as JSON")
    args = parser.parse_args()
    if args.clients < 1 or args.duration <= 0 or args.samples < 1:
        parser.error("--clients, --duration and --samples must be positive")

    insecure = args.preset.endswith("Insecure")
    params = preset(args.preset, allow_insecure=insecure)
    forest = demo_forest()
    with tempfile.TemporaryDirectory(prefix="fhe-loadtest-") as tmp:
        data_dir = Path(tmp)
        db = Database(data_dir / "server.sqlite3")
        tokens = {"admin": create_token(db, "admin", admin=True), "load": create_token(db, "load")}
        db.close()
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = start_server(data_dir, port, args.device, insecure)
        try:
            with ServiceClient(url, tokens["admin"], progress=False) as admin:
                admin.add_model("load", forest.to_bytes(), params)
            with ServiceClient(url, tokens["load"], progress=False) as api:
                public = PublicModel.from_json(json.dumps(api.model("load")["public"]))
                client = ForestClient(public, device=args.device, allow_insecure=insecure)
                keys = client.eval_keys()
                keyset = api.register_keys(keys, client.params, public_key=client.public_key)
                x = np.random.default_rng(1).normal(size=(args.samples, forest.binning.n_features)).astype(np.float32)
                cts = client.encrypt(x)
                body = dumps_many(cts, packed=True)
                expected = predict_forest(forest, forest.binning.encode(x)).scores
                answer = dumps_many(api.predict("load", keyset, cts, client.params))
                local_s, http_s, ratio = overhead(api, "load", keyset, client, keys, forest, cts, args.repeat)
            latencies, errors, rss, wall = load(url, tokens["load"], "load", keyset, body, client, args.samples,
                                                expected, args.clients, args.duration, proc.pid)
        finally:
            proc.terminate()
            proc.wait(30)

    rss_mb = [r / 2**20 for _, r in rss]
    settle = [r for t, r in zip((t for t, _ in rss), rss_mb) if t >= min(30.0, args.duration / 5)] or rss_mb
    third = max(len(settle) // 3, 1)  # a leak shows as a trend: the last third against the first
    trend = 100 * (statistics.median(settle[-third:]) / statistics.median(settle[:third]) - 1)
    report = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "host": platform.node(),
        "cpus": os.cpu_count(), "device": args.device, "preset": args.preset, "samples_per_request": args.samples,
        "ciphertexts_per_request": len(cts), "request_bytes": len(body), "response_bytes": len(answer),
        "overhead": {"in_process_ms": local_s * 1e3, "http_ms": http_s * 1e3,
                     "overhead_pct": 100 * (http_s / local_s - 1), "paired_overhead_pct": 100 * (ratio - 1)},
        "load": {"clients": args.clients, "duration_s": wall, "requests": len(latencies), "errors": len(errors),
                 "throughput_rps": len(latencies) / wall, "samples_per_s": len(latencies) * args.samples / wall,
                 "latency_ms": {q: percentile(latencies, q) * 1e3 for q in (50, 90, 99)},
                 "latency_max_ms": max(latencies, default=float("nan")) * 1e3,
                 "rss_mb": {"first": rss_mb[0], "max": max(rss_mb), "last": rss_mb[-1],
                            "settled_min": min(settle), "settled_max": max(settle),
                            "settled_drift_pct": 100 * (max(settle) / min(settle) - 1),
                            "settled_trend_pct": trend},
                 "rss_series_mb": [[round(t, 1), round(r / 2**20, 1)] for t, r in rss]},
        "first_errors": errors[:5],
    }
    o, ld = report["overhead"], report["load"]
    print(f"## Load test ({report['date']}, {args.device}, {os.cpu_count()} CPUs, preset {args.preset})\n")
    print(f"Request: {args.samples} samples = {len(cts)} ciphertexts, {len(body):,} bytes; "
          f"response {len(answer):,} bytes.\n")
    print("| measure | value |\n| --- | --- |")
    print(f"| in process (evaluate only), median | {o['in_process_ms']:.1f} ms |")
    print(f"| over HTTP (serialize, POST, server load+evaluate+dump, parse), median | {o['http_ms']:.1f} ms |")
    print(f"| HTTP + serialization overhead: of the medians / median of paired runs | "
          f"{o['overhead_pct']:+.1f} % / {o['paired_overhead_pct']:+.1f} % |")
    print(f"| clients x duration | {args.clients} x {ld['duration_s']:.0f} s |")
    print(f"| requests, errors | {ld['requests']}, {ld['errors']} |")
    print(f"| throughput | {ld['throughput_rps']:.2f} req/s ({ld['samples_per_s']:.0f} samples/s) |")
    lat = ld["latency_ms"]
    print(f"| latency p50 / p90 / p99 / max | {lat[50]:.0f} / {lat[90]:.0f} / {lat[99]:.0f} / "
          f"{ld['latency_max_ms']:.0f} ms |")
    r = ld["rss_mb"]
    print(f"| server RSS first / max / last | {r['first']:.0f} / {r['max']:.0f} / {r['last']:.0f} MiB |")
    print(f"| server RSS after warm-up: min / max (range) | {r['settled_min']:.0f} / {r['settled_max']:.0f} MiB "
          f"({r['settled_drift_pct']:.1f} %) |")
    print(f"| server RSS trend after warm-up (median of the last third vs the first) | "
          f"{r['settled_trend_pct']:+.1f} % |")
    for line in errors[:5]:
        print(f"error: {line}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
