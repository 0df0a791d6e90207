// The kernel choices of one context (fhe_core/ops/plan.py, KernelPlan): which implementation the CUDA launchers
// run. An op takes them as an int of flag bits, decoded once into this struct, which then travels by value in the
// argument structs (NttArgs, ConvArgs). Nothing here is process state: two contexts with different plans can run
// side by side. The CPU build has one implementation of each op and ignores the plan.
#pragma once

#include <cstdint>

namespace fhe {

struct KernelPlan {
  // The tuned NTT kernels (cuda/ntt.cu: 16-byte row accesses, (w, w') twiddle pairs, unreduced butterflies,
  // N = 2^16 compiled in; the inner product in ModUp's last pass, a rotation's sigma_k and HMult's d2 read inside
  // the transforms). false: the reference kernels, and the fused ops composed of plain passes.
  bool tuned_ntt = false;
  // With tuned_ntt: the butterflies of primes below 2^46 (forward) / 2^41 (inverse) on the FP64 pipe.
  bool fp64_butterflies = false;
  // The basis conversion as a byte-sliced integer matrix product on the tensor cores (sm_80 and later).
  // false: the 128-bit multiply-accumulate kernel.
  bool tensor_core_conv = false;
};

// The bits of KernelPlan.kernel_flags (fhe_core/ops/plan.py).
constexpr int64_t kPlanTunedNtt = 1, kPlanFp64Butterflies = 2, kPlanTensorCoreConv = 4;
constexpr int64_t kPlanFlags = kPlanTunedNtt | kPlanFp64Butterflies | kPlanTensorCoreConv;

inline KernelPlan kernel_plan(int64_t flags) {
  return KernelPlan{(flags & kPlanTunedNtt) != 0, (flags & kPlanFp64Butterflies) != 0,
                    (flags & kPlanTensorCoreConv) != 0};
}

}  // namespace fhe
