// Which arithmetic the CPU kernels use, chosen from the CPU's features and the FHE_CORE_CPU_SIMD environment
// variable (read once, at the first kernel call; tests switch paths between calls with set_cpu_path):
//   * kIfma:   AVX-512 IFMA (cpu/ifma.h) where the primes allow it; the default on CPUs that have it;
//   * kAvx2:   the portable vector path: AVX2 + FMA double-precision NTT rows, Conv rows, inner products and
//              products for primes below 2^46 (cpu/avx2.h), the scalar loops elsewhere; the default on other
//              x86-64 CPUs with AVX2 and FMA, and what FHE_CORE_CPU_SIMD=avx2 forces on an IFMA machine;
//   * kScalar: 64 x 64 -> 128-bit scalar products only (every CPU); FHE_CORE_CPU_SIMD=0 forces it.
// A requested path the CPU cannot run falls back to the best one below it. Every path gives the same canonical
// residues word for word (tests/fhe_core/ops/test_cpu_simd.py runs each one the machine has), so a kernel reads the
// path once per call and a switch between calls, even while another thread runs a kernel, changes no result.
#pragma once

// The vector paths are compiled on x86-64 with GCC or Clang (per-function target attributes, chosen at run time);
// elsewhere only the scalar path exists. One guard for both vector paths' code (ifma.h, avx2.h).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FHE_CPU_X86 1
#else
#define FHE_CPU_X86 0
#endif

namespace fhe::cpu {

enum class CpuPath : int { kScalar = 0, kAvx2 = 1, kIfma = 2 };

CpuPath cpu_path();

// Switches the process to `path` for the kernel calls that start afterwards; false (and no switch) when this CPU
// cannot run it.
bool set_cpu_path(CpuPath path);

// The best path this CPU supports (ignoring FHE_CORE_CPU_SIMD).
CpuPath cpu_path_supported();

}  // namespace fhe::cpu
