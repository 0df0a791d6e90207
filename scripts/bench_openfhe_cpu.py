"""CPU key switching against OpenFHE: HMult + relin and HRotate at N = 2^16, same number of limbs.

Ours: the ``N16QP1766L30D3`` preset (128-bit; q_0 of 60 bits, 40-bit scaling primes, alpha = 11
special primes of 46 bits, dnum = 3) at the level with the requested number of Q limbs (31 = the
top level; fewer limbs use a lower level of the same chain, so the digits keep alpha = 11 and the
last one is shorter).

OpenFHE (openfhe-python, when importable by ``--openfhe-python``): CKKS-RNS with the same ring
dimension and number of Q primes: ``SetRingDim(2^16)``, ``SetSecurityLevel(HEStd_NotSet)`` (so
N can be fixed), multiplicative depth = limbs - 1, ``SetFirstModSize(60)``,
``SetScalingModSize(40)``, ``FIXEDMANUAL`` rescaling (no rescale inside EvalMult), ``HYBRID`` key
switching with ``SetNumLargeDigits(dnum)`` (default 3, OpenFHE's own default at these depths); its
special primes are chosen by OpenFHE. EvalMult includes relinearization;
EvalRotate(ct, 1) is one key switch plus the automorphism. Threads: OMP_NUM_THREADS.

Times: the median and best wall-clock time of ``--repeats`` calls after two warm-up calls, and
the median CPU time of the process per call (steadier when other jobs share the machine), for 1
and 2 threads. Both libraries run in separate processes, one after the other.

Ours run this checkout's fhe_core (or the one PYTHONPATH names, e.g. another checkout for a before / after run) on
the process's CPU path (the ``cpu_path`` column): the best this CPU has, or the one FHE_CORE_CPU_SIMD forces
(``0``: scalar, ``avx2``: the portable vector path, e.g. on an AVX-512 IFMA machine).

    python scripts/bench_openfhe_cpu.py --openfhe-python /tmp/ofhe-venv/bin/python --limbs 31 25
    FHE_CORE_CPU_SIMD=avx2 python scripts/bench_openfhe_cpu.py --json docs/results/keyswitch-cpu.jsonl
    python scripts/bench_openfhe_cpu.py --breakdown      # ours only, time per key-switching step
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PRESET = "N16QP1766L30D3"


def timed(fn, repeats: int) -> dict[str, float]:
    """Median and best wall time of fn() in ms after two warm-up calls, and the median CPU time
    of the process (all its threads) per call: on a machine shared with other jobs the CPU time
    is the steadier comparison, since it leaves out the time spent waiting for a core."""
    fn()
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return {"median_ms": statistics.median(wall), "best_ms": min(wall), "cpu_ms": statistics.median(cpu)}


# ---- OpenFHE (runs under the interpreter that has openfhe-python) ---------------------------

def openfhe_rows(limbs: int, dnum: int, repeats: int) -> list[dict]:
    import openfhe as fhe

    params = fhe.CCParamsCKKSRNS()
    params.SetSecurityLevel(fhe.SecurityLevel.HEStd_NotSet)
    params.SetRingDim(1 << 16)
    params.SetBatchSize(1 << 15)
    params.SetMultiplicativeDepth(limbs - 1)
    params.SetFirstModSize(60)
    params.SetScalingModSize(40)
    params.SetScalingTechnique(fhe.ScalingTechnique.FIXEDMANUAL)
    params.SetKeySwitchTechnique(fhe.KeySwitchTechnique.HYBRID)
    if dnum:
        params.SetNumLargeDigits(dnum)
    cc = fhe.GenCryptoContext(params)
    for feature in (fhe.PKESchemeFeature.PKE, fhe.PKESchemeFeature.KEYSWITCH, fhe.PKESchemeFeature.LEVELEDSHE):
        cc.Enable(feature)
    keys = cc.KeyGen()
    cc.EvalMultKeyGen(keys.secretKey)
    cc.EvalRotateKeyGen(keys.secretKey, [1])
    values = [((i * 37) % 101) / 101.0 for i in range(1 << 15)]
    ct = cc.Encrypt(keys.publicKey, cc.MakeCKKSPackedPlaintext(values))
    ct2 = cc.Encrypt(keys.publicKey, cc.MakeCKKSPackedPlaintext(values[::-1]))
    setting = f"N=2^16, {limbs} Q primes (60 + 40 bits), dnum={dnum or 'default (3)'}, HYBRID, FIXEDMANUAL"
    threads = int(os.environ.get("OMP_NUM_THREADS", "0")) or os.cpu_count()
    return [{"lib": "OpenFHE " + fhe.__version__ if hasattr(fhe, "__version__") else "OpenFHE",
             "op": op, "limbs": limbs, "threads": threads, "setting": setting, **timed(fn, repeats)}
            for op, fn in (("HMult + relin", lambda: cc.EvalMult(ct, ct2)),
                           ("HRotate", lambda: cc.EvalRotate(ct, 1)))]


def run_openfhe(python: str, limbs: list[int], threads: list[int], dnum: int, repeats: int) -> list[dict]:
    rows = []
    for nthreads in threads:
        env = dict(os.environ, OMP_NUM_THREADS=str(nthreads))
        args = [python, os.path.abspath(__file__), "--worker-openfhe", "--dnum", str(dnum),
                "--repeats", str(repeats), "--limbs", *map(str, limbs)]
        out = subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout
        rows += [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return rows


# ---- ours -----------------------------------------------------------------------------------

def our_setup(limbs: int):
    import numpy as np
    import torch  # noqa: F401

    from fhe_core import rlwe
    from fhe_core.ckks import Encoder, Encryptor, Evaluator, galois_elements, rlwe_context
    from fhe_core.params import preset

    params = preset(PRESET, device="cpu")
    ctx = rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx)
    keys = rlwe.gen_eval_keys(ctx, sk, galois_elements(params.n, [1]))
    encoder, encryptor = Encoder(params), Encryptor(params, sk)
    z = np.random.default_rng(1).uniform(-1, 1, params.slots)
    level = limbs - 1
    a, b = (encryptor.encrypt(encoder.encode(v, level=level)) for v in (z, z[::-1].copy()))
    return params, ctx, keys, Evaluator(params, keys), a, b


def our_cpu_path() -> str:
    """The CPU kernels' path (checkouts from before ops.cpu_path: IFMA unless FHE_CORE_CPU_SIMD=0)."""
    from fhe_core import ops

    if hasattr(ops, "cpu_path"):
        return ops.cpu_path()
    return "scalar" if os.environ.get("FHE_CORE_CPU_SIMD") == "0" else "ifma (if the CPU has it)"


def our_rows(limbs: list[int], threads: list[int], repeats: int, label: str) -> list[dict]:
    import torch

    rows = []
    for count in limbs:
        params, _, _, evaluator, a, b = our_setup(count)
        setting = f"N=2^16, {count} Q primes, alpha=11 (46-bit P), dnum={-(-count // 11)}, {PRESET}"
        for nthreads in threads:
            torch.set_num_threads(nthreads)
            for op, fn in (("HMult + relin", lambda: evaluator.mul_relin(a, b)),  # noqa: B023 (timed at once)
                           ("HRotate", lambda: evaluator.rotate(a, 1))):  # noqa: B023
                rows.append({"lib": label, "op": op, "limbs": count, "threads": nthreads, "setting": setting,
                             "cpu_path": our_cpu_path(), **timed(fn, repeats)})
    return rows


def breakdown(limbs: int, threads: list[int], repeats: int) -> list[dict]:
    """Time of each step of one key switch (HMult's relinearization) at the sizes it uses,
    measured as separate calls; their sum is compared with the whole key switch."""
    import torch

    from fhe_core import ops, rlwe

    params, ctx, keys, evaluator, a, b = our_setup(limbs)
    level = limbs - 1
    t = ctx.tables(level)
    key = keys.relin_key("bench")
    d = a.data[1]
    coeffs = t.q.intt(d)
    digits = rlwe.decompose_mod_up(ctx, d, level)
    extended = rlwe.inner_product(ctx, digits, key, level)
    alpha, n = ctx.alpha, ctx.n
    c_p = torch.empty((2, alpha, n), dtype=torch.int64)
    for c in range(2):
        ctx.p_basis.intt(extended[c, :alpha], out=c_p[c])
    converted = t.p_to_q(c_p, exact=True)
    converted_ntt, scratch = torch.empty_like(converted), torch.empty_like(digits)
    steps = {
        "ModUp: INTT of d (l+1 limbs)": lambda: t.q.intt(d),
        "ModUp: Conv of every digit": lambda: [
            ops.bconv(coeffs[e.start:e.stop], e.src_moduli, p.basis.moduli, e.qhat_inv, e.qhat_inv_shoup, p.qhat_mod_p)
            for e in t.digits for p in e.parts],
        "ModUp: NTT of the converted rows": lambda: [
            p.basis.ntt(digits[j, p.start:p.stop], out=scratch[j, p.start:p.stop])
            for j, e in enumerate(t.digits) for p in e.parts],
        "inner product": lambda: rlwe.inner_product(ctx, digits, key, level),
        "ModDown: INTT of the P rows": lambda: [ctx.p_basis.intt(extended[c, :alpha], out=c_p[c]) for c in range(2)],
        "ModDown: exact Conv P -> Q": lambda: t.p_to_q(c_p, exact=True),
        "ModDown: NTT over Q": lambda: t.q.ntt(converted, out=converted_ntt),
        "ModDown: (c - conv) * P^-1": lambda: [ops.sub_mul_const(extended[c, alpha:], coeffs, t.p_inv, t.p_inv_shoup,
                                                                 t.q.moduli) for c in range(2)],
        "key switch (whole)": lambda: rlwe.key_switch(ctx, d, key, level),
        "HMult + relin (whole)": lambda: evaluator.mul_relin(a, b),
    }
    rows = []
    for nthreads in threads:
        torch.set_num_threads(nthreads)
        for name, fn in steps.items():
            rows.append({"step": name, "threads": nthreads, "limbs": limbs, **timed(fn, repeats)})
    return rows


def cpu_description() -> str:
    """The CPU's model name and its vector extensions that matter here (from /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return "unknown CPU"
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    wanted = ("avx2", "fma", "avx512f", "avx512ifma")
    return f"{model}, {os.cpu_count()} vCPUs, flags: {' '.join(f for f in wanted if f in flags)}"


def write_json(path: str, rows: list[dict], env: dict) -> None:
    commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    common = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "device": cpu_description(),
              "commit": commit, "load": os.getloadavg(), "env": env}
    with open(path, "a") as f:
        for row in rows:
            f.write(json.dumps({**common, **row}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limbs", type=int, nargs="+", default=[31])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--dnum", type=int, default=3, help="OpenFHE's number of large digits (0: its default)")
    parser.add_argument("--openfhe-python", help="an interpreter with openfhe-python installed")
    parser.add_argument("--breakdown", action="store_true", help="ours only: time per key-switching step")
    parser.add_argument("--label", default="fhe-ml", help="our rows' library column (e.g. the checkout measured)")
    parser.add_argument("--skip-ours", action="store_true", help="OpenFHE only")
    parser.add_argument("--json", help="append one JSON line per row (date, CPU, load, commit) to this file")
    parser.add_argument("--worker-openfhe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker_openfhe:
        for limbs in args.limbs:
            for row in openfhe_rows(limbs, args.dnum, args.repeats):
                print(json.dumps(row), flush=True)
        return
    if not os.environ.get("PYTHONPATH"):  # this checkout, else the one on PYTHONPATH (before / after runs)
        sys.path.insert(0, os.path.join(HERE, ".."))
    if args.breakdown:
        import fhe_core

        print(f"fhe_core from {os.path.dirname(fhe_core.__file__)}, CPU path {our_cpu_path()}")
        for row in breakdown(args.limbs[0], args.threads, args.repeats):
            print(f"{row['threads']} thr  {row['step']:34s} median {row['median_ms']:8.2f}  "
                  f"best {row['best_ms']:8.2f}  CPU {row['cpu_ms']:8.2f} ms")
        return
    rows = [] if args.skip_ours else our_rows(args.limbs, args.threads, args.repeats, args.label)
    if args.openfhe_python:
        rows += run_openfhe(args.openfhe_python, args.limbs, args.threads, args.dnum, args.repeats)
    env = {k: os.environ[k] for k in ("FHE_CORE_CPU_SIMD", "FHE_CORE_CPU_CACHE_MB") if k in os.environ}
    print(f"load average (1, 5, 15 min) at the end: {os.getloadavg()}; environment: {env}")
    if args.json:
        write_json(args.json, rows, env)
    print("| library | op | Q limbs | threads | median (ms) | best (ms) | CPU time (ms) | setting |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in sorted(rows, key=lambda r: (r["op"], r["limbs"], r["threads"], r["lib"])):
        print(f"| {r['lib']} | {r['op']} | {r['limbs']} | {r['threads']} | {r['median_ms']:.1f} | "
              f"{r['best_ms']:.1f} | {r['cpu_ms']:.1f} | {r['setting']} |")


if __name__ == "__main__":
    main()
