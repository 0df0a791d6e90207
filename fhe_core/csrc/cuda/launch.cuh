// Helpers shared by the CUDA launchers: error checks and device selection.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

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

}  // namespace fhe::cuda
