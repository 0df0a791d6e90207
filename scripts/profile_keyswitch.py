"""Where the time of one HMult + relin and one HRotate goes, kernel by kernel (GPU).

Runs each op a few times under torch.profiler (CUDA activity) at the N16QP1766L30D3 preset, top
level, for the current kernel variants and for the reference ones (ops.kernel_variant), and prints
per kernel: launches and device time per op. A planning tool, not a benchmark (bench.py times).

    python scripts/profile_keyswitch.py
    python scripts/profile_keyswitch.py --conv 1 2   # instead: one table per tensor-core Conv variant
"""
from __future__ import annotations

import argparse
import collections
import os
import sys

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fhe_core import ops, rlwe  # noqa: E402
from fhe_core.ckks import Encoder, Encryptor, Evaluator, galois_elements, rlwe_context  # noqa: E402
from fhe_core.params import preset  # noqa: E402

REPEATS = 5


def kernel_table(fn) -> list[tuple[str, int, float]]:
    """(kernel, launches per call, device us per call) of fn, largest first."""
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(REPEATS):
            fn()
        torch.cuda.synchronize()
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            name = event.name.replace("(anonymous namespace)::", "").replace("void ", "").split("(")[0][:70]
            totals[name][0] += 1
            totals[name][1] += event.time_range.elapsed_us()
    rows = [(name, round(count / REPEATS), us / REPEATS) for name, (count, us) in totals.items()]
    return sorted(rows, key=lambda r: -r[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conv", type=int, nargs="+", metavar="VARIANT",
                        help='profile these ops.kernel_variant("conv") values instead of current / before')
    args = parser.parse_args()
    params = preset("N16QP1766L30D3", device="cuda")
    ctx = rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx)
    keys = rlwe.gen_eval_keys(ctx, sk, galois_elements(params.n, [1]))
    encoder, encryptor, evaluator = Encoder(params), Encryptor(params, sk), Evaluator(params, keys)
    rng = np.random.default_rng(1)
    z = rng.uniform(-1, 1, params.slots) + 1j * rng.uniform(-1, 1, params.slots)
    a, b = encryptor.encrypt(encoder.encode(z)), encryptor.encrypt(encoder.encode(z[::-1].copy()))
    ops_to_profile = {"HMult + relin": lambda: evaluator.mul_relin(a, b), "HRotate": lambda: evaluator.rotate(a, 1)}
    before = {"conv": 0, "mod_up": 0, "mod_down": 0, "tensor": 0}
    runs = (("current variants", {}), ("before issue 14", before))
    if args.conv:
        runs = tuple((f"conv v{v}", {"conv": v}) for v in args.conv)
    for label, variants in runs:
        previous = {name: ops.kernel_variant(name, value) for name, value in variants.items()}
        try:
            for op, fn in ops_to_profile.items():
                rows = kernel_table(fn)
                print(f"\n## {op}, {label}: {sum(r[2] for r in rows):.1f} us of kernels, "
                      f"{sum(r[1] for r in rows)} launches\n")
                print("| kernel | launches | device us |\n| --- | ---: | ---: |")
                for name, count, us in rows:
                    print(f"| {name} | {count} | {us:.1f} |")
        finally:
            for name, value in previous.items():
                ops.kernel_variant(name, value)


if __name__ == "__main__":
    main()
