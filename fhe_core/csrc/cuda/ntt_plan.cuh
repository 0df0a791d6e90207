// How an NTT launches (host side, cuda/ntt.cu and cuda/keyswitch.cu): which kernels run for a transform's arguments
// (NttPlan) and the grid and block shapes of the columns and rows kernels (LaunchShape).
#pragma once

#include <algorithm>
#include <cstdint>

#include "ntt_rounds.cuh"

namespace fhe::cuda {

// Target threads per rows-kernel block. Small blocks on purpose: the kernels are latency-bound (ncu on H200: ~50%
// issue slots busy, 50% occupancy at 64 registers), and more, smaller blocks per SM keep warps issuing while others
// wait at a barrier.
constexpr int kRowThreads = 128;

struct Geometry {
  int k1, k2;
};
inline Geometry split(int log_n) { return {log_n / 2, log_n - log_n / 2}; }

// The tuned kernels' 16-byte accesses need every pointer they move 8 words through 16-byte aligned (torch's
// allocations are; a view with an odd word offset takes the reference kernels).
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
inline bool direct_rows_aligned(const NttArgs& a) {
  const NttEpilogue& e = a.epilogue;
  const bool epilogue_aligned = e.sub_from == nullptr || (aligned16(e.sub_from) && e.batch_stride % 2 == 0 &&
                                                          (e.add == nullptr || aligned16(e.add)));
  return aligned16(a.in) && aligned16(a.out) && a.in_batch_stride % 2 == 0 && epilogue_aligned &&
         (a.permuted == nullptr || aligned16(a.permuted)) && (a.times == nullptr || aligned16(a.times));
}

// Which kernels a transform runs: the reference ones (KernelPlan::tuned_ntt off, or inputs the 16-byte paths cannot
// take) or the tuned ones (cuda/ntt.cu, NttKernel): the rows kernel limb-major (backwards in the forward, where it
// runs second) and the columns kernel batch-major, the row lengths compiled in at N = 2^16, FP64 butterflies with
// KernelPlan::fp64_butterflies.
struct NttPlan {
  bool tuned = false;
  int first_order = 0, second_order = 0;  // grid_row orders of the kernel run first / second
  bool fixed16 = false;                   // N = 2^16 kernels with the row length a compile-time 8
  bool fp64 = false;                      // FP64 butterflies for the primes that fit
};

inline NttPlan ntt_plan(const NttArgs& a, bool forward) {
  NttPlan p;
  if (!a.plan.tuned_ntt || !direct_rows_aligned(a) || !aligned16(a.table)) return p;
  p.tuned = true;
  p.first_order = forward ? 0 : 1;
  p.second_order = forward ? 2 : 0;
  p.fixed16 = a.log_n == 16;
  p.fp64 = a.plan.fp64_butterflies;
  return p;
}

// The launch shapes of the columns and rows kernels for `rows` rows of N = 2^log_n (the rows grid's y is the
// caller's).
struct LaunchShape {
  Geometry g;
  dim3 col_grid;
  unsigned col_threads;
  size_t col_smem;
  u32 rows_per_block;  // rows of 2^k2 words per rows-kernel block
  unsigned row_blocks, row_threads;
  u32 tile;  // the words of one rows-kernel block (before RowLayout's padding)
};

inline LaunchShape launch_shape(int log_n, int rows) {
  const Geometry g = split(log_n);
  const u32 n = 1u << log_n;
  const u32 len = 1u << g.k2;
  const u32 rows_per_block = std::min<u32>(1u << g.k1, std::max<u32>(1u, kRowThreads / (len / kPerThread)));
  return LaunchShape{g,
                     dim3((n >> g.k1) / kColumnsPerBlock, static_cast<unsigned>(rows)),
                     kColumnsPerBlock * ((1u << g.k1) / kPerThread),
                     static_cast<size_t>(kColumnsPerBlock) * (1u << g.k1) * sizeof(u64),
                     rows_per_block,
                     (1u << g.k1) / rows_per_block,
                     rows_per_block * (len / kPerThread),
                     rows_per_block * len};
}

// The tuned forward columns kernel of `plan` on a's rows (cuda/ntt.cu; ModUp's NTT before the fused inner product).
void launch_tuned_forward_columns(const NttArgs& a, const NttPlan& plan, const LaunchShape& shape, cudaStream_t s);

}  // namespace fhe::cuda
