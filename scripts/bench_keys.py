"""The keys phase of the main job, timed step by step: the client's evaluation keys for HELR
(``HELRClient.write_eval_keys``), their registration with a real server over loopback
(``ServiceClient.register_keys``: manifest, parts, completion and verification), and, with
``--first-load``, the load of the verified set onto the server's device (what the first job that
uses it pays: unpacking, range checks, the seeded halves expanded).

    python scripts/bench_keys.py --json docs/results/keys-phase-cpu.jsonl
    python scripts/bench_keys.py --keys /tmp/keys.bin --skip-keygen      # registration of a key file only

The server runs in its own process (``python -m server serve``), as in the main job, checking
uploads on the CPU (no worker processes).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from apps.logreg.client import HELRClient  # noqa: E402
from apps.logreg.config import HELRConfig  # noqa: E402
from fhe_core.rlwe import EvalKeySet, PublicKey  # noqa: E402
from fhe_core.serialize import loads_many  # noqa: E402
from server.client import ServiceClient  # noqa: E402
from server.embedded import free_port, serve_subprocess  # noqa: E402
from server.mapping import mapped  # noqa: E402


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="N16_H192_FULL")
    parser.add_argument("--keys", help="key file to write (or read with --skip-keygen); default: a temporary file")
    parser.add_argument("--skip-keygen", action="store_true")
    parser.add_argument("--device", default="cpu", help="where the keys are made and the worker loads them")
    parser.add_argument("--first-load", action="store_true", help="also time loading the set (a worker's first use)")
    parser.add_argument("--json", help="append one JSON line of results to this file")
    args = parser.parse_args()

    config = HELRConfig(bootstrapping=args.preset, allow_insecure=args.preset.startswith("TINY"))
    client = HELRClient(config, device=args.device)
    work = Path(tempfile.mkdtemp(prefix="bench-keys-"))
    keys = Path(args.keys) if args.keys else work / "keys.bin"
    row = {"what": "keys phase: HELRClient.write_eval_keys, ServiceClient.register_keys", "preset": args.preset,
           "date": datetime.date.today().isoformat(), "commit": _commit(), "host": platform.node(),
           "device": f"{args.device}, {os.cpu_count()} host cores",
           "load_before": [round(x, 2) for x in os.getloadavg()]}
    if not args.skip_keygen:
        start, cpu = time.perf_counter(), time.process_time()
        row["bytes"] = client.write_eval_keys(keys)
        row["keygen_s"] = round(time.perf_counter() - start, 2)
        row["keygen_cpu_s"] = round(time.process_time() - cpu, 2)
        print(f"keygen: {row['keygen_s']} s ({row['keygen_cpu_s']} s CPU), {row['bytes']:,} bytes", flush=True)
    row["bytes"] = keys.stat().st_size

    port, data_dir = free_port(), work / "server"
    env = {"FHE_SERVER_DATA_DIR": str(data_dir), "FHE_SERVER_DEVICE": args.device, "FHE_SERVER_WORKERS": "0",
           "FHE_SERVER_ALLOW_INSECURE": str(config.allow_insecure).lower()}
    token = subprocess.run([sys.executable, "-m", "server", "create-token", "bench"], env=dict(os.environ, **env),
                           check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    server = serve_subprocess(data_dir, port, env=env)
    try:
        user = ServiceClient(f"http://127.0.0.1:{port}", token, progress=False)
        start = time.perf_counter()
        keyset = user.register_keys(keys, client.params)
        row["register_s"] = round(time.perf_counter() - start, 2)
        print(f"registration: {row['register_s']} s", flush=True)
        user.delete_keyset(keyset)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(120)
    if args.first_load:
        with mapped(keys) as view:
            start = time.perf_counter()
            loads_many(view, client.params, expect=(EvalKeySet, PublicKey), device=args.device, max_count=2)
            row["first_load_s"] = round(time.perf_counter() - start, 2)
        print(f"first load on {args.device}: {row['first_load_s']} s", flush=True)
    row["load"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(row) + "\n")
    print(json.dumps(row))


if __name__ == "__main__":
    main()
