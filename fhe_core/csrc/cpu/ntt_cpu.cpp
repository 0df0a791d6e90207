// CPU negacyclic NTT: the iterative Cooley-Tukey / Gentleman-Sande loops of common/ntt.h,
// one limb per task on torch's intra-op thread pool.
//
// Primes below 2^50 on a CPU with AVX-512 IFMA take a vector path (eight butterflies per
// instruction sequence, cpu/ifma.h); the others take the scalar reference loops. Both give the
// canonical residues of the same transform, so their outputs are equal word for word.
#include <ATen/Parallel.h>

#include <cstdlib>
#include <cstring>

#include "../common/ntt.h"
#include "../kernels.h"
#include "ifma.h"

namespace fhe::cpu {

bool ifma_enabled() {
#if FHE_CPU_HAVE_IFMA
  static const bool enabled = [] {
    const char* flag = std::getenv("FHE_CORE_CPU_SIMD");
    if (flag != nullptr && std::strcmp(flag, "0") == 0) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512ifma") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw");
  }();
  return enabled;
#else
  return false;
#endif
}

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

#if FHE_CPU_HAVE_IFMA
namespace vec {
using namespace ifma;

// Stages with butterfly half-size t < 8 work on blocks of 16 consecutive words (two vectors A, B
// holding 16 / (2t) groups): X gathers the first halves of the groups, Y the second halves, W the
// twiddle of each X lane. Lane l of X is word 2t*(l/t) + l%t of the block; its twiddle is the
// (l/t)-th of the block's groups.
struct SmallStage {
  __m512i x_idx, y_idx;    // words of the block (0..7 from A, 8..15 from B) forming X and Y
  __m512i a_idx, b_idx;    // inverse: words of A and B from X (0..7) and Y (8..15)
  __m512i w_idx;           // lane l -> l / t
};

FHE_IFMA_FN SmallStage small_stage(int t) {
  alignas(64) long long x[8], y[8], a[8], b[8], wi[8];
  for (int l = 0; l < 8; ++l) {
    x[l] = 2 * t * (l / t) + l % t;
    y[l] = x[l] + t;
    wi[l] = l / t;
  }
  for (int e = 0; e < 16; ++e) {  // where word e of the block went
    long long src = 0;
    for (int k = 0; k < 8; ++k) {
      if (x[k] == e) src = k;
      if (y[k] == e) src = 8 + k;
    }
    if (e < 8) a[e] = src;
    else b[e - 8] = src;
  }
  return SmallStage{_mm512_load_si512(x), _mm512_load_si512(y), _mm512_load_si512(a),
                    _mm512_load_si512(b), _mm512_load_si512(wi)};
}

// x, y in [0, 4q) -> x + w*y, x - w*y in [0, 4q).
FHE_IFMA void ct(__m512i& x, __m512i& y, __m512i w, __m512i w52, __m512i q, __m512i two_q) {
  const __m512i xr = csub(x, two_q);
  const __m512i t = mul_shoup_lazy(y, w, w52, q);
  x = _mm512_add_epi64(xr, t);
  y = _mm512_sub_epi64(_mm512_add_epi64(xr, two_q), t);
}

// x, y in [0, 2q) -> x + y, (x - y)*w in [0, 2q).
FHE_IFMA void gs(__m512i& x, __m512i& y, __m512i w, __m512i w52, __m512i q, __m512i two_q) {
  const __m512i s = csub(_mm512_add_epi64(x, y), two_q);
  const __m512i d = _mm512_sub_epi64(_mm512_add_epi64(x, two_q), y);
  x = s;
  y = mul_shoup_lazy(d, w, w52, q);
}

// The twiddles of the 16/(2t) groups of block b in stage m, one per X lane.
FHE_IFMA void small_twiddles(const u64* w, const u64* ws, int64_t first, const SmallStage& s,
                             __m512i& wv, __m512i& w52) {
  wv = _mm512_permutexvar_epi64(s.w_idx, load(w + first));
  w52 = _mm512_srli_epi64(_mm512_permutexvar_epi64(s.w_idx, load(ws + first)), 12);
}

FHE_IFMA_FN void forward_row(const u64* in, u64* out, const u64* table, u64 q_scalar, int log_n) {
  const int64_t n = int64_t{1} << log_n;
  const u64* w = table + kFwd * n;
  const u64* ws = table + kFwdShoup * n;
  const __m512i q = set1(q_scalar), two_q = set1(2 * q_scalar);
  const u64* src = in;  // the first stage reads `in` and writes `out` (no separate copy)
  int64_t m = 1, t = n >> 1;
  for (; t >= 8; m <<= 1, t >>= 1) {
    for (int64_t i = 0; i < m; ++i) {
      const __m512i wv = set1(w[m + i]), w52 = set1(ws[m + i] >> 12);
      const u64* sx = src + 2 * i * t;
      u64* x = out + 2 * i * t;
      for (int64_t j = 0; j < t; j += 8) {
        __m512i a = load(sx + j), b = load(sx + j + t);
        ct(a, b, wv, w52, q, two_q);
        store(x + j, a);
        store(x + j + t, b);
      }
    }
    src = out;
  }
  for (; t >= 1; m <<= 1, t >>= 1) {  // t = 4, 2, 1
    const SmallStage s = small_stage(static_cast<int>(t));
    const int64_t groups = 8 / t;    // per block of 16 words
    const bool last = t == 1;
    for (int64_t blk = 0; blk < n / 16; ++blk) {
      const __m512i a = load(src + 16 * blk), b = load(src + 16 * blk + 8);
      __m512i x = _mm512_permutex2var_epi64(a, s.x_idx, b), y = _mm512_permutex2var_epi64(a, s.y_idx, b);
      __m512i wv, w52;
      small_twiddles(w, ws, m + groups * blk, s, wv, w52);
      ct(x, y, wv, w52, q, two_q);
      if (last) {  // [0, 4q) -> [0, q), fused into the last stage
        x = csub(csub(x, two_q), q);
        y = csub(csub(y, two_q), q);
      }
      store(out + 16 * blk, _mm512_permutex2var_epi64(x, s.a_idx, y));
      store(out + 16 * blk + 8, _mm512_permutex2var_epi64(x, s.b_idx, y));
    }
    src = out;
  }
}

FHE_IFMA_FN void inverse_row(const u64* in, u64* out, const u64* table, u64 q_scalar, int log_n) {
  const int64_t n = int64_t{1} << log_n;
  const u64* w = table + kInv * n;
  const u64* ws = table + kInvShoup * n;
  const __m512i q = set1(q_scalar), two_q = set1(2 * q_scalar);
  const u64* src = in;
  int64_t m = n >> 1, t = 1;
  for (; t < 8; m >>= 1, t <<= 1) {  // t = 1, 2, 4
    const SmallStage s = small_stage(static_cast<int>(t));
    const int64_t groups = 8 / t;
    for (int64_t blk = 0; blk < n / 16; ++blk) {
      const __m512i a = load(src + 16 * blk), b = load(src + 16 * blk + 8);
      __m512i x = _mm512_permutex2var_epi64(a, s.x_idx, b), y = _mm512_permutex2var_epi64(a, s.y_idx, b);
      __m512i wv, w52;
      small_twiddles(w, ws, m + groups * blk, s, wv, w52);
      gs(x, y, wv, w52, q, two_q);
      store(out + 16 * blk, _mm512_permutex2var_epi64(x, s.a_idx, y));
      store(out + 16 * blk + 8, _mm512_permutex2var_epi64(x, s.b_idx, y));
    }
    src = out;
  }
  for (; m > 1; m >>= 1, t <<= 1) {
    for (int64_t i = 0; i < m; ++i) {
      const __m512i wv = set1(w[m + i]), w52 = set1(ws[m + i] >> 12);
      u64* x = out + 2 * i * t;
      for (int64_t j = 0; j < t; j += 8) {
        __m512i a = load(x + j), b = load(x + j + t);
        gs(a, b, wv, w52, q, two_q);
        store(x + j, a);
        store(x + j + t, b);
      }
    }
  }
  // m = 1 with N^-1 folded in (w[0] = N^-1, w[1] = psi^-brv(1) N^-1), canonical outputs.
  const __m512i n_inv = set1(w[0]), n_inv52 = set1(ws[0] >> 12);
  const __m512i w1 = set1(w[1]), w1_52 = set1(ws[1] >> 12);
  const int64_t half = n >> 1;
  for (int64_t j = 0; j < half; j += 8) {
    const __m512i x = load(out + j), y = load(out + j + half);
    const __m512i s = _mm512_add_epi64(x, y);                            // < 4q < 2^52
    const __m512i d = _mm512_sub_epi64(_mm512_add_epi64(x, two_q), y);  // < 4q
    store(out + j, csub(mul_shoup_lazy(s, n_inv, n_inv52, q), q));
    store(out + j + half, csub(mul_shoup_lazy(d, w1, w1_52, q), q));
  }
}

}  // namespace vec
#endif

using RowFn = void (*)(const u64*, u64*, const u64*, u64, int);

void for_each_row(const NttArgs& a, RowFn scalar_fn, RowFn vector_fn) {
  const int64_t n = int64_t{1} << a.log_n;
  // The vector rows need N >= 16 (blocks of 16 words) and 4q < 2^52.
  const bool simd = vector_fn != nullptr && n >= 16 && ifma_enabled();
  at::parallel_for(0, a.rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int limb = static_cast<int>(r % a.limbs);
      const u64 q = a.moduli[limb].value;
      const RowFn fn = simd && q < kIfmaMaxPrime ? vector_fn : scalar_fn;
      fn(a.in + r * n, a.out + r * n, a.table + limb * kNttTableRows * n, q, a.log_n);
    }
  });
}

}  // namespace

#if FHE_CPU_HAVE_IFMA
void ntt_forward(const NttArgs& args) { for_each_row(args, forward_row, vec::forward_row); }
void ntt_inverse(const NttArgs& args) { for_each_row(args, inverse_row, vec::inverse_row); }
#else
void ntt_forward(const NttArgs& args) { for_each_row(args, forward_row, nullptr); }
void ntt_inverse(const NttArgs& args) { for_each_row(args, inverse_row, nullptr); }
#endif

}  // namespace fhe::cpu
