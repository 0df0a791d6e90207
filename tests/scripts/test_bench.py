"""scripts/bench.py builds and runs every suite's cases (on a tiny BFV set here: the real sets run
on the GPU machine through scripts/device.sh) and renders its tables."""
import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_bfv_suite_runs_on_a_tiny_set():
    bench = _bench()
    cases = bench.make_bfv_cases("cpu", sets=("BFVN10QP205L2D3T17Insecure",))
    assert {c.name for c in cases} >= {"bfv multiply_relin", "bfv rotate_rows", "bfv add"}
    for case in cases:
        case.run(0)
        assert case.bytes > 0
    timing = bench.time_op(cases[0].run, "cpu", repeats=2)
    row = {"name": "x", "params": "p", "threads": 1, "us": timing["median"] * 1e6, "bytes": 1, "GBps": 1.0,
           "of_copy": 0.5}
    table = bench.markdown({"device": "cpu", "kind": "cpu", "date": "today", "torch": "t", "copy_GBps": 1.0,
                            "rows": [row]})
    assert "| x | p | 1 |" in table


def test_boot_suite_runs_on_a_tiny_preset_and_is_opt_in():
    from fhe_core.ckks.bootstrapping import TINY_N10_FULL

    bench = _bench()
    assert "boot" in bench.OPT_IN_SUITES  # never in the default all-suites run
    cases = bench.make_boot_cases("cpu", TINY_N10_FULL, allow_insecure=True)
    assert [c.name for c in cases] == ["bootstrap", "boot: mod_raise", "boot: coeffs_to_slots", "boot: eval_mod",
                                       "boot: slots_to_coeffs"]
    assert cases[0].reference_us == 328000 and "prec min/mean/max" in cases[0].params and "GB" in cases[0].params
    for case in cases:
        case.run(0)
        assert case.bytes > 0
