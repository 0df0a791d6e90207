"""scripts/fuzz_api.py's bounded run: schemathesis against a real server (a subprocess, tiny
insecure parameters, a tenant token and an admin token) finds no server error and no answer
the OpenAPI document does not declare (status, content type, body schema)."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_schemathesis_finds_no_server_error_and_no_schema_violation():
    run = subprocess.run([sys.executable, "scripts/fuzz_api.py", "--max-examples", "10", "--seed", "1",
                          "--phases", "coverage,fuzzing,stateful"],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-4000:]
    assert run.stdout.count("No issues found") == 2 and "fuzz_api: passed" in run.stdout
