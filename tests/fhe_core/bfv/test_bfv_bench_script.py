"""scripts/bench_bfv.py runs end to end on a tiny set (the lead runs the real sets on a GPU)."""
import importlib.util
import os

import pytest

from bfv_helpers import SMALL

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts", "bench_bfv.py")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_bfv", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_rows_and_table(bench):
    rows = bench.bench_set(SMALL, "cpu", repeat=2, warmup=0)
    ops = [r["op"] for r in rows]
    assert {"add", "multiply", "relinearize", "multiply_relin", "rotate_rows"} <= set(ops)
    assert all(r["us_median"] > 0 and r["name"] == f"bfv/logN=10/{r['op']}" for r in rows)
    assert next(r for r in rows if r["op"] == "multiply_relin")["budget_bits"] > 50
    table = bench.markdown(rows)
    assert table.count("\n") == len(rows) + 1 and SMALL in table
