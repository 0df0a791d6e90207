// Element-wise RNS ops, the tensor product of two ciphertexts and Galois automorphisms on the GPU.
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
__global__ void elementwise_kernel(ElementwiseArgs a, bool early) {
  pdl_trigger(early);
  pdl_wait();  // (element-wise: no prologue worth running before it)
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

// The tensor product (TensorProductArgs): one limb row per blockIdx.y, kWidth words per thread with
// 16-byte accesses when kWidth = 4 (as elementwise_kernel). Reads 4 rows, writes 3: the bytes of the
// product and nothing else (three element-wise passes and a stack before).
template <int kWidth>
__global__ void tensor_product_kernel(TensorProductArgs t, bool early) {
  pdl_trigger(early);
  pdl_wait();  // (element-wise: no prologue worth running before it)
  const int limb = blockIdx.y;
  const Modulus m = t.moduli[limb];
  const int64_t i0 = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * kWidth;
  if (i0 >= t.n) return;
  const int64_t plane = static_cast<int64_t>(t.limbs) * t.n, offset = limb * t.n + i0;
  u64 x0[kWidth], x1[kWidth], y0[kWidth], y1[kWidth];
  const u64* sources[4] = {t.a + offset, t.a + plane + offset, t.b + offset, t.b + plane + offset};
  u64* values[4] = {x0, x1, y0, y1};
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    if (kWidth == 4) {
#pragma unroll
      for (int k = 0; k < kWidth; k += 2) {
        const Pair p = *reinterpret_cast<const Pair*>(sources[s] + k);
        values[s][k] = p.x;
        values[s][k + 1] = p.y;
      }
    } else {
      values[s][0] = sources[s][0];
    }
  }
  u64 d0[kWidth], d1[kWidth], d2[kWidth];
#pragma unroll
  for (int k = 0; k < kWidth; ++k) {
    d0[k] = mul_mod(x0[k], y0[k], m);
    d1[k] = reduce128(add128(mul_wide(x0[k], y1[k]), mul_wide(x1[k], y0[k])), m);
    d2[k] = mul_mod(x1[k], y1[k], m);
  }
  u64* targets[3] = {t.out + offset, t.out + plane + offset, t.out + 2 * plane + offset};
  const u64* results[3] = {d0, d1, d2};
#pragma unroll
  for (int s = 0; s < 3; ++s) {
    if (kWidth == 4) {
#pragma unroll
      for (int k = 0; k < kWidth; k += 2) *reinterpret_cast<Pair*>(targets[s] + k) = Pair{results[s][k], results[s][k + 1]};
    } else {
      targets[s][0] = results[s][0];
    }
  }
}

template <ElementwiseOp kOp>
void launch_elementwise(const ElementwiseArgs& a, cudaStream_t s) {
  const bool vector = a.n % 4 == 0 && aligned16(a.a) && aligned16(a.b) && aligned16(a.c) && aligned16(a.out);
  const int width = vector ? 4 : 1;
  const dim3 grid(blocks_for(a.n, kThreads * width), static_cast<unsigned>(a.rows));
  if (vector) launch_triggering(elementwise_kernel<kOp, 4>, grid, kThreads, 0, s, "elementwise_kernel", a);
  else launch_triggering(elementwise_kernel<kOp, 1>, grid, kThreads, 0, s, "elementwise_kernel", a);
}

__global__ void automorphism_ntt_kernel(AutomorphismArgs a, bool early) {
  pdl_trigger(early);
  pdl_wait();  // (element-wise: no prologue worth running before it)
  const int64_t n = int64_t{1} << a.log_n;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= n) return;
  const int64_t row = blockIdx.y;
  a.out[row * n + i] = a.in[row * n + galois_ntt_source(static_cast<u32>(i), a.galois, a.log_n)];
}

__global__ void automorphism_coeff_kernel(AutomorphismArgs a, bool early) {
  pdl_trigger(early);
  pdl_wait();  // (element-wise: no prologue worth running before it)
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

void tensor_product(const TensorProductArgs& t, Stream stream) {
  if (t.limbs == 0) return;
  const DeviceScope scope(stream.device);
  const bool vector = t.n % 4 == 0 && aligned16(t.a) && aligned16(t.b) && aligned16(t.out);
  const int width = vector ? 4 : 1;
  const dim3 grid(blocks_for(t.n, kThreads * width), static_cast<unsigned>(t.limbs));
  if (vector)
    launch_triggering(tensor_product_kernel<4>, grid, kThreads, 0, native(stream), "tensor_product_kernel", t);
  else launch_triggering(tensor_product_kernel<1>, grid, kThreads, 0, native(stream), "tensor_product_kernel", t);
}

void automorphism_ntt(const AutomorphismArgs& a, Stream stream) {
  if (a.rows == 0) return;
  const DeviceScope scope(stream.device);
  const dim3 grid(blocks_for(int64_t{1} << a.log_n, kThreads), static_cast<unsigned>(a.rows));
  launch_triggering(automorphism_ntt_kernel, grid, kThreads, 0, native(stream), "automorphism_ntt_kernel", a);
}

void automorphism_coeff(const AutomorphismArgs& a, Stream stream) {
  if (a.rows == 0) return;
  const DeviceScope scope(stream.device);
  const dim3 grid(blocks_for(int64_t{1} << a.log_n, kThreads), static_cast<unsigned>(a.rows));
  launch_triggering(automorphism_coeff_kernel, grid, kThreads, 0, native(stream), "automorphism_coeff_kernel", a);
}

}  // namespace fhe::cuda
