"""The keys phase of the main job, timed step by step: the client's evaluation keys for HELR
(``HELRClient.write_eval_keys``), their registration with a real server over loopback
(``ServiceClient.register_keys``: manifest, parts, completion and verification), and the server's
first load of the verified set (what the first job that uses it pays).

    python scripts/bench_keys.py --json docs/results/keys-phase-cpu.jsonl
    python scripts/bench_keys.py --keys /tmp/keys.bin --skip-keygen --profile-server /tmp/server.prof

The server runs in its own process (``python -m server serve``), as in the main job; with
``--profile-server`` under cProfile (written when it shuts down).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from apps.logreg.client import HELRClient  # noqa: E402
from apps.logreg.config import HELRConfig  # noqa: E402
from server.client import ServiceClient  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _server(data_dir: Path, port: int, profile: str | None, device: str) -> subprocess.Popen:
    prefix = [sys.executable] + (["-m", "cProfile", "-o", profile] if profile else [])
    cmd = prefix + ["-m", "server", "serve", "--data-dir", str(data_dir), "--port", str(port),
                    "--log-level", "warning", "--device", device, "--workers", "0"]
    proc = subprocess.Popen(cmd)
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="N16_H192_FULL")
    parser.add_argument("--keys", help="key file to write (or read with --skip-keygen); default: a temporary file")
    parser.add_argument("--skip-keygen", action="store_true")
    parser.add_argument("--device", default="cpu", help="the server's device")
    parser.add_argument("--profile-server", metavar="FILE", help="cProfile output of the server process")
    parser.add_argument("--json", help="append one JSON line of results to this file")
    args = parser.parse_args()

    config = HELRConfig(bootstrapping=args.preset, allow_insecure=args.preset.startswith("TINY"))
    client = HELRClient(config)
    work = Path(tempfile.mkdtemp(prefix="bench-keys-"))
    keys = Path(args.keys) if args.keys else work / "keys.bin"
    row = {"what": "keys phase: HELRClient.write_eval_keys, ServiceClient.register_keys", "preset": args.preset,
           "date": datetime.date.today().isoformat(), "commit": _commit(), "host": platform.node(),
           "device": f"cpu ({os.cpu_count()} cores)", "server_device": args.device,
           "load_before": [round(x, 2) for x in os.getloadavg()]}
    if not args.skip_keygen:
        start, cpu = time.perf_counter(), time.process_time()
        row["bytes"] = client.write_eval_keys(keys)
        row["keygen_s"] = round(time.perf_counter() - start, 2)
        row["keygen_cpu_s"] = round(time.process_time() - cpu, 2)
        print(f"keygen: {row['keygen_s']} s ({row['keygen_cpu_s']} s CPU), {row['bytes']:,} bytes", flush=True)
    row["bytes"] = keys.stat().st_size

    port = _free_port()
    data_dir = work / "server"
    token = subprocess.run([sys.executable, "-m", "server", "create-token", "bench", "--data-dir", str(data_dir)],
                           check=True, capture_output=True, text=True).stdout.strip()
    server = _server(data_dir, port, args.profile_server, args.device)
    try:
        user = ServiceClient(f"http://127.0.0.1:{port}", token, progress=False)
        start = time.perf_counter()
        keyset = user.register_keys(keys, client.params)
        row["register_s"] = round(time.perf_counter() - start, 2)
        print(f"registration: {row['register_s']} s", flush=True)
        user.delete_keyset(keyset)
    finally:
        server.send_signal(2)
        server.wait(120)
    row["load"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(row) + "\n")
    print(json.dumps(row))


if __name__ == "__main__":
    main()
