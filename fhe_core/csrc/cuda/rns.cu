// Element-wise RNS ops, fast basis conversion and Galois automorphisms on the GPU.
#include "../common/ntt.h"
#include "launch.cuh"

namespace fhe::cuda {
namespace {

constexpr int kThreads = 256;

struct alignas(16) Pair {
  u64 x, y;
};

// One row (limb) per blockIdx.y: the modulus is read once per block, no division per element.
// kWidth = 4: each thread handles 4 consecutive words with 16-byte accesses, which needs rows of a
// multiple of 4 words and 16-byte aligned pointers (checked at launch); kWidth = 1 handles any
// shape (the ops accept any row length: the decoder works on [l, 2 * slots] tensors).
template <ElementwiseOp kOp, int kWidth>
__global__ void elementwise_kernel(ElementwiseArgs a) {
  const int64_t row = blockIdx.y;
  const int limb = static_cast<int>(row % a.limbs);
  const Modulus m = a.moduli[limb];
  const u64 q = m.value;
  const int64_t i0 = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * kWidth;
  if (i0 >= a.n) return;
  const int64_t offset = row * a.n + i0;
  const int64_t b_offset = (row % a.b_rows) * a.n + i0;
  constexpr bool kHasB = kOp != ElementwiseOp::kNeg && kOp != ElementwiseOp::kMulConst;
  u64 x[kWidth], y[kWidth], z[kWidth], r[kWidth];
  if (kWidth == 4) {
#pragma unroll
    for (int k = 0; k < kWidth; k += 2) {
      const Pair px = *reinterpret_cast<const Pair*>(a.a + offset + k);
      x[k] = px.x; x[k + 1] = px.y;
      if (kHasB) {
        const Pair py = *reinterpret_cast<const Pair*>(a.b + b_offset + k);
        y[k] = py.x; y[k + 1] = py.y;
      }
      if (kOp == ElementwiseOp::kMulAdd) {
        const Pair pz = *reinterpret_cast<const Pair*>(a.c + offset + k);
        z[k] = pz.x; z[k + 1] = pz.y;
      }
    }
  } else {
    x[0] = a.a[offset];
    if (kHasB) y[0] = a.b[b_offset];
    if (kOp == ElementwiseOp::kMulAdd) z[0] = a.c[offset];
  }
  u64 w = 0, ws = 0;
  if (kOp == ElementwiseOp::kMulConst || kOp == ElementwiseOp::kSubMulConst) {
    w = a.consts[limb];
    ws = a.consts_shoup[limb];
  }
#pragma unroll
  for (int k = 0; k < kWidth; ++k) {
    switch (kOp) {
      case ElementwiseOp::kAdd: r[k] = add_mod(x[k], y[k], q); break;
      case ElementwiseOp::kSub: r[k] = sub_mod(x[k], y[k], q); break;
      case ElementwiseOp::kNeg: r[k] = neg_mod(x[k], q); break;
      case ElementwiseOp::kMul: r[k] = mul_mod(x[k], y[k], m); break;
      case ElementwiseOp::kMulConst: r[k] = mul_shoup(x[k], w, ws, q); break;
      case ElementwiseOp::kMulAdd: r[k] = mul_add_mod(x[k], y[k], z[k], m); break;
      case ElementwiseOp::kSubMulConst: r[k] = mul_shoup(sub_mod(x[k], y[k], q), w, ws, q); break;
    }
  }
  if (kWidth == 4) {
#pragma unroll
    for (int k = 0; k < kWidth; k += 2) *reinterpret_cast<Pair*>(a.out + offset + k) = Pair{r[k], r[k + 1]};
  } else {
    a.out[offset] = r[0];
  }
}

bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <ElementwiseOp kOp>
void launch_elementwise(const ElementwiseArgs& a, cudaStream_t s) {
  const bool vector = a.n % 4 == 0 && aligned16(a.a) && aligned16(a.b) && aligned16(a.c) && aligned16(a.out);
  const int width = vector ? 4 : 1;
  const dim3 grid(blocks_for(a.n, kThreads * width), static_cast<unsigned>(a.rows));
  if (vector) elementwise_kernel<kOp, 4><<<grid, kThreads, 0, s>>>(a);
  else elementwise_kernel<kOp, 1><<<grid, kThreads, 0, s>>>(a);
  check_launch("elementwise_kernel");
}

// Fast basis conversion of one or several digits (see ConvArgs). Grid: (N / 128, batch * dnum *
// output groups). A thread owns one coefficient, one digit and one group of kConvGroup output rows.
// Both halves matter (docs/performance.md): one thread per coefficient alone leaves the GPU
// latency-bound (65,536 threads at N = 2^16 with long dependent chains), and splitting the outputs
// only pays once each multiply-accumulate is cheap: mac128 (two PTX instructions) on constants
// staged in shared memory (broadcast reads), zero-padded so the inner loop carries no predicates.
// The digit's scaled inputs y_k are recomputed per group (alpha Shoup products against
// alpha * kConvGroup MACs).
constexpr int kConvThreads = 128;
constexpr int kConvGroup = 4;

__global__ void conv_kernel(ConvArgs a, int groups) {
  extern __shared__ u64 smem[];
  u64* y = smem;                                // [alpha][kConvThreads]
  u64* consts = smem + a.alpha * kConvThreads;   // [alpha][kConvGroup]
  const int64_t b = blockIdx.y / (a.dnum * groups);
  const int j = blockIdx.y / groups % a.dnum;
  const int r0 = (blockIdx.y % groups) * kConvGroup;
  const int first = j * a.alpha, count = min(a.alpha, a.q_count - first);
  const int width = min(kConvGroup, a.rows - r0);
  for (int e = threadIdx.x; e < a.alpha * kConvGroup; e += kConvThreads) {
    const int k = e / kConvGroup, r = e % kConvGroup;
    consts[e] = (r < width) ? a.qhat_mod_p[(static_cast<int64_t>(j) * a.alpha + k) * a.rows + r0 + r] : 0;
  }
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kConvThreads + threadIdx.x;
  const bool active = i < a.n;
  const u64* in = a.in + b * a.q_count * a.n + i;
  if (active)
    for (int k = 0; k < count; ++k) {
      const int row = first + k;
      y[k * kConvThreads + threadIdx.x] = mul_shoup(in[row * a.n], a.qhat_inv[row], a.qhat_inv_shoup[row], a.src[row].value);
    }
  __syncthreads();
  if (!active) return;
  U128 acc[kConvGroup] = {};
  for (int k = 0; k < count; ++k) {
    const u64 yk = y[k * kConvThreads + threadIdx.x];
#pragma unroll
    for (int r = 0; r < kConvGroup; ++r) mac128(acc[r], yk, consts[k * kConvGroup + r]);
  }
  if (a.neg_q_mod_p != nullptr) {  // exact centred conversion: subtract v*Q (see ConvArgs)
    const u64 u = conv_rounded_overflow(y + threadIdx.x, kConvThreads, a.src + first, count);
#pragma unroll
    for (int r = 0; r < kConvGroup; ++r)
      if (r < width) mac128(acc[r], u, a.neg_q_mod_p[r0 + r]);
  }
  u64* out = a.out + ((b * a.dnum + j) * a.rows + r0) * a.n + i;
#pragma unroll
  for (int r = 0; r < kConvGroup; ++r)
    if (r < width) out[r * a.n] = reduce128(acc[r], a.dst[r0 + r]);
}

// One thread per coefficient: read x once, write its lift into every output limb (coalesced).
__global__ void center_lift_kernel(CenterLiftArgs a) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= a.n) return;
  const int64_t b = blockIdx.y;
  const u64 x = a.in[b * a.n + i];
  u64* out = a.out + b * a.l_out * a.n + i;
  for (int j = 0; j < a.l_out; ++j) out[j * a.n] = center_lift_one(x, a.src, a.dst[j]);
}

__global__ void automorphism_ntt_kernel(AutomorphismArgs a) {
  const int64_t n = int64_t{1} << a.log_n;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= n) return;
  const int64_t row = blockIdx.y;
  a.out[row * n + i] = a.in[row * n + galois_ntt_source(static_cast<u32>(i), a.galois, a.log_n)];
}

__global__ void automorphism_coeff_kernel(AutomorphismArgs a) {
  const int64_t n = int64_t{1} << a.log_n;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= n) return;
  const int64_t row = blockIdx.y;
  const u64 q = a.moduli[row % a.limbs].value;
  const u64 t = (static_cast<u64>(i) * a.galois) & static_cast<u64>(2 * n - 1);
  const u64 v = a.in[row * n + i];
  if (t < static_cast<u64>(n)) a.out[row * n + t] = v;
  else a.out[row * n + (t - n)] = neg_mod(v, q);
}

}  // namespace

void elementwise(const ElementwiseArgs& a, Stream stream) {
  if (a.rows == 0) return;
  const DeviceScope scope(stream.device);
  const cudaStream_t s = native(stream);
  switch (a.op) {
    case ElementwiseOp::kAdd: return launch_elementwise<ElementwiseOp::kAdd>(a, s);
    case ElementwiseOp::kSub: return launch_elementwise<ElementwiseOp::kSub>(a, s);
    case ElementwiseOp::kNeg: return launch_elementwise<ElementwiseOp::kNeg>(a, s);
    case ElementwiseOp::kMul: return launch_elementwise<ElementwiseOp::kMul>(a, s);
    case ElementwiseOp::kMulConst: return launch_elementwise<ElementwiseOp::kMulConst>(a, s);
    case ElementwiseOp::kMulAdd: return launch_elementwise<ElementwiseOp::kMulAdd>(a, s);
    case ElementwiseOp::kSubMulConst: return launch_elementwise<ElementwiseOp::kSubMulConst>(a, s);
  }
}

void conv(const ConvArgs& a, Stream stream) {
  if (a.batch == 0 || a.dnum == 0) return;
  const DeviceScope scope(stream.device);
  const size_t smem = static_cast<size_t>(a.alpha) * (kConvThreads + kConvGroup) * sizeof(u64);
  check(cudaFuncSetAttribute(conv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        "cudaFuncSetAttribute(conv_kernel)");
  const int groups = (a.rows + kConvGroup - 1) / kConvGroup;
  const dim3 grid(blocks_for(a.n, kConvThreads), static_cast<unsigned>(a.batch * a.dnum * groups));
  conv_kernel<<<grid, kConvThreads, smem, native(stream)>>>(a, groups);
  check_launch("conv_kernel");
}

void center_lift(const CenterLiftArgs& a, Stream stream) {
  if (a.batch == 0) return;
  const DeviceScope scope(stream.device);
  const dim3 grid(blocks_for(a.n, kThreads), static_cast<unsigned>(a.batch));
  center_lift_kernel<<<grid, kThreads, 0, native(stream)>>>(a);
  check_launch("center_lift_kernel");
}

void automorphism_ntt(const AutomorphismArgs& a, Stream stream) {
  if (a.rows == 0) return;
  const DeviceScope scope(stream.device);
  const dim3 grid(blocks_for(int64_t{1} << a.log_n, kThreads), static_cast<unsigned>(a.rows));
  automorphism_ntt_kernel<<<grid, kThreads, 0, native(stream)>>>(a);
  check_launch("automorphism_ntt_kernel");
}

void automorphism_coeff(const AutomorphismArgs& a, Stream stream) {
  if (a.rows == 0) return;
  const DeviceScope scope(stream.device);
  const dim3 grid(blocks_for(int64_t{1} << a.log_n, kThreads), static_cast<unsigned>(a.rows));
  automorphism_coeff_kernel<<<grid, kThreads, 0, native(stream)>>>(a);
  check_launch("automorphism_coeff_kernel");
}

}  // namespace fhe::cuda
