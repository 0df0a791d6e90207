// Which arithmetic the CPU kernels use, chosen once per process from the CPU's features and the
// FHE_CORE_CPU_SIMD environment variable (read at the first kernel call):
//   * kIfma:   AVX-512 IFMA (cpu/ifma.h) where the primes allow it; the default on CPUs that have it;
//   * kAvx2:   the portable vector path: AVX2 + FMA double-precision butterflies for NTT primes below 2^46
//              (cpu/avx2.h), scalar 128-bit products elsewhere; the default on other x86-64 CPUs with AVX2 and
//              FMA, and what FHE_CORE_CPU_SIMD=avx2 forces on an IFMA machine;
//   * kScalar: 64 x 64 -> 128-bit scalar products only (every CPU); FHE_CORE_CPU_SIMD=0 forces it.
// A requested path the CPU cannot run falls back to the best one below it. Every path gives the same canonical
// residues word for word (tests/fhe_core/ops/test_cpu_simd.py runs each one the machine has).
#pragma once

namespace fhe::cpu {

enum class CpuPath : int { kScalar = 0, kAvx2 = 1, kIfma = 2 };

CpuPath cpu_path();

// The best path this CPU supports (ignoring FHE_CORE_CPU_SIMD).
CpuPath cpu_path_supported();

inline bool ifma_enabled() { return cpu_path() == CpuPath::kIfma; }
inline bool avx2_enabled() { return cpu_path() >= CpuPath::kAvx2; }

}  // namespace fhe::cpu
