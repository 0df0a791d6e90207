"""MB/s of one HTTP stream on loopback, by server stack and client path: where a large body's time goes.

The server is uvicorn in its own process running a bare ASGI app that reads a request body and
answers its length, or answers a body of the requested size (what the service's part uploads,
predictions and downloads do, without their hashing and parsing). Measured per direction:

- server stacks: ``h11`` + asyncio (uvicorn without extras) and ``httptools`` + uvloop (what the
  service runs with its dependencies installed);
- uploads: httpx given the whole body as ``bytes`` (httpcore slices the rest of the buffer after
  every socket send, a copy each time) and the service client's streamed slices
  (``server.client.binary_body``); downloads: httpx ``read()`` (chunks kept, then joined) and the
  client's one buffer of the Content-Length (``server.client.read_into_buffer``).

    python scripts/bench_http.py --mib 256 --json docs/results/http-stream.jsonl
"""
from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from apps.table import format_table  # noqa: E402
from server.client import binary_body, read_into_buffer  # noqa: E402

STACKS = {"h11+asyncio": ("h11", "asyncio"), "httptools+uvloop": ("httptools", "uvloop")}


async def app(scope, receive, send) -> None:
    """POST: read the body, answer its length; GET /?bytes=N: answer N zero bytes."""
    if scope["type"] != "http":
        return
    received = 0
    while True:
        message = await receive()
        received += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    if scope["method"] == "GET":
        body = bytes(int(scope["query_string"].decode().split("=")[1]))
    else:
        body = str(received).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def serve(port: int, http: str, loop: str) -> None:
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=port, http=http, loop=loop, log_level="warning")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"the server on port {port} did not start")


def best_mb_s(fn, size: int, repeats: int) -> float:
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    return size / min(seconds) / 1e6


def measure_stack(name: str, size: int, repeats: int) -> list[dict]:
    http, loop = STACKS[name]
    port = free_port()
    server = multiprocessing.get_context("spawn").Process(target=serve, args=(port, http, loop), daemon=True)
    server.start()
    try:
        wait_for(port)
        body = bytes(size)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
            def upload(streamed: bool):
                def go():  # a streamed body is an iterator: a fresh one per call
                    kwargs = binary_body(body) if streamed else {"content": body}
                    _check(client.post("/", **kwargs).text == str(size))
                return go

            def download(read):
                def go():
                    with client.stream("GET", "/", params={"bytes": size}) as response:
                        _check(len(read(response)) == size)
                return go

            runs = {("upload", "bytes"): upload(streamed=False),
                    ("upload", "streamed slices"): upload(streamed=True),
                    ("download", "read()"): download(lambda r: r.read()),
                    ("download", "one buffer"): download(read_into_buffer)}
            return [{"server": name, "direction": direction, "client": path,
                     "mb_s": round(best_mb_s(fn, size, repeats))} for (direction, path), fn in runs.items()]
    finally:
        server.terminate()
        server.join()


def _check(ok: bool) -> None:
    if not ok:
        raise RuntimeError("the server saw another number of bytes than were sent")


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256, help="body size in MiB (default 256)")
    parser.add_argument("--repeats", type=int, default=3, help="best of this many (default 3)")
    parser.add_argument("--json", type=Path, help="append one JSON line per measurement")
    args = parser.parse_args(argv)
    size = args.mib << 20
    stamp = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
             "commit": commit(), "host": f"{platform.node()}: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
             "body_mib": args.mib}
    rows = [dict(m, **stamp) for name in STACKS for m in measure_stack(name, size, args.repeats)]
    print(format_table(["server", "direction", "client", "MB/s"],
                       [(r["server"], r["direction"], r["client"], r["mb_s"]) for r in rows]))
    if args.json:
        with open(args.json, "a") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
