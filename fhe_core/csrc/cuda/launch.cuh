// Helpers shared by the CUDA launchers: error checks, device selection and programmatic dependent launch.
#pragma once

#include <cuda_runtime.h>

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

// ---- programmatic dependent launch (ops.kernel_variant("pdl"); Hopper and later) ----
// A kernel launched with the programmatic-serialization attribute may be scheduled once every block of the kernel
// before it in the stream has executed griddepcontrol.launch_dependents (pdl_trigger) or exited. Before it reads
// anything a predecessor produced, and before its first global store (the caching allocator may hand it a buffer
// that the predecessor still reads), every block executes pdl_wait(): it returns once the predecessor grid has
// completed and its writes are visible. Every block of such a kernel waits, even one that has nothing to do (a grid
// that completed without waiting would not imply that its own predecessor had), so the chain of completions stays
// transitive. Both instructions are no-ops in a kernel launched without the attribute (pdl 0, or <<<>>>); kernels
// not converted keep <<<>>> and wait for their predecessor in full, as before.
//
// The variants: 1, every converted launch carries the attribute and no kernel triggers early (a kernel is
// launched when its predecessor's blocks have all exited: the launch's own latency is hidden); 2, the same, and
// the element-wise, automorphism, inner-product and bootstrap-circuit kernels (launch_triggering) trigger at their
// start, so that their successor's blocks start in their tail. Measured and removed (H200, docs/performance.md,
// "Issue 14, session 5"): the NTT, Conv and fused inner-product kernels triggering at their start (HMult + relin
// +15 us, HRotate +10 us), after their wait (the same), and only the inverse NTT's columns kernel before the Conv
// (+9 us): a large kernel started in its predecessor's tail runs slower than one launched after it.
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

// kernel_variant("pdl") on `device`: 0 below compute capability 9.0 (read once per device).
inline int pdl_variant(int device) {
  const int variant = kernel_variant(Variant::kPdl);
  if (variant == 0) return 0;
  constexpr int kDevices = 64;
  static int major[kDevices] = {};  // 0: not read yet
  if (device < 0 || device >= kDevices) return 0;
  if (major[device] == 0) {
    int m = 0;
    check(cudaDeviceGetAttribute(&m, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
    major[device] = m;
  }
  return major[device] >= 9 ? variant : 0;
}

// kernel<<<grid, block, smem, stream>>>(args...) through cudaLaunchKernelEx, with the programmatic-serialization
// attribute where pdl_variant != 0 (the kernel must then pdl_wait() as above); checks the launch (`name` in the
// error). Returns the variant.
template <class... Params, class... Args>
int launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const char* name,
           Args&&... args) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  const int variant = pdl_variant(device);
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = variant != 0 ? &attribute : nullptr;
  config.numAttrs = variant != 0 ? 1 : 0;
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (err != cudaSuccess) cudaGetLastError();  // (cleared: a later check_launch must not report it again)
  check(err, name);
  return variant;
}

// launch(kernel, ..., args..., early) for a kernel whose last parameter is pdl_trigger's `early`: true with pdl 2.
template <class... Params, class... Args>
void launch_triggering(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                       const char* name, Args&&... args) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  launch(kernel, grid, block, smem, stream, name, std::forward<Args>(args)..., pdl_variant(device) == 2);
}

}  // namespace fhe::cuda
