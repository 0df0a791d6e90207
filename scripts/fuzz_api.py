"""Fuzz the HTTP API with schemathesis against a real server (``python -m server serve``, tiny
insecure parameters allowed, small limits) and fail on any server error (5xx) or any answer
that its OpenAPI entry does not declare (status, content type, body schema).

It starts the server on a fresh data directory, makes a tenant token and an admin token,
declares one key set and one dataset (left uploading, so that the routes taking their ids reach
the service's logic instead of a 404), then runs ``schemathesis run`` twice: every operation
with the tenant's token, and the administrator's operations (/models) with the admin token.

    python scripts/fuzz_api.py                         # the test suite's bounded run
    python scripts/fuzz_api.py --max-examples 500 --seed 7 --phases coverage,fuzzing,stateful

The test suite runs it with few examples (tests/scripts/test_fuzz_api.py); docs/fuzzing.md
records the long runs.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fhe_core.params import preset_literal  # noqa: E402
from server.db import Database  # noqa: E402
from server.embedded import free_port, serve_subprocess  # noqa: E402
from server.tenants import create_token  # noqa: E402

CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"
PARAMS = "BFVN10QP205L2D3T17Insecure"
# the test suite's small limits (tests/server/conftest.py): kilobytes, not gigabytes
SERVER_ENV = {"FHE_SERVER_ALLOW_INSECURE": "1", "FHE_SERVER_MAX_PART_BYTES": str(1 << 20),
              "FHE_SERVER_MAX_BODY_BYTES": str(16 << 20), "FHE_SERVER_MAX_UPLOAD_BYTES": str(256 << 20),
              "FHE_SERVER_MAX_BATCH": "64", "FHE_SERVER_UPLOAD_IDLE_TIMEOUT_S": "5", "PYTHONUNBUFFERED": "1"}


def declare_uploads(url: str, token: str) -> dict[str, str]:
    """One key set and one dataset of two parts each, declared and never sent: their ids."""
    parts = [{"sha256": hashlib.sha256(bytes([n])).hexdigest(), "size": 100} for n in range(2)]
    manifest = {"params": preset_literal(PARAMS).to_dict(), "parts": parts,
                "sha256": hashlib.sha256(b"whole").hexdigest(), "size": 200}
    ids = {}
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        for kind in ("keyset", "dataset"):
            answer = http.post(f"/{kind}s", json=manifest)
            answer.raise_for_status()
            ids[f"{kind}_id"] = answer.json()["id"]
    return ids


def schemathesis(url: str, token: str, config: Path, args: argparse.Namespace, *extra: str) -> int:
    command = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "--no-color", "run",
               f"{url}/openapi.json",
               "-H", f"Authorization: Bearer {token}", "--checks", CHECKS, "--max-examples", str(args.max_examples),
               "--seed", str(args.seed), "--phases", args.phases, "--workers", str(args.workers),
               "--suppress-health-check", "all", "--warnings", "off", *extra]
    print("$ schemathesis run", " ".join(c for c in command[7:] if not c.startswith("Authorization")), flush=True)
    return subprocess.run(command, cwd=config.parent).returncode  # its cache goes to the temporary directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-examples", type=int, default=5, help="examples per operation and phase")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--phases", default="coverage,fuzzing")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fuzz-api-") as tmp:
        data = Path(tmp) / "data"
        db = Database(data / "server.sqlite3")
        try:
            tenant, admin = create_token(db, "alice"), create_token(db, "root", admin=True)
        finally:
            db.close()
        port = free_port()
        env = {k: v for k, v in SERVER_ENV.items() if k not in os.environ}
        with open(Path(tmp) / "server.log", "wb") as log:
            server = serve_subprocess(data, port, env=env, log=log)
        failed = 1
        try:
            url = f"http://127.0.0.1:{port}"
            config = Path(tmp) / "schemathesis.toml"
            ids = declare_uploads(url, tenant)
            config.write_text("[parameters]\n" + "".join(f'"path.{k}" = "{v}"\n' for k, v in ids.items()))
            start = time.monotonic()
            failed = schemathesis(url, tenant, config, args)
            failed |= schemathesis(url, admin, config, args, "--include-path-regex", "^/models")
            print(f"fuzz_api: {'FAILED' if failed else 'passed'} in {time.monotonic() - start:.0f} s", flush=True)
        finally:
            server.terminate()
            server.wait(30)
            if failed:
                print((Path(tmp) / "server.log").read_text()[-4000:])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
