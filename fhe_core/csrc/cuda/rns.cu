// Element-wise RNS ops, fast basis conversion and Galois automorphisms on the GPU.
#include "../common/ntt.h"
#include "launch.cuh"

namespace fhe::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 4;  // two 16-byte loads per operand
constexpr int kPerBlock = kThreads * kPerThread;

struct alignas(16) Pair {
  u64 x, y;
};

// One row (limb) per blockIdx.y: the modulus is read once per block, no division per element.
template <ElementwiseOp kOp>
__global__ void elementwise_kernel(ElementwiseArgs a) {
  const int64_t row = blockIdx.y;
  const int limb = static_cast<int>(row % a.limbs);
  const Modulus m = a.moduli[limb];
  const u64 q = m.value;
  const int64_t i0 = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * kPerThread;
  if (i0 >= a.n) return;
  const int64_t offset = row * a.n + i0;
  const int64_t b_offset = (row % a.b_rows) * a.n + i0;
  u64 x[kPerThread], y[kPerThread], z[kPerThread], r[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; k += 2) {
    const Pair px = *reinterpret_cast<const Pair*>(a.a + offset + k);
    x[k] = px.x; x[k + 1] = px.y;
    if (kOp != ElementwiseOp::kNeg && kOp != ElementwiseOp::kMulConst) {
      const Pair py = *reinterpret_cast<const Pair*>(a.b + b_offset + k);
      y[k] = py.x; y[k + 1] = py.y;
    }
    if (kOp == ElementwiseOp::kMulAdd) {
      const Pair pz = *reinterpret_cast<const Pair*>(a.c + offset + k);
      z[k] = pz.x; z[k + 1] = pz.y;
    }
  }
  u64 w = 0, ws = 0;
  if (kOp == ElementwiseOp::kMulConst || kOp == ElementwiseOp::kSubMulConst) {
    w = a.consts[limb];
    ws = a.consts_shoup[limb];
  }
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
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
#pragma unroll
  for (int k = 0; k < kPerThread; k += 2) *reinterpret_cast<Pair*>(a.out + offset + k) = Pair{r[k], r[k + 1]};
}

template <ElementwiseOp kOp>
void launch_elementwise(const ElementwiseArgs& a, cudaStream_t s) {
  const dim3 grid(blocks_for(a.n, kPerBlock), static_cast<unsigned>(a.rows));
  elementwise_kernel<kOp><<<grid, kThreads, 0, s>>>(a);
  check_launch("elementwise_kernel");
}

// Fast basis conversion (HK20 / BEHZ "Conv"): out_j = sum_i [a_i * (Q/q_i)^-1]_{q_i} * (Q/q_i) mod p_j.
// Grid: (N / 128, batch * output groups). A thread owns one coefficient and one group of
// kBconvGroup output limbs. Both halves matter (see docs/performance.md): one thread per
// coefficient leaves the GPU latency-bound (65,536 threads at N = 2^16, each with a long
// dependent chain), and splitting the outputs only pays once each multiply-accumulate is cheap:
// mac128 (two PTX instructions) on constants staged in shared memory (broadcast reads), with the
// tail group's missing constants set to zero so the inner loop carries no predicates. The l_in
// scaled inputs y_i are recomputed per group (l_in Shoup products against l_in * kBconvGroup MACs).
constexpr int kBconvThreads = 128;
constexpr int kBconvGroup = 4;

__global__ void bconv_kernel(BconvArgs a, int groups) {
  extern __shared__ u64 smem[];
  u64* y = smem;                                  // [l_in][kBconvThreads]
  u64* consts = smem + a.l_in * kBconvThreads;     // [l_in][kBconvGroup]
  const int64_t batch = blockIdx.y / groups;
  const int j0 = (blockIdx.y % groups) * kBconvGroup;
  const int count = min(kBconvGroup, a.l_out - j0);
  for (int e = threadIdx.x; e < a.l_in * kBconvGroup; e += kBconvThreads) {
    const int k = e / kBconvGroup, r = e % kBconvGroup;
    consts[e] = r < count ? a.qhat_mod_p[k * a.l_out + j0 + r] : 0;
  }
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kBconvThreads + threadIdx.x;
  const bool active = i < a.n;
  const u64* in = a.in + batch * a.l_in * a.n + i;
  u64* out = a.out + batch * a.l_out * a.n + i;
  if (active)
    for (int k = 0; k < a.l_in; ++k)
      y[k * kBconvThreads + threadIdx.x] = mul_shoup(in[k * a.n], a.qhat_inv[k], a.qhat_inv_shoup[k], a.src[k].value);
  __syncthreads();
  if (!active) return;
  U128 acc[kBconvGroup] = {};
  for (int k = 0; k < a.l_in; ++k) {
    const u64 yk = y[k * kBconvThreads + threadIdx.x];
#pragma unroll
    for (int r = 0; r < kBconvGroup; ++r) mac128(acc[r], yk, consts[k * kBconvGroup + r]);
  }
#pragma unroll
  for (int r = 0; r < kBconvGroup; ++r)
    if (r < count) out[(j0 + r) * a.n] = reduce128(acc[r], a.dst[j0 + r]);
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

void bconv(const BconvArgs& a, Stream stream) {
  if (a.batch == 0) return;
  const DeviceScope scope(stream.device);
  const size_t smem = static_cast<size_t>(a.l_in) * (kBconvThreads + kBconvGroup) * sizeof(u64);
  check(cudaFuncSetAttribute(bconv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        "cudaFuncSetAttribute(bconv_kernel)");
  const int groups = (a.l_out + kBconvGroup - 1) / kBconvGroup;
  const dim3 grid(blocks_for(a.n, kBconvThreads), static_cast<unsigned>(a.batch * groups));
  bconv_kernel<<<grid, kBconvThreads, smem, native(stream)>>>(a, groups);
  check_launch("bconv_kernel");
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
