// ChaCha20 samplers on the GPU: one thread per 64-byte block, the same block-to-element mapping
// as cpu/sampling.cpp (see common/sampling.h), hence identical polynomials.
#include "../common/sampling.h"
#include "launch.cuh"

namespace fhe::cuda {
namespace {

constexpr int kThreads = 128;

__global__ void uniform_kernel(SampleArgs a, int64_t blocks) {
  const int64_t blk = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (blk >= blocks) return;
  u32 w[16];
  chacha20_block(a.key, static_cast<u64>(blk), a.nonce, w);
  const int64_t e0 = blk * kUniformPerBlock;
  const Modulus m = a.moduli[e0 / a.n];
#pragma unroll
  for (int k = 0; k < kUniformPerBlock; ++k) a.out[e0 + k] = uniform_from_words(w + 4 * k, m);
}

template <SampleKind kKind>
__global__ void small_kernel(SampleArgs a, int64_t blocks) {
  const int64_t blk = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (blk >= blocks) return;
  u32 w[16];
  chacha20_block(a.key, static_cast<u64>(blk), a.nonce, w);
  int64_t v[kSmallPerBlock];
#pragma unroll
  for (int k = 0; k < kSmallPerBlock; ++k)
    v[k] = kKind == SampleKind::kCenteredBinomial ? cbd_from_words(w[2 * k], w[2 * k + 1], a.eta)
                                                   : ternary_from_words(w[2 * k], w[2 * k + 1]);
  for (int l = 0; l < a.limbs; ++l) {
    const u64 q = a.moduli[l].value;
    u64* out = a.out + l * a.n + blk * kSmallPerBlock;
#pragma unroll
    for (int k = 0; k < kSmallPerBlock; ++k) out[k] = from_signed(v[k], q);
  }
}

// Floyd's algorithm is sequential: one thread, exactly the CPU code path.
__global__ void fixed_weight_kernel(FixedWeightArgs a) {
  sample_fixed_weight_ternary(a.key, a.nonce, static_cast<u32>(a.n), static_cast<u32>(a.hamming_weight),
                              a.scratch);
}

__global__ void lift_kernel(FixedWeightArgs a) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= a.n) return;
  const int l = blockIdx.y;
  a.out[l * a.n + i] = from_signed(a.scratch[i], a.moduli[l].value);
}

}  // namespace

void sample(const SampleArgs& a, Stream stream) {
  const DeviceScope scope(stream.device);
  const cudaStream_t s = native(stream);
  if (a.kind == SampleKind::kUniform) {
    const int64_t blocks = a.limbs * a.n / kUniformPerBlock;
    uniform_kernel<<<blocks_for(blocks, kThreads), kThreads, 0, s>>>(a, blocks);
    check_launch("uniform_kernel");
    return;
  }
  const int64_t blocks = a.n / kSmallPerBlock;
  if (a.kind == SampleKind::kCenteredBinomial)
    small_kernel<SampleKind::kCenteredBinomial><<<blocks_for(blocks, kThreads), kThreads, 0, s>>>(a, blocks);
  else
    small_kernel<SampleKind::kTernaryUniform><<<blocks_for(blocks, kThreads), kThreads, 0, s>>>(a, blocks);
  check_launch("small_kernel");
}

void sample_fixed_weight(const FixedWeightArgs& a, Stream stream) {
  const DeviceScope scope(stream.device);
  const cudaStream_t s = native(stream);
  fixed_weight_kernel<<<1, 1, 0, s>>>(a);
  check_launch("fixed_weight_kernel");
  lift_kernel<<<dim3(blocks_for(a.n, kThreads), static_cast<unsigned>(a.limbs)), kThreads, 0, s>>>(a);
  check_launch("lift_kernel");
}

}  // namespace fhe::cuda
