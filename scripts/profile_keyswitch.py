"""Where the time of one HMult + relin and one HRotate goes, kernel by kernel (GPU).

Runs each op a few times under torch.profiler (CUDA activity) at the N16QP1766L30D3 preset, top level, with the
context's kernel plan and with the reference plan (fhe_core.ops.KernelPlan), and prints per kernel: launches and
device time per op. A planning tool, not a benchmark (bench.py times). Programmatic dependent launch is off here
(FHE_CORE_PDL=0, set before the extension loads) unless --pdl: with it a kernel's profiled time includes its wait in
its predecessor's tail.

    python scripts/profile_keyswitch.py              # HMult + relin and HRotate, default and reference plans
    python scripts/profile_keyswitch.py --bootstrap  # one bootstrap at N16_H192_FULL, kernels grouped
    python scripts/profile_keyswitch.py --pdl        # the same with programmatic dependent launch
    ncu --profile-from-start off -k regex:ntt python scripts/profile_keyswitch.py --ncu
                                                     # one HMult and one HRotate (default plan) between
                                                     # cudaProfilerStart/Stop, nothing printed
"""
from __future__ import annotations

import argparse
import collections
import os
import sys

REPEATS = 5


def kernel_table(fn) -> list[tuple[str, int, float]]:
    """(kernel, launches per call, device us per call) of fn, largest first."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(REPEATS):
            fn()
        torch.cuda.synchronize()
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            name = event.name.replace("(anonymous namespace)::", "").replace("void ", "")
            if name.endswith(")"):  # drop the argument list, keep template arguments (an op's enum value)
                name = name[:name.rfind("(")]
            name = name[:90]
            totals[name][0] += 1
            totals[name][1] += event.time_range.elapsed_us()
    rows = [(name, round(count / REPEATS), us / REPEATS) for name, (count, us) in totals.items()]
    return sorted(rows, key=lambda r: -r[2])


def print_table(title: str, rows: list[tuple[str, int, float]]) -> None:
    print(f"\n## {title}: {sum(r[2] for r in rows):.1f} us of kernels, {sum(r[1] for r in rows)} launches\n")
    print("| kernel | launches | device us |\n| --- | ---: | ---: |")
    for name, count, us in rows:
        print(f"| {name} | {count} | {us:.1f} |")


def profile_bootstrap() -> None:
    """The kernels of one bootstrap at N16_H192_FULL (2^15 slots), grouped by name: default and reference plans."""
    import numpy as np

    from fhe_core import rlwe
    from fhe_core.ckks import Encoder, Encryptor, rlwe_context
    from fhe_core.ckks.bootstrapping import N16_H192_FULL, Bootstrapper, bootstrapping_galois_elements
    from fhe_core.ops import KernelPlan

    params = N16_H192_FULL.params(device="cuda")
    ctx = rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx)
    keys = rlwe.gen_eval_keys(ctx, sk, bootstrapping_galois_elements(params, N16_H192_FULL))
    encoder, encryptor = Encoder(params), Encryptor(params, sk)
    z = np.random.default_rng(1).uniform(-1, 1, N16_H192_FULL.slots)
    for label, plan in (("default plan", None), ("reference plan", KernelPlan.reference())):
        boot = Bootstrapper(params, N16_H192_FULL, keys, plan=plan)
        ct = encryptor.encrypt(encoder.encode(z, level=boot.min_input_level, slots=N16_H192_FULL.slots))
        print_table(f"bootstrap, N16_H192_FULL, {label}", kernel_table(lambda: boot.bootstrap(ct)))  # noqa: B023


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", action="store_true", help="profile one bootstrap instead")
    parser.add_argument("--pdl", action="store_true", help="keep programmatic dependent launch on")
    parser.add_argument("--ncu", action="store_true",
                        help="run one HMult + relin and one HRotate between cudaProfilerStart/Stop (for ncu)")
    args = parser.parse_args()
    if not args.pdl:
        os.environ["FHE_CORE_PDL"] = "0"  # read once, when the extension loads (below)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import numpy as np
    import torch

    from fhe_core import rlwe
    from fhe_core.ckks import Encoder, Encryptor, Evaluator, galois_elements, rlwe_context
    from fhe_core.ops import KernelPlan
    from fhe_core.params import preset

    if args.bootstrap:
        profile_bootstrap()
        return
    params = preset("N16QP1766L30D3", device="cuda")
    ctx = rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx)
    keys = rlwe.gen_eval_keys(ctx, sk, galois_elements(params.n, [1]))
    encoder, encryptor = Encoder(params), Encryptor(params, sk)
    rng = np.random.default_rng(1)
    z = rng.uniform(-1, 1, params.slots) + 1j * rng.uniform(-1, 1, params.slots)
    a, b = encryptor.encrypt(encoder.encode(z)), encryptor.encrypt(encoder.encode(z[::-1].copy()))
    evaluators = {"default plan": Evaluator(params, keys),
                  "reference plan": Evaluator(params, keys, plan=KernelPlan.reference())}
    if args.ncu:
        ev = evaluators["default plan"]
        for fn in (lambda: ev.mul_relin(a, b), lambda: ev.rotate(a, 1)):  # warm-up: caches outside the range
            fn()
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        ev.mul_relin(a, b)
        ev.rotate(a, 1)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        return
    for label, ev in evaluators.items():
        print_table(f"HMult + relin, {label}", kernel_table(lambda: ev.mul_relin(a, b)))  # noqa: B023
        print_table(f"HRotate, {label}", kernel_table(lambda: ev.rotate(a, 1)))  # noqa: B023


if __name__ == "__main__":
    main()
