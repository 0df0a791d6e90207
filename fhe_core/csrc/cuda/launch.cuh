// Helpers shared by the CUDA launchers: error checks, device selection and programmatic dependent launch.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "../kernels.h"

namespace fhe::cuda {

inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("fhe_core CUDA error in ") + what + ": " + cudaGetErrorString(err));
}

// Check the last launch: call right after every <<<...>>>.
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

// Makes the tensor's device current for this runtime while a launcher runs.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) check(cudaSetDevice(device), "cudaSetDevice");
    device_ = device;
  }
  ~DeviceScope() {
    if (previous_ != device_) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
  int device_ = 0;
};

inline cudaStream_t native(Stream s) { return static_cast<cudaStream_t>(s.handle); }

inline unsigned blocks_for(int64_t work, int per_block) {
  return static_cast<unsigned>((work + per_block - 1) / per_block);
}

// ---- programmatic dependent launch (Hopper and later) ----
// A kernel launched with the programmatic-serialization attribute may be scheduled once every block of the kernel
// before it in the stream has executed griddepcontrol.launch_dependents (pdl_trigger) or exited. Before it reads
// anything a predecessor produced, and before its first global store (the caching allocator may hand it a buffer
// that the predecessor still reads), every block executes pdl_wait(): it returns once the predecessor grid has
// completed and its writes are visible. Every block of such a kernel waits, even one that has nothing to do (a grid
// that completed without waiting would not imply that its own predecessor had), so the chain of completions stays
// transitive. Both instructions are no-ops in a kernel launched without the attribute; kernels launched with <<<>>>
// wait for their predecessor in full.
//
// Every launch() carries the attribute on compute capability 9.0 and later, and the element-wise, automorphism,
// inner-product and bootstrap-circuit kernels (launch_triggering) trigger at their start, so that their successor's
// blocks start in their tail (HMult -1.9 us, a bootstrap -0.18 ms; docs/performance.md). The NTT, Conv and fused
// inner-product kernels do not trigger early: a large kernel started in its predecessor's tail ran slower than one
// launched after it. FHE_CORE_PDL=0 at process start launches everything plainly (profiles then time each kernel
// without its wait).
#ifdef __CUDACC__
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// `early`: launch_triggering's last kernel argument (uniform over the grid).
__device__ __forceinline__ void pdl_trigger(bool early) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (early) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
#endif

// The compute capability's major number of `device` (0 for an index past kMaxDevices), asked once per device:
// a cache of a hardware fact, safe to fill from several threads (they store the same value).
constexpr int kMaxDevices = 64;
inline int compute_major(int device) {
  static std::atomic<int> major[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) return 0;
  int m = major[device].load(std::memory_order_relaxed);
  if (m == 0) {
    check(cudaDeviceGetAttribute(&m, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
    major[device].store(m, std::memory_order_relaxed);
  }
  return m;
}

// Whether launches on `device` use programmatic dependent launch: compute capability 9.0 or later, unless
// FHE_CORE_PDL=0 was set when the extension loaded (read once: the choice never changes in a process).
inline bool pdl_enabled(int device) {
  static const bool allowed = [] {
    const char* flag = std::getenv("FHE_CORE_PDL");
    return flag == nullptr || std::strcmp(flag, "0") != 0;
  }();
  return allowed && compute_major(device) >= 9;
}

// kernel<<<grid, block, smem, stream>>>(args...) through cudaLaunchKernelEx, with the programmatic-serialization
// attribute where pdl_enabled (the kernel must then pdl_wait() as above); checks the launch (`name` in the error).
// Returns whether the attribute was set.
template <class... Params, class... Args>
bool launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const char* name,
            Args&&... args) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  const bool pdl = pdl_enabled(device);
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = pdl ? &attribute : nullptr;
  config.numAttrs = pdl ? 1 : 0;
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (err != cudaSuccess) cudaGetLastError();  // (cleared: a later check_launch must not report it again)
  check(err, name);
  return pdl;
}

// launch(kernel, ..., args..., early) for a kernel whose last parameter is pdl_trigger's `early`: true where
// programmatic dependent launch is on.
template <class... Params, class... Args>
void launch_triggering(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                       const char* name, Args&&... args) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  launch(kernel, grid, block, smem, stream, name, std::forward<Args>(args)..., pdl_enabled(device));
}

}  // namespace fhe::cuda
