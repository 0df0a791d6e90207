"""Where the time of one HMult + relin and one HRotate goes, kernel by kernel (GPU).

Runs each op a few times under torch.profiler (CUDA activity) at the N16QP1766L30D3 preset, top
level, for the current kernel variants and for the reference ones (ops.kernel_variant), and prints
per kernel: launches and device time per op. A planning tool, not a benchmark (bench.py times).

    python scripts/profile_keyswitch.py
    python scripts/profile_keyswitch.py --conv 1 2   # instead: one table per tensor-core Conv variant
    python scripts/profile_keyswitch.py --ntt 0 4    # instead: one table per NTT variant (also with
                                                     # --bootstrap)
    python scripts/profile_keyswitch.py --tensor-fuse 0 1  # instead: one table per tensor_fuse variant
    python scripts/profile_keyswitch.py --ks-fuse 0 1 2 3  # instead: one table per ks_fuse variant
    python scripts/profile_keyswitch.py --inverse 0 1 2 3  # instead: one table per inverse variant
    python scripts/profile_keyswitch.py --fp64 0 1   # instead: one table per fp64 variant
    python scripts/profile_keyswitch.py --pdl 0 1    # instead: one table per pdl value (with pdl 1 a kernel's
                                                     # time includes its wait in its predecessor's tail: the
                                                     # other tables run at pdl 0)
    python scripts/profile_keyswitch.py --bootstrap  # one bootstrap at N16_H192_FULL, kernels grouped
    ncu --profile-from-start off -k regex:ntt python scripts/profile_keyswitch.py --ncu
                                                     # one HMult and one HRotate between
                                                     # cudaProfilerStart/Stop, nothing printed
                                                     # (with --tensor-fuse V: at that variant; with
                                                     # --ks-fuse or --inverse: once per listed variant)
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
# The kernel variants with a command-line option of their own (one profile table per listed value).
PROFILED_VARIANTS = ("conv", "ntt", "galois", "tensor_fuse", "ks_fuse", "inverse", "pdl", "fp64")


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


def profile_bootstrap(ntt_variants: list[int] | None = None) -> None:
    """The kernels of one bootstrap at N16_H192_FULL (2^15 slots), grouped by name; with ntt_variants,
    one table per ops.kernel_variant("ntt") value."""
    from fhe_core.ckks.bootstrapping import N16_H192_FULL, Bootstrapper, bootstrapping_galois_elements

    params = N16_H192_FULL.params(device="cuda")
    ctx = rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx)
    keys = rlwe.gen_eval_keys(ctx, sk, bootstrapping_galois_elements(params, N16_H192_FULL))
    boot = Bootstrapper(params, N16_H192_FULL, keys)
    encoder, encryptor = Encoder(params), Encryptor(params, sk)
    z = np.random.default_rng(1).uniform(-1, 1, N16_H192_FULL.slots)
    ct = encryptor.encrypt(encoder.encode(z, level=boot.min_input_level, slots=N16_H192_FULL.slots))
    with ops.use_kernel_variant("pdl", 0):  # (as main's tables: with pdl a kernel's time would include its wait)
        if not ntt_variants:
            for fused in (3, 0):  # the circuit's fused passes (the default), and the composed ops before them
                with ops.use_kernel_variant("fused", fused):
                    print_table(f"bootstrap, N16_H192_FULL, fused v{fused}", kernel_table(lambda: boot.bootstrap(ct)))
        for variant in ntt_variants or ():
            with ops.use_kernel_variant("ntt", variant):
                print_table(f"bootstrap, N16_H192_FULL, ntt v{variant}", kernel_table(lambda: boot.bootstrap(ct)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name in PROFILED_VARIANTS:  # --conv, --ntt, ... --pdl: one table per listed value instead
        extra = " (else every table runs at pdl 0)" if name == "pdl" else " instead of current / before"
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, nargs="+", metavar="VARIANT",
                            help=f'profile these ops.kernel_variant("{name}") values{extra}')
    parser.add_argument("--bootstrap", action="store_true", help="profile one bootstrap instead")
    parser.add_argument("--ncu", action="store_true",
                        help="run one HMult + relin and one HRotate between cudaProfilerStart/Stop (for ncu)")
    args = parser.parse_args()
    if args.bootstrap:
        profile_bootstrap(args.ntt)
        return
    params = preset("N16QP1766L30D3", device="cuda")
    ctx = rlwe_context(params)
    sk = rlwe.gen_secret_key(ctx)
    keys = rlwe.gen_eval_keys(ctx, sk, galois_elements(params.n, [1]))
    encoder, encryptor, evaluator = Encoder(params), Encryptor(params, sk), Evaluator(params, keys)
    rng = np.random.default_rng(1)
    z = rng.uniform(-1, 1, params.slots) + 1j * rng.uniform(-1, 1, params.slots)
    a, b = encryptor.encrypt(encoder.encode(z)), encryptor.encrypt(encoder.encode(z[::-1].copy()))
    ops_to_profile = {"HMult + relin": lambda: evaluator.mul_relin(a, b), "HRotate": lambda: evaluator.rotate(a, 1)}
    if args.ncu:  # (with --ks-fuse or --inverse: the two ops once per variant, in the same profiled range)
        tensor_fuse = args.tensor_fuse[0] if args.tensor_fuse else ops.kernel_variant("tensor_fuse")
        with ops.use_kernel_variant("tensor_fuse", tensor_fuse):
            for fn in ops_to_profile.values():  # warm-up: caches and constants outside the profiled range
                fn()
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            name, variants = ("inverse", args.inverse) if args.inverse else ("ks_fuse", args.ks_fuse or [None])
            for variant in variants:
                with ops.use_kernel_variant(name, ops.kernel_variant(name) if variant is None else variant):
                    for fn in ops_to_profile.values():
                        fn()
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
        return
    before = {"conv": 0, "mod_up": 0, "mod_down": 0, "tensor": 0, "ntt": 0, "galois": 0, "tensor_fuse": 0, "ks_fuse": 0,
              "inverse": 0, "pdl": 0}
    runs = (("current variants", {}), ("before issue 14", before))
    for name in PROFILED_VARIANTS:  # (the last option given decides, in this order)
        if getattr(args, name):
            runs = tuple((f"{name} v{v}", {name: v}) for v in getattr(args, name))
    for label, variants in runs:
        # pdl 1 starts a kernel in its predecessor's last wave, where it waits: its profiled time would include that
        variants = {"pdl": 0, **variants}
        previous = {name: ops.kernel_variant(name, value) for name, value in variants.items()}
        try:
            for op, fn in ops_to_profile.items():
                print_table(f"{op}, {label}", kernel_table(fn))
        finally:
            for name, value in previous.items():
                ops.kernel_variant(name, value)


if __name__ == "__main__":
    main()
