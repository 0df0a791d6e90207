"""Load test of the service: N concurrent clients sending encrypted XGBoost predictions to a
server on the loopback interface for a bounded time (not a unit test).

    python scripts/loadtest.py [--clients 16 --duration 300 --preset BFVN14QP438L7D8T20
                                --samples 64 --device cpu --workers N --json out.json]

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
   sampled every second (with its worker processes).

It prints a Markdown report (throughput, latency percentiles, errors, RSS first/max/last and
its drift, request/response bytes) for docs/benchmarks.md.

``--mix`` (the soak) instead mixes, for ``--duration`` seconds, predictions with uploads
(declare, parts, complete; the same few key sets again and again, by two tenants, so that
"ready at once", shared blobs and deletes of what another request is sending or completing
all happen) and deletes, on ``--clients`` threads::

    python scripts/loadtest.py --mix --duration 1800 --clients 8 --preset BFVN11QP335L4D5T20Insecure

Every answer must be one that the request can correctly get under concurrent deletes (a part
or a completion of a deleted upload: 404; a delete of one being completed: 409); anything else,
a 5xx above all, is an error. It prints JSON lines: one every ``--report-every`` seconds
(requests by action and status, errors, the server's RSS), then a summary: the RSS at the end
of the warm-up (``--warmup`` seconds) against the end, and a check of the data directory once
the load has stopped (every ready upload has its blob, no blob without a row naming it, no
stray part folder or temporary file). Exit status 1 on any error.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import random
import sqlite3
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
from fhe_core import bfv, rlwe  # noqa: E402
from fhe_core.params import preset  # noqa: E402
from fhe_core.serialize import dumps, dumps_many, loads_many  # noqa: E402
from fhe_core.rlwe import Ciphertext  # noqa: E402
from server.client import Manifest, ServiceClient  # noqa: E402
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


def start_server(data_dir: Path, port: int, device: str, insecure: bool, workers: int | None) -> subprocess.Popen:
    env = {"FHE_SERVER_DEVICE": device, "FHE_SERVER_ALLOW_INSECURE": "1" if insecure else "0"}
    if workers is not None:
        env["FHE_SERVER_WORKERS"] = str(workers)
    return serve_subprocess(data_dir, port, env=env, start_timeout=120)


def server_rss(process: psutil.Process) -> int:
    """Resident bytes of the server and its worker processes."""
    total = process.memory_info().rss
    for child in process.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.NoSuchProcess:  # a worker that just exited
            pass
    return total


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
            rss.append((time.monotonic() - t0, server_rss(process)))
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


class MixedLoad:
    """Threads mixing predictions, uploads and deletes against one server (``--mix``). Client
    ``i`` belongs to tenant ``i % 2``; every third client predicts, the others upload and delete
    at random, as often one as the other (so few rows stay), each tenant with two or more such
    clients (``--clients`` >= 6) deleting what the other is sending or completing."""

    # the statuses a request may correctly get while other requests delete what it works on
    EXPECTED = {"predict": {200}, "declare": {201}, "part": {200, 404}, "complete": {200, 404},
                "delete": {204, 404, 409}}

    def __init__(self, url: str, keysets: dict[str, str], model: str, body: bytes, check_answer,
                 blobs: list[tuple[dict, bytes]], part_bytes: int):
        """``keysets``: each tenant's token and its key set for the model (never deleted)."""
        self.url, self.keysets, self.model, self.body = url, keysets, model, body
        self.tokens = list(keysets)
        self.check_answer, self.blobs, self.part_bytes = check_answer, blobs, part_bytes
        self.lock = threading.Lock()
        self.counts: collections.Counter[tuple[str, int]] = collections.Counter()
        self.errors: list[str] = []
        self.uploads: dict[str, list[str]] = {token: [] for token in self.tokens}  # ids another thread may delete

    def run(self, clients: int, duration: float) -> threading.Thread:
        """Start the client threads (they stop after ``duration`` seconds); returns a joiner."""
        deadline = time.monotonic() + duration
        threads = [threading.Thread(target=self._client, args=(i, deadline), daemon=True) for i in range(clients)]
        for t in threads:
            t.start()
        joiner = threading.Thread(target=lambda: [t.join() for t in threads])
        joiner.start()
        return joiner

    def snapshot(self) -> tuple[dict[str, dict[int, int]], int]:
        with self.lock:
            by_action: dict[str, dict[int, int]] = collections.defaultdict(dict)
            for (action, status), n in sorted(self.counts.items()):
                by_action[action][status] = n
            return dict(by_action), len(self.errors)

    def _client(self, i: int, deadline: float) -> None:
        token = self.tokens[i % len(self.tokens)]
        rng = random.Random(i)
        with httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
            first_prediction = True
            while time.monotonic() < deadline:
                action = "predict" if i % 3 == 0 else rng.choice(("upload", "delete"))
                try:
                    if action == "predict":
                        response = self._call(http, "predict", "POST", "/predictions", content=self.body,
                                              params={"model": self.model, "keyset": self.keysets[token]},
                                              headers={"Content-Type": "application/octet-stream"})
                        if response is not None and first_prediction:  # one decrypted check per client
                            self._check(response.content, f"client {i}")
                            first_prediction = False
                    elif action == "upload":
                        self._upload(http, token, *rng.choice(self.blobs))
                    else:
                        self._delete(http, token, rng)
                except httpx.HTTPError as exc:
                    self._error(f"client {i} {action}: {type(exc).__name__}: {exc}")

    def _upload(self, http: httpx.Client, token: str, manifest: dict, blob: bytes) -> None:
        status = self._call(http, "declare", "POST", "/keysets", json=manifest)
        if status is None:
            return
        status = status.json()
        with self.lock:
            self.uploads[token].append(status["id"])
        for n in status["missing_parts"]:
            data = blob[n * self.part_bytes:(n + 1) * self.part_bytes]
            response = self._call(http, "part", "PUT", f"/keysets/{status['id']}/parts/{n}", content=data,
                                  headers={"Content-Type": "application/octet-stream"})
            if response is None or response.status_code != 200:
                return  # deleted meanwhile
        if status["state"] != "ready":
            self._call(http, "complete", "POST", f"/keysets/{status['id']}/complete")

    def _delete(self, http: httpx.Client, token: str, rng: random.Random) -> None:
        with self.lock:
            pool = self.uploads[token]
            if not pool:
                return
            # half the time the newest: most likely one whose parts are arriving or that is completing
            upload = pool.pop(-1 if rng.random() < 0.5 else rng.randrange(len(pool)))
        response = self._call(http, "delete", "DELETE", f"/keysets/{upload}")
        if response is not None and response.status_code == 409:  # being completed: delete it later
            with self.lock:
                self.uploads[token].append(upload)

    def _call(self, http: httpx.Client, action: str, method: str, url: str, **kwargs) -> httpx.Response | None:
        """One request, counted; None (and an error) if its status is not one it may get."""
        response = http.request(method, url, **kwargs)
        with self.lock:
            self.counts[action, response.status_code] += 1
        if response.status_code not in self.EXPECTED[action]:
            self._error(f"{action} {method} {url}: HTTP {response.status_code} {response.text[:200]}")
            return None
        return response

    def _check(self, answer: bytes, where: str) -> None:
        try:
            self.check_answer(answer)
        except Exception as exc:  # a wrong answer, reported as an error of the run
            self._error(f"{where}: {exc}")

    def _error(self, message: str) -> None:
        with self.lock:
            self.errors.append(message)


def churn_blobs(params, variants: int, part_bytes: int) -> list[tuple[dict, bytes]]:
    """``variants`` key sets (the relinearization key of a fresh secret key each) for the
    upload churn, as their manifests and bytes."""
    ctx = bfv.BFVContext(params)
    blobs = []
    for _ in range(variants):
        blob = dumps(rlwe.gen_eval_keys(ctx.rlwe, rlwe.gen_secret_key(ctx.rlwe)))
        manifest = Manifest.of(blob, part_bytes)
        blobs.append(({"params": params.literal.to_dict(), "parts": manifest.parts, "sha256": manifest.sha256,
                       "size": manifest.size}, blob))
    return blobs


def data_dir_check(data_dir: Path) -> dict[str, int]:
    """Once the load has stopped: stored state that contradicts the database."""
    with sqlite3.connect(f"file:{data_dir / 'server.sqlite3'}?mode=ro", uri=True) as db:
        ready = {sha for (sha,) in db.execute("SELECT sha256 FROM uploads WHERE state = 'ready'")}
        named = {sha for (sha,) in db.execute("SELECT sha256 FROM uploads UNION SELECT blob FROM models "
                                              "UNION SELECT result_blob FROM jobs WHERE result_blob IS NOT NULL")}
        uploading = {uid for (uid,) in db.execute("SELECT id FROM uploads WHERE state = 'uploading'")}
        states = dict(db.execute("SELECT state, COUNT(*) FROM uploads GROUP BY state").fetchall())
    stored = {p.name for p in (data_dir / "blobs").glob("*/*")}
    return {"ready_without_blob": len(ready - stored), "blobs_no_row_names": len(stored - named),
            "stray_part_folders": sum(p.name not in uploading for p in (data_dir / "parts").glob("*")),
            "tmp_files": sum(1 for _ in (data_dir / "tmp").glob("*")),
            **{f"uploads_{state}": n for state, n in states.items()}}


def mixed(url: str, data_dir: Path, proc: subprocess.Popen, keysets: dict[str, str], model: str, body: bytes,
          check_answer, blobs: list[tuple[dict, bytes]], args) -> list[dict]:
    """Run the mixed load; print (and return) its JSON lines."""
    lines: list[dict] = []

    def emit(line: dict) -> None:
        lines.append(line)
        print(json.dumps(line), flush=True)

    process = psutil.Process(proc.pid)
    load = MixedLoad(url, keysets, model, body, check_answer, blobs, args.part_bytes)
    rss: list[tuple[float, float]] = []
    t0 = time.monotonic()
    joiner = load.run(args.clients, args.duration)
    next_report = args.report_every
    while joiner.is_alive():
        joiner.join(1.0)
        t = time.monotonic() - t0
        rss.append((t, server_rss(process) / 2**20))
        if t >= next_report or not joiner.is_alive():
            requests, errors = load.snapshot()
            emit({"t_s": round(t, 1), "rss_mib": round(rss[-1][1], 1), "errors": errors, "requests": requests})
            next_report += args.report_every
    wall = time.monotonic() - t0

    def median_rss(start: float, end: float) -> float:
        window = [r for t, r in rss if start <= t <= end] or [rss[-1][1]]
        return round(statistics.median(window), 1)

    warm = median_rss(args.warmup - 10, args.warmup)
    end = median_rss(wall - 10, wall)
    check = data_dir_check(data_dir)
    broken = {k: v for k, v in check.items() if not k.startswith("uploads_") and v}
    requests, errors = load.snapshot()
    first_errors = load.errors[:5] + ([f"data directory: {broken}"] if broken else [])
    emit({"summary": True, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "host": platform.node(),
          "cpus": os.cpu_count(), "device": args.device, "workers": args.workers, "preset": args.preset,
          "clients": args.clients,
          "duration_s": round(wall, 1), "requests": requests,
          "requests_total": sum(n for by_status in requests.values() for n in by_status.values()),
          "errors": errors + len(broken), "first_errors": first_errors,
          "rss_mib": {"warm_up_end": warm, "end": end, "growth_after_warm_up_pct": round(100 * (end / warm - 1), 1),
                      "max": round(max(r for _, r in rss), 1), "warmup_s": args.warmup},
          "data_dir": check})
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of load")
    parser.add_argument("--preset", default="BFVN14QP438L7D8T20",
                        help="BFV preset (128-bit by default; flooded answers need N = 2^14 for the depth-3 model)")
    parser.add_argument("--samples", type=int, default=64, help="samples per request (one batch)")
    parser.add_argument("--repeat", type=int, default=20, help="sequential runs for the overhead medians")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--workers", type=int, default=None,
                        help="the server's worker processes (default: one per visible GPU with --device cuda, else 1)")
    parser.add_argument("--json", type=Path, help="also write the numbers as JSON (--mix: the JSON lines)")
    parser.add_argument("--mix", action="store_true", help="the soak: predictions, uploads and deletes mixed")
    parser.add_argument("--warmup", type=float, default=None,
                        help="--mix: seconds before the RSS baseline (default: a fifth of --duration, at most 300)")
    parser.add_argument("--report-every", type=float, default=30.0, help="--mix: seconds between JSON lines")
    parser.add_argument("--part-bytes", type=int, default=64 << 10, help="--mix: part size of the churned uploads")
    parser.add_argument("--variants", type=int, default=2, help="--mix: distinct key sets the churn uploads")
    args = parser.parse_args()
    if args.clients < 1 or args.duration <= 0 or args.samples < 1:
        parser.error("--clients, --duration and --samples must be positive")
    if args.warmup is None:
        args.warmup = min(args.duration / 5, 300.0)
    if not 10 <= args.warmup < args.duration or args.report_every <= 0 or args.part_bytes < 1 or args.variants < 1:
        parser.error("--warmup must be >= 10 s and below --duration; --report-every, --part-bytes, --variants > 0")

    insecure = args.preset.endswith("Insecure")
    params = preset(args.preset, allow_insecure=insecure)
    forest = demo_forest()
    with tempfile.TemporaryDirectory(prefix="fhe-loadtest-") as tmp:
        data_dir = Path(tmp)
        db = Database(data_dir / "server.sqlite3")
        tokens = {"admin": create_token(db, "admin", admin=True), "load": create_token(db, "load"),
                  "other": create_token(db, "other")}
        db.close()
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = start_server(data_dir, port, args.device, insecure, args.workers)
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
                if args.mix:
                    with ServiceClient(url, tokens["other"], progress=False) as other:
                        other_keyset = other.register_keys(keys, client.params, public_key=client.public_key)
                    keysets = {tokens["load"]: keyset, tokens["other"]: other_keyset}

                    def check_answer(content: bytes) -> None:
                        cts = loads_many(content, client.params, expect=Ciphertext)
                        if not np.array_equal(client.decrypt_scores(cts, args.samples), expected):
                            raise AssertionError("decrypted scores differ from the twin's")

                    lines = mixed(url, data_dir, proc, keysets, "load", body, check_answer,
                                  churn_blobs(client.params, args.variants, args.part_bytes), args)
                else:
                    local_s, http_s, ratio = overhead(api, "load", keyset, client, keys, forest, cts, args.repeat)
            if not args.mix:
                latencies, errors, rss, wall = load(url, tokens["load"], "load", keyset, body, client, args.samples,
                                                    expected, args.clients, args.duration, proc.pid)
        finally:
            proc.terminate()
            proc.wait(30)
    if args.mix:
        if args.json:
            args.json.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return 1 if lines[-1]["errors"] else 0

    rss_mb = [r / 2**20 for _, r in rss]
    settle = [r for t, r in zip((t for t, _ in rss), rss_mb) if t >= min(30.0, args.duration / 5)] or rss_mb
    third = max(len(settle) // 3, 1)  # a leak shows as a trend: the last third against the first
    trend = 100 * (statistics.median(settle[-third:]) / statistics.median(settle[:third]) - 1)
    report = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "host": platform.node(),
        "cpus": os.cpu_count(), "device": args.device, "workers": args.workers, "preset": args.preset,
        "samples_per_request": args.samples,
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
    print(f"## Load test ({report['date']}, {args.device}, {args.workers or 'default'} worker(s), "
          f"{os.cpu_count()} CPUs, preset {args.preset})\n")
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
