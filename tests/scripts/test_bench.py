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


def test_bfv_suite_runs_with_linear_key_switching_and_says_so():
    bench = _bench()
    cases = bench.make_bfv_cases("cpu", sets=("BFVN10QP205L2D3T17Insecure",), key_switching="linear")
    relin = next(c for c in cases if c.name == "bfv multiply_relin")
    relin.run(0)
    assert relin.params == "BFVN10QP205L2D3T17Insecure, linear key switching"
    assert "bfv-linear" in bench.OPT_IN_SUITES


def test_boot_suite_runs_on_a_tiny_preset_and_is_opt_in():
    from fhe_core.ckks.bootstrapping import TINY_N10_FULL

    bench = _bench()
    assert "boot" in bench.OPT_IN_SUITES  # never in the default all-suites run
    cases = bench.make_boot_cases("cpu", TINY_N10_FULL, allow_insecure=True)
    reference = bench.REFERENCE
    assert [c.name for c in cases] == ["bootstrap", "bootstrap (single-hoisted DFTs)",
                                       "bootstrap_pair (two real ciphertexts)", f"bootstrap {reference}",
                                       "boot: mod_raise", "boot: coeffs_to_slots", "boot: eval_mod",
                                       "boot: slots_to_coeffs", f"boot: mod_raise {reference}",
                                       f"boot: coeffs_to_slots {reference}", f"boot: eval_mod {reference}",
                                       f"boot: slots_to_coeffs {reference}",
                                       "boot: eval_mod (two separate evaluations)",
                                       "bootstrap (larger baby steps)", "boot: coeffs_to_slots (larger baby steps)"]
    assert "boot-lite" in bench.OPT_IN_SUITES
    assert all(c.capture for c in cases)  # the graphed call (not captured again) is a CUDA-only case
    assert cases[0].reference_us == 328000 and "prec min/mean/max" in cases[0].params and "GB" in cases[0].params
    for case in cases:
        case.run(0)
        assert case.bytes > 0


def test_dense_boot_suite_makes_the_encapsulation_keys():
    """The boot suite on a preset with an ephemeral weight (boot-dense at N16_DENSE_FULL; TINY_N10_DENSE here):
    its bootstrapper gets the encapsulation pair and the params string names the ephemeral weight and K."""
    from fhe_core.ckks.bootstrapping import TINY_N10_DENSE

    bench = _bench()
    assert "boot-dense" in bench.OPT_IN_SUITES
    cases = bench.make_boot_cases("cpu", TINY_N10_DENSE, allow_insecure=True, variants=False)
    assert "ephemeral h'=32" in cases[0].params and "K=16" in cases[0].params
    cases[0].run(0)


def test_key_switches_are_counted_with_the_key_bytes_they_read():
    """One relinearization at level l: one key switch reading dnum_l x 2 x (alpha + l + 1) x N words, with the
    inner product in ModUp's NTT (KernelPlan.inner_product_in_mod_up) or after it; one per rotation."""
    from fhe_core import ckks, rlwe
    from fhe_core.params import preset

    bench = _bench()
    params = preset("N12QP483L6D3Insecure", allow_insecure=True)
    ctx = ckks.rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx)
    evaluator = ckks.Evaluator(params, rlwe.gen_eval_keys(ctx, sk))
    encoder, encryptor = ckks.Encoder(params), ckks.Encryptor(params, sk)
    ct = encryptor.encrypt(encoder.encode([0.5] * 8, slots=8))
    level = ct.level
    count, key_bytes = bench.count_key_switches(lambda: evaluator.mul_relin(ct, ct))
    digits = -(-(level + 1) // params.alpha)
    assert (count, key_bytes) == (1, digits * 2 * (params.alpha + level + 1) * params.n * 8)
    assert bench.count_key_switches(lambda: evaluator.add(ct, ct)) == (0, 0)
    in_mod_up = ckks.Evaluator(params, rlwe.gen_eval_keys(ctx, sk, ckks.galois_elements(params.n, [1])),
                               plan=evaluator.plan.replace(inner_product_in_mod_up=True, mod_up_in_one_launch=True))
    assert bench.count_key_switches(lambda: in_mod_up.mul_relin(ct, ct)) == (count, key_bytes)
    assert bench.count_key_switches(lambda: in_mod_up.rotate(ct, 1)) == (count, key_bytes)


def test_key_switches_of_a_bootstrap_are_counted_on_both_paths():
    """The fused circuit (KernelPlan.fused_circuit) switches keys through switching.inner_product_into,
    inner_product_babies_into and inner_product_pair_into: a bootstrap counts the same key switches with and
    without it, and reads fewer key bytes with it (a pair's relinearizations read the key once)."""
    from fhe_core import ckks, rlwe
    from fhe_core.ckks.bootstrapping import TINY_N10_FULL, Bootstrapper, bootstrapping_galois_elements

    bench = _bench()
    params = TINY_N10_FULL.params(allow_insecure=True)
    ctx = ckks.rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx)
    keys = rlwe.gen_eval_keys(ctx, sk, bootstrapping_galois_elements(params, TINY_N10_FULL))
    fused = Bootstrapper(params, TINY_N10_FULL, keys)
    composed = Bootstrapper(params, TINY_N10_FULL, keys, plan=fused.evaluator.plan.replace(fused_circuit=False))
    ct = ckks.Encryptor(params, sk).encrypt(ckks.Encoder(params).encode([0.5] * TINY_N10_FULL.slots,
                                                                         level=fused.min_input_level))
    counts = [bench.count_key_switches(lambda boot=boot: boot.bootstrap(ct)) for boot in (composed, fused)]
    assert counts[0][0] == counts[1][0] > 40
    assert counts[1][1] < counts[0][1]
