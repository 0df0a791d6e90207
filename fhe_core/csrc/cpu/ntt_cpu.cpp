// CPU negacyclic NTT: the iterative Cooley-Tukey / Gentleman-Sande loops of common/ntt.h,
// one limb per task on torch's intra-op thread pool.
#include <ATen/Parallel.h>

#include <cstring>

#include "../common/ntt.h"
#include "../kernels.h"

namespace fhe::cpu {
namespace {

void forward_row(const u64* in, u64* out, const u64* table, u64 q, int log_n) {
  const int64_t n = int64_t{1} << log_n;
  const u64* w = table + kFwd * n;
  const u64* ws = table + kFwdShoup * n;
  if (out != in) std::memcpy(out, in, n * sizeof(u64));
  for (int64_t m = 1, t = n >> 1; m < n; m <<= 1, t >>= 1) {
    for (int64_t i = 0; i < m; ++i) {
      u64* x = out + 2 * i * t;
      u64* y = x + t;
      const u64 wi = w[m + i], wsi = ws[m + i];
      for (int64_t j = 0; j < t; ++j) ct_butterfly(x[j], y[j], wi, wsi, q);
    }
  }
  for (int64_t j = 0; j < n; ++j) out[j] = reduce_4q(out[j], q);
}

void inverse_row(const u64* in, u64* out, const u64* table, u64 q, int log_n) {
  const int64_t n = int64_t{1} << log_n;
  const u64* w = table + kInv * n;
  const u64* ws = table + kInvShoup * n;
  if (out != in) std::memcpy(out, in, n * sizeof(u64));
  for (int64_t m = n >> 1, t = 1; m > 1; m >>= 1, t <<= 1) {
    for (int64_t i = 0; i < m; ++i) {
      u64* x = out + 2 * i * t;
      u64* y = x + t;
      const u64 wi = w[m + i], wsi = ws[m + i];
      for (int64_t j = 0; j < t; ++j) gs_butterfly(x[j], y[j], wi, wsi, q);
    }
  }
  const int64_t half = n >> 1;
  for (int64_t j = 0; j < half; ++j) gs_butterfly_last(out[j], out[j + half], w, ws, q);
}

template <typename RowFn>
void for_each_row(const NttArgs& a, RowFn row_fn) {
  const int64_t n = int64_t{1} << a.log_n;
  at::parallel_for(0, a.rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int limb = static_cast<int>(r % a.limbs);
      row_fn(a.in + r * n, a.out + r * n, a.table + limb * kNttTableRows * n,
             a.moduli[limb].value, a.log_n);
    }
  });
}

}  // namespace

void ntt_forward(const NttArgs& args) { for_each_row(args, forward_row); }
void ntt_inverse(const NttArgs& args) { for_each_row(args, inverse_row); }

}  // namespace fhe::cpu
