// CPU element-wise RNS ops, fast basis conversion and Galois automorphisms.
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "../common/ntt.h"
#include "../kernels.h"

namespace fhe::cpu {

void elementwise(const ElementwiseArgs& a) {
  at::parallel_for(0, a.rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int limb = static_cast<int>(r % a.limbs);
      const Modulus m = a.moduli[limb];
      const u64 q = m.value;
      const u64* x = a.a + r * a.n;
      const u64* y = a.b ? a.b + (r % a.b_rows) * a.n : nullptr;
      u64* out = a.out + r * a.n;
      switch (a.op) {
        case ElementwiseOp::kAdd:
          for (int64_t i = 0; i < a.n; ++i) out[i] = add_mod(x[i], y[i], q);
          break;
        case ElementwiseOp::kSub:
          for (int64_t i = 0; i < a.n; ++i) out[i] = sub_mod(x[i], y[i], q);
          break;
        case ElementwiseOp::kNeg:
          for (int64_t i = 0; i < a.n; ++i) out[i] = neg_mod(x[i], q);
          break;
        case ElementwiseOp::kMul:
          for (int64_t i = 0; i < a.n; ++i) out[i] = mul_mod(x[i], y[i], m);
          break;
        case ElementwiseOp::kMulConst: {
          const u64 w = a.consts[limb], ws = a.consts_shoup[limb];
          for (int64_t i = 0; i < a.n; ++i) out[i] = mul_shoup(x[i], w, ws, q);
          break;
        }
        case ElementwiseOp::kSubMulConst: {
          const u64 w = a.consts[limb], ws = a.consts_shoup[limb];
          for (int64_t i = 0; i < a.n; ++i) out[i] = mul_shoup(sub_mod(x[i], y[i], q), w, ws, q);
          break;
        }
        case ElementwiseOp::kMulAdd: {
          const u64* z = a.c + r * a.n;
          for (int64_t i = 0; i < a.n; ++i) out[i] = mul_add_mod(x[i], y[i], z[i], m);
          break;
        }
      }
    }
  });
}

void conv(const ConvArgs& a) {
  constexpr int64_t kChunk = 256;  // coefficients per task: y[alpha][kChunk] stays in L1/L2
  const int64_t chunks = (a.n + kChunk - 1) / kChunk;
  at::parallel_for(0, a.batch * a.dnum * chunks, 1, [&](int64_t begin, int64_t end) {
    std::vector<u64> y(static_cast<size_t>(a.alpha) * kChunk);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / (a.dnum * chunks);
      const int j = static_cast<int>(task / chunks % a.dnum);
      const int64_t c0 = (task % chunks) * kChunk, len = std::min(kChunk, a.n - c0);
      const int first = j * a.alpha, count = std::min(a.alpha, a.q_count - first);
      const u64* in = a.in + b * a.q_count * a.n;
      u64* out = a.out + (b * a.dnum + j) * a.rows * a.n;
      for (int k = 0; k < count; ++k) {
        const int row = first + k;
        for (int64_t i = 0; i < len; ++i)
          y[k * kChunk + i] = mul_shoup(in[row * a.n + c0 + i], a.qhat_inv[row], a.qhat_inv_shoup[row], a.src[row].value);
      }
      const u64* consts = a.qhat_mod_p + static_cast<int64_t>(j) * a.alpha * a.rows;
      std::vector<u64> overflow;
      if (a.neg_q_mod_p != nullptr) {
        overflow.resize(static_cast<size_t>(len));
        for (int64_t i = 0; i < len; ++i) overflow[i] = conv_rounded_overflow(&y[i], kChunk, a.src + first, count);
      }
      for (int r = 0; r < a.rows; ++r) {
        for (int64_t i = 0; i < len; ++i) {
          U128 acc{0, 0};
          for (int k = 0; k < count; ++k) mac128(acc, y[k * kChunk + i], consts[k * a.rows + r]);
          if (a.neg_q_mod_p != nullptr) mac128(acc, overflow[i], a.neg_q_mod_p[r]);
          out[r * a.n + c0 + i] = reduce128(acc, a.dst[r]);
        }
      }
    }
  });
}

void center_lift(const CenterLiftArgs& a) {
  at::parallel_for(0, a.batch * a.l_out, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / a.l_out;
      const int j = static_cast<int>(task % a.l_out);
      const u64* in = a.in + b * a.n;
      u64* out = a.out + task * a.n;
      for (int64_t i = 0; i < a.n; ++i) out[i] = center_lift_one(in[i], a.src, a.dst[j]);
    }
  });
}

void automorphism_ntt(const AutomorphismArgs& a) {
  const int64_t n = int64_t{1} << a.log_n;
  std::vector<u32> source(n);
  for (int64_t i = 0; i < n; ++i) source[i] = galois_ntt_source(static_cast<u32>(i), a.galois, a.log_n);
  at::parallel_for(0, a.rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const u64* in = a.in + r * n;
      u64* out = a.out + r * n;
      for (int64_t i = 0; i < n; ++i) out[i] = in[source[i]];
    }
  });
}

void automorphism_coeff(const AutomorphismArgs& a) {
  const int64_t n = int64_t{1} << a.log_n;
  const u64 mask = static_cast<u64>(2 * n - 1);
  at::parallel_for(0, a.rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const u64 q = a.moduli[r % a.limbs].value;
      const u64* in = a.in + r * n;
      u64* out = a.out + r * n;
      for (int64_t i = 0; i < n; ++i) {
        const u64 t = (static_cast<u64>(i) * a.galois) & mask;
        if (t < static_cast<u64>(n)) out[t] = in[i];
        else out[t - n] = neg_mod(in[i], q);
      }
    }
  });
}

}  // namespace fhe::cpu
