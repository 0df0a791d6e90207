"""Engine demo: an RNS negacyclic product checked against Python big integers, then timings.

    python -m fhe_core.demo            # CPU, and CUDA too when a GPU is present
    python -m fhe_core.demo --device cpu

Step 1 multiplies two random integer polynomials with 80-bit coefficients modulo X^N + 1 the
way the library does it: split each coefficient into residues modulo four 55-bit NTT primes,
multiply limb by limb in the NTT domain, transform back, and rebuild the integers by the
Chinese remainder theorem. The result must equal the schoolbook product in Python integers.
Step 2 times the engine's kernels at the size of a real CKKS ciphertext (N = 2^16, 30 limbs).
"""
from __future__ import annotations

import argparse
import secrets
import statistics
import time
from math import prod

import torch

from fhe_core import ops
from fhe_core.ring import BasisConverter, RNSBasis, generate_primes

CHECK_N = 1 << 10
COEFF_BITS = 80


def schoolbook(a: list[int], b: list[int]) -> list[int]:
    """a * b mod X^N + 1 over the integers."""
    n = len(a)
    out = [0] * n
    for i, ai in enumerate(a):
        for j, bj in enumerate(b):
            if i + j < n:
                out[i + j] += ai * bj
            else:
                out[i + j - n] -= ai * bj
    return out


def crt_centered(columns: list[list[int]], primes: tuple[int, ...]) -> list[int]:
    """Integers in (-Q/2, Q/2] from their residue columns."""
    big_q = prod(primes)
    weights = [(big_q // q) * pow(big_q // q, -1, q) for q in primes]
    values = []
    for residues in zip(*columns):
        x = sum(r * w for r, w in zip(residues, weights)) % big_q
        values.append(x - big_q if x > big_q // 2 else x)
    return values


def check_product(device: str) -> None:
    primes = generate_primes([55] * 4, CHECK_N)  # Q ~ 2^220 > 2 * N * (2^80)^2
    basis = RNSBasis.get(primes, CHECK_N, device)
    bound = 1 << COEFF_BITS
    a = [secrets.randbelow(2 * bound) - bound for _ in range(CHECK_N)]
    b = [secrets.randbelow(2 * bound) - bound for _ in range(CHECK_N)]
    started = time.perf_counter()
    a_ntt, b_ntt = basis.ntt(basis.to_residues(a)), basis.ntt(basis.to_residues(b))
    product = basis.intt(ops.mul(a_ntt, b_ntt, basis.moduli))
    rns_result = crt_centered(product.cpu().tolist(), basis.primes)
    rns_ms = (time.perf_counter() - started) * 1e3
    started = time.perf_counter()
    expected = schoolbook(a, b)
    python_ms = (time.perf_counter() - started) * 1e3
    if rns_result != expected:
        raise SystemExit(f"MISMATCH on {device}: the RNS product differs from the big-integer product")
    print(f"  {device:4s}: N={CHECK_N}, {COEFF_BITS}-bit coefficients, {len(primes)} primes of 55 bits: "
          f"RNS/NTT product == Python big-integer product  (RNS {rns_ms:.1f} ms incl. CRT, "
          f"schoolbook {python_ms:.0f} ms)")


def median_time(fn, device: str, repeats: int) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def timing_table(device: str) -> None:
    n, limbs = 1 << 16, 30
    basis = RNSBasis.get(generate_primes([50] * limbs, n), n, device)
    x = ops.sample_uniform(basis.moduli, n, secrets.token_bytes(32), 0)
    y = ops.sample_uniform(basis.moduli, n, secrets.token_bytes(32), 1)
    primes = generate_primes([50] * 10 + [60] * 30, n)
    conv = BasisConverter.get(RNSBasis.get(primes[:10], n, device), RNSBasis.get(primes[10:], n, device))
    small = ops.sample_uniform(conv.src.moduli, n, secrets.token_bytes(32), 2)
    rows = [
        ("forward NTT", lambda: basis.ntt(x)),
        ("inverse NTT", lambda: basis.intt(x)),
        ("element-wise mul", lambda: ops.mul(x, y, basis.moduli)),
        ("automorphism (NTT domain)", lambda: ops.automorphism_ntt(x, basis.moduli, 25)),
        ("basis conversion 10 -> 30 limbs", lambda: conv(small)),
        ("sample uniform", lambda: ops.sample_uniform(basis.moduli, n, b"\x01" * 32, 3)),
    ]
    repeats = 20 if device == "cuda" else 3
    print(f"\n  {device}: N = 2^16, {limbs} limbs of 50 bits (one call from Python, median of {repeats})")
    print(f"  {'operation':34s} {'time':>12s}")
    for name, fn in rows:
        seconds = median_time(fn, device, repeats)
        shown = f"{seconds * 1e6:.0f} us" if seconds < 1e-3 else f"{seconds * 1e3:.1f} ms"
        print(f"  {name:34s} {shown:>12s}")


def main() -> None:
    parser = argparse.ArgumentParser(description="fhe_core engine demo")
    parser.add_argument("--device", choices=["cpu", "cuda", "all"], default="all")
    args = parser.parse_args()
    devices = ["cpu", "cuda"] if args.device == "all" else [args.device]
    if "cuda" in devices and not (ops.cuda_built() and torch.cuda.is_available()):
        if args.device == "cuda":
            raise SystemExit("no CUDA device (or the extension was built without CUDA): use --device cpu")
        devices.remove("cuda")
    print("1. Negacyclic product in RNS, checked against Python big integers")
    for device in devices:
        check_product(device)
    print("\n2. Kernel timings")
    for device in devices:
        timing_table(device)
    print("\nFull tables with bandwidth figures: python scripts/bench.py (see docs/benchmarks.md)")


if __name__ == "__main__":
    main()
