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

// ---- programmatic dependent launch (ops.kernel_variant("pdl") 1; Hopper and later) ----
// A kernel launched through launch() with pdl 1 may be scheduled once every block of the kernel before it in the
// stream has executed pdl_trigger() (or exited): its blocks fill the SMs that the predecessor's last partial wave
// leaves idle and run their prologue there (index math, constant tables: moduli, twiddle pointers, Conv's B
// fragments). Before it reads anything a predecessor produced, and before its first global store (the caching
// allocator may hand it a buffer that the predecessor still reads), every block executes pdl_wait(): it returns once
// the predecessor grid has completed and its writes are visible. Every block of such a kernel waits, even one that
// has nothing to do (a grid that completed without waiting would not imply that its own predecessor had), so the
// chain of completions stays transitive. Both instructions are no-ops in a kernel launched without the attribute
// (pdl 0, or <<<>>>); kernels not converted keep <<<>>> and wait for their predecessor in full, as before.
#ifdef __CUDACC__
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
#endif

// Whether launches on `device` carry the programmatic-serialization attribute: kernel_variant("pdl") != 0 and a
// compute capability of 9.0 or more (read once per device).
inline bool pdl_enabled(int device) {
  if (kernel_variant(Variant::kPdl) == 0) return false;
  constexpr int kDevices = 64;
  static int major[kDevices] = {};  // 0: not read yet
  if (device < 0 || device >= kDevices) return false;
  if (major[device] == 0) {
    int m = 0;
    check(cudaDeviceGetAttribute(&m, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
    major[device] = m;
  }
  return major[device] >= 9;
}

// kernel<<<grid, block, smem, stream>>>(args...) through cudaLaunchKernelEx, with programmatic stream serialization
// where pdl_enabled (the kernel must then pdl_wait() as above); checks the launch (`name` in the error).
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const char* name,
            Args&&... args) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  const bool pdl = pdl_enabled(device);
  config.attrs = pdl ? &attribute : nullptr;
  config.numAttrs = pdl ? 1 : 0;
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (err != cudaSuccess) cudaGetLastError();  // (cleared: a later check_launch must not report it again)
  check(err, name);
}

}  // namespace fhe::cuda
