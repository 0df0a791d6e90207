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

// ---- programmatic dependent launch (ops.kernel_variant("pdl") 1-5; Hopper and later) ----
// A kernel launched with the programmatic-serialization attribute may be scheduled once every block of the kernel
// before it in the stream has executed griddepcontrol.launch_dependents (pdl_trigger / pdl_wait below) or exited: its blocks fill the SMs that the
// predecessor's last wave leaves idle and run their prologue there (index math, constant tables: moduli, Conv's B
// fragments). Before it reads anything a predecessor produced, and before its first global store (the caching
// allocator may hand it a buffer that the predecessor still reads), every block executes pdl_wait(): it returns once
// the predecessor grid has completed and its writes are visible. Every block of such a kernel waits, even one that
// has nothing to do (a grid that completed without waiting would not imply that its own predecessor had), so the
// chain of completions stays transitive. Both instructions are no-ops in a kernel launched without the attribute
// (pdl 0, or <<<>>>); kernels not converted keep <<<>>> and wait for their predecessor in full, as before.
//
// The variants (which launches carry the attribute; which kernels trigger their successor at their start):
//   1: all converted launches; every kernel triggers at its start;
//   2: all converted launches; no early trigger (a successor is launched when its predecessor's blocks have all
//      exited: only the launch's own latency is hidden);
//   3: only the Conv (ModUp's, ModDown's); only the inverse NTT's columns kernel before it triggers early, so that
//      the Conv's constant copies run in that kernel's tail;
//   4: all converted launches; only the element-wise and bootstrap-circuit kernels trigger early;
//   5: all converted launches; every kernel triggers right after its wait (its successor's blocks may then start in
//      its tail, but no chain of waiting kernels piles up ahead of a running one as with 1).
// A converted kernel's last parameter, `trigger` (pdl_trigger_point, set by launch_as), says where it triggers.
constexpr int kPdlTriggerNone = 0, kPdlTriggerAtStart = 1, kPdlTriggerAfterWait = 2;
#ifdef __CUDACC__
__device__ __forceinline__ void pdl_trigger(int trigger) {  // first thing in the kernel
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (trigger == kPdlTriggerAtStart) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait(int trigger) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (trigger == kPdlTriggerAfterWait) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
#endif

// What a converted kernel is, for the variants above.
enum class PdlRole {
  kKernel,       // the NTT and inner-product kernels
  kConv,         // the tensor-core Conv
  kBeforeConv,   // the inverse NTT's columns kernel (ModUp's and ModDown's Conv follow it)
  kElementwise,  // element-wise, automorphism, inner-product and bootstrap-circuit kernels (rns.cu, fused.cu, ...)
};

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

inline bool pdl_attribute(int device, PdlRole role) {
  const int v = pdl_variant(device);
  return v == 1 || v == 2 || v == 4 || v == 5 || (v == 3 && role == PdlRole::kConv);
}

inline int pdl_trigger_point(int device, PdlRole role) {
  const int v = pdl_variant(device);
  if (v == 1 || (v == 3 && role == PdlRole::kBeforeConv) || (v == 4 && role == PdlRole::kElementwise))
    return kPdlTriggerAtStart;
  return v == 5 ? kPdlTriggerAfterWait : kPdlTriggerNone;
}

// kernel<<<grid, block, smem, stream>>>(args..., trigger) through cudaLaunchKernelEx: `trigger` (the kernel's last
// parameter, for pdl_trigger / pdl_wait) = pdl_trigger_point, the programmatic-serialization attribute where
// pdl_attribute (the kernel must then pdl_wait as above); checks the launch (`name` in the error).
template <class... Params, class... Args>
void launch_as(PdlRole role, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
               const char* name, Args&&... args) {
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
  const bool pdl = pdl_attribute(device, role);
  config.attrs = pdl ? &attribute : nullptr;
  config.numAttrs = pdl ? 1 : 0;
  const int trigger = pdl_trigger_point(device, role);
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)..., trigger);
  if (err != cudaSuccess) cudaGetLastError();  // (cleared: a later check_launch must not report it again)
  check(err, name);
}

template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const char* name,
            Args&&... args) {
  launch_as(PdlRole::kKernel, kernel, grid, block, smem, stream, name, std::forward<Args>(args)...);
}

}  // namespace fhe::cuda
