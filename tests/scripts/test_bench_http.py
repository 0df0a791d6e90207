"""scripts/bench_http.py runs end to end on a small body: both server stacks, both directions,
both client paths, one JSON line each with the stamp (the real sizes run through device.sh)."""
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_http.py"


def test_every_stack_direction_and_client_path_is_measured(tmp_path):
    out = tmp_path / "http.jsonl"
    subprocess.run([sys.executable, str(SCRIPT), "--mib", "2", "--repeats", "1", "--json", str(out)],
                   check=True, capture_output=True, timeout=120)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert {(r["server"], r["direction"], r["client"]) for r in lines} == {
        (server, direction, client) for server in ("h11+asyncio", "httptools+uvloop")
        for direction, client in (("upload", "bytes"), ("upload", "streamed slices"),
                                  ("download", "read()"), ("download", "one buffer"))}
    assert all(r["mb_s"] > 0 and r["body_mib"] == 2 and r["commit"] and r["date"] for r in lines)
