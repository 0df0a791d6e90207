// How the CPU kernels split their work over torch's intra-op thread pool (at::parallel_for).
//
// Waking the pool costs microseconds when a core is free, but on a machine shared with other jobs a
// parallel region also waits for its slowest thread to be scheduled (we measured a flat ~8 ms per
// region on the 2-vCPU CI machine while another process held the second vCPU). So a kernel goes
// parallel only in tasks of at least kMinParallelWords residues: the small rings of the tests run
// inline, and an N = 2^16 limb is a task of its own.
#pragma once

#include <algorithm>
#include <cstdint>

namespace fhe::cpu {

constexpr int64_t kMinParallelWords = int64_t{1} << 16;

// The grain (in tasks) for tasks that each touch `words_per_task` residues.
inline int64_t parallel_grain(int64_t words_per_task) {
  return std::max<int64_t>(1, kMinParallelWords / std::max<int64_t>(1, words_per_task));
}

}  // namespace fhe::cpu
