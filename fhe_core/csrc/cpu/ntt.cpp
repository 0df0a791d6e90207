// CPU negacyclic NTT: the iterative Cooley-Tukey / Gentleman-Sande loops of common/ntt.h, one row per task on
// torch's intra-op thread pool, and the compositions the CUDA kernels fuse (ModDown's epilogue, a rotation's
// sigma_k and HMult's products before the inverse).
//
// The rows' arithmetic follows the process's path (path.h): on the IFMA path, eight butterflies per instruction
// sequence (cpu/ifma.h); on the AVX2 path, four in double precision for primes below 2^46 (cpu/avx2.h); the scalar
// loops for the other primes and on the scalar path. All give the canonical residues of the same transform, so
// their outputs are equal word for word.
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../common/ntt.h"
#include "../kernels.h"
#include "parallel.h"
#include "avx2.h"
#include "ifma.h"

namespace fhe::cpu {

namespace {

CpuPath requested_path() {
  const char* flag = std::getenv("FHE_CORE_CPU_SIMD");
  if (flag == nullptr) return CpuPath::kIfma;
  if (std::strcmp(flag, "0") == 0) return CpuPath::kScalar;
  if (std::strcmp(flag, "avx2") == 0) return CpuPath::kAvx2;
  return CpuPath::kIfma;
}

}  // namespace

CpuPath cpu_path_supported() {
#if FHE_CPU_X86
  static const CpuPath supported = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512ifma") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw"))
      return CpuPath::kIfma;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuPath::kAvx2;
    return CpuPath::kScalar;
  }();
  return supported;
#else
  return CpuPath::kScalar;
#endif
}

namespace {
std::atomic<int>& current_path() {
  static std::atomic<int> path{static_cast<int>(std::min(requested_path(), cpu_path_supported()))};
  return path;
}
}  // namespace

CpuPath cpu_path() { return static_cast<CpuPath>(current_path().load(std::memory_order_relaxed)); }

bool set_cpu_path(CpuPath path) {
  if (path > cpu_path_supported()) return false;
  current_path().store(static_cast<int>(path), std::memory_order_relaxed);
  return true;
}

namespace {

// The scalar (portable) rows: Harvey's lazy butterflies with the tables' Shoup companions, the
// 64 x 64 -> 128-bit products of common/modarith.h. The stages of half-size 2 and 1 run together on
// blocks of four words (one pass over the row instead of two), the forward transform's final
// reduction fused into them, and the first pass reads `in` (no separate copy): the same butterflies
// in the same order as the plain loops of common/ntt.h, so the same words. Every row has N >= 2^10 words
// (ops/common.h, kMinLogN), as the blocked passes here and in the vector rows need.
void forward_row(const u64* in, u64* out, const u64* table, u64 q, int log_n) {
  const int64_t n = int64_t{1} << log_n;
  const u64* w = table + kFwd * n;
  const u64* ws = table + kFwdShoup * n;
  const u64* src = in;
  for (int64_t m = 1, t = n >> 1; t >= 4; m <<= 1, t >>= 1) {
    for (int64_t i = 0; i < m; ++i) {
      const u64* sx = src + 2 * i * t;
      u64* x = out + 2 * i * t;
      const u64 wi = w[m + i], wsi = ws[m + i];
#pragma GCC unroll 4
      for (int64_t j = 0; j < t; ++j) {
        u64 a = sx[j], b = sx[j + t];
        ct_butterfly(a, b, wi, wsi, q);
        x[j] = a;
        x[j + t] = b;
      }
    }
    src = out;
  }
  const int64_t quarter = n >> 2, half = n >> 1;
  for (int64_t i = 0; i < quarter; ++i) {  // t = 2 (group i) and t = 1 (groups 2i, 2i + 1), then [0, 4q) -> [0, q)
    const u64* s4 = src + 4 * i;
    u64 x0 = s4[0], x1 = s4[1], x2 = s4[2], x3 = s4[3];
    ct_butterfly(x0, x2, w[quarter + i], ws[quarter + i], q);
    ct_butterfly(x1, x3, w[quarter + i], ws[quarter + i], q);
    ct_butterfly(x0, x1, w[half + 2 * i], ws[half + 2 * i], q);
    ct_butterfly(x2, x3, w[half + 2 * i + 1], ws[half + 2 * i + 1], q);
    u64* o = out + 4 * i;
    o[0] = reduce_4q(x0, q);
    o[1] = reduce_4q(x1, q);
    o[2] = reduce_4q(x2, q);
    o[3] = reduce_4q(x3, q);
  }
}

void inverse_row(const u64* in, u64* out, const u64* table, u64 q, int log_n) {
  const int64_t n = int64_t{1} << log_n;
  const u64* w = table + kInv * n;
  const u64* ws = table + kInvShoup * n;
  const int64_t quarter = n >> 2, half = n >> 1;
  for (int64_t i = 0; i < quarter; ++i) {  // t = 1 (groups 2i, 2i + 1) and t = 2 (group i) on words 4i .. 4i + 3
    const u64* s4 = in + 4 * i;
    u64 x0 = s4[0], x1 = s4[1], x2 = s4[2], x3 = s4[3];
    gs_butterfly(x0, x1, w[half + 2 * i], ws[half + 2 * i], q);
    gs_butterfly(x2, x3, w[half + 2 * i + 1], ws[half + 2 * i + 1], q);
    gs_butterfly(x0, x2, w[quarter + i], ws[quarter + i], q);
    gs_butterfly(x1, x3, w[quarter + i], ws[quarter + i], q);
    u64* o = out + 4 * i;
    o[0] = x0;
    o[1] = x1;
    o[2] = x2;
    o[3] = x3;
  }
  for (int64_t m = n >> 3, t = 4; m > 1; m >>= 1, t <<= 1) {
    for (int64_t i = 0; i < m; ++i) {
      u64* x = out + 2 * i * t;
      const u64 wi = w[m + i], wsi = ws[m + i];
#pragma GCC unroll 4
      for (int64_t j = 0; j < t; ++j) gs_butterfly(x[j], x[j + t], wi, wsi, q);
    }
  }
#pragma GCC unroll 4
  for (int64_t j = 0; j < half; ++j) gs_butterfly_last(out[j], out[j + half], w, ws, q);
}

#if FHE_CPU_X86
namespace vec {
using namespace ifma;

// The three stages with butterfly half-size t < 8 run together on blocks of 16 consecutive
// words held in two registers. For the stage of half-size t, X holds the first halves of the
// block's 16 / (2t) groups and Y the second halves: lane l of X is word 2t*(l/t) + l%t, its
// twiddle the (l/t)-th of the block's groups. Between stages one two-source permute per register
// moves the words from one (X, Y) split to the next; the block is loaded and stored once.
struct SmallChain {
  int t[3];                 // half-sizes in the order they run (4, 2, 1 or 1, 2, 4)
  __m512i to_x[3], to_y[3];  // lanes of the previous pair ((A, B) for the first) forming X and Y
  __m512i to_a, to_b;        // lanes of the last (X, Y) forming the block's words 0..7, 8..15
  __m512i w_idx[3];          // lane l -> l / t
};

FHE_IFMA_FN SmallChain small_chain(bool forward) {
  SmallChain c;
  alignas(64) long long x[8], y[8], wi[8], a[8], b[8];
  int pos[16];  // where word e is now: lane of the pair (0..7 first register, 8..15 second)
  for (int e = 0; e < 16; ++e) pos[e] = e;
  for (int s = 0; s < 3; ++s) {
    const int t = forward ? 4 >> s : 1 << s;
    c.t[s] = t;
    int word_x[8], word_y[8];
    for (int l = 0; l < 8; ++l) {
      word_x[l] = 2 * t * (l / t) + l % t;
      word_y[l] = word_x[l] + t;
      x[l] = pos[word_x[l]];
      y[l] = pos[word_y[l]];
      wi[l] = l / t;
    }
    for (int l = 0; l < 8; ++l) {
      pos[word_x[l]] = l;
      pos[word_y[l]] = 8 + l;
    }
    c.to_x[s] = _mm512_load_si512(x);
    c.to_y[s] = _mm512_load_si512(y);
    c.w_idx[s] = _mm512_load_si512(wi);
  }
  for (int e = 0; e < 8; ++e) {
    a[e] = pos[e];
    b[e] = pos[e + 8];
  }
  c.to_a = _mm512_load_si512(a);
  c.to_b = _mm512_load_si512(b);
  return c;
}

// The butterflies' constant product, in one of two arithmetics chosen per prime: kShift = 12 is
// the IFMA 52-bit Shoup product (q < 2^50; its companion is the table's w_shoup >> 12), kShift = 0
// the 64-bit one from 32-bit products (any q < 2^61; the table's w_shoup as is).
template <int kShift>
FHE_IFMA __m512i shoup(__m512i a, __m512i w, __m512i w_shoup, __m512i q) {
  if constexpr (kShift == 12) return mul_shoup_lazy(a, w, w_shoup, q);
  else return mul_shoup_lazy64(a, w, w_shoup, q);
}

template <int kShift>
FHE_IFMA __m512i companion(__m512i w_shoup) {
  if constexpr (kShift == 0) return w_shoup;
  else return _mm512_srli_epi64(w_shoup, kShift);
}

// x, y in [0, 4q) -> x + w*y, x - w*y in [0, 4q).
template <int kShift>
FHE_IFMA void ct(__m512i& x, __m512i& y, __m512i w, __m512i w52, __m512i q, __m512i two_q) {
  const __m512i xr = csub(x, two_q);
  const __m512i t = shoup<kShift>(y, w, w52, q);
  x = _mm512_add_epi64(xr, t);
  y = _mm512_sub_epi64(_mm512_add_epi64(xr, two_q), t);
}

// x, y in [0, 2q) -> x + y, (x - y)*w in [0, 2q).
template <int kShift>
FHE_IFMA void gs(__m512i& x, __m512i& y, __m512i w, __m512i w52, __m512i q, __m512i two_q) {
  const __m512i s = csub(_mm512_add_epi64(x, y), two_q);
  const __m512i d = _mm512_sub_epi64(_mm512_add_epi64(x, two_q), y);
  x = s;
  y = shoup<kShift>(d, w, w52, q);
}

// The twiddles of the 16/(2t) groups of 16-word block blk in the stage of half-size t, one per
// X lane (the 8 loaded words stay inside the table row: m + 8/t * blk + 7 < N).
template <int kShift>
FHE_IFMA void small_twiddles(const u64* w, const u64* ws, int64_t n, int t, int64_t blk, __m512i idx,
                             __m512i& wv, __m512i& w52) {
  const int64_t first = n / (2 * t) + (8 / t) * blk;
  wv = _mm512_permutexvar_epi64(idx, load(w + first));
  w52 = companion<kShift>(_mm512_permutexvar_epi64(idx, load(ws + first)));
}

// The three small stages on every 16-word block: reads src, writes out (may alias).
template <bool kForward, int kShift>
FHE_IFMA void small_stages(const u64* src, u64* out, const u64* w, const u64* ws, int64_t n, __m512i q,
                           __m512i two_q) {
  const SmallChain c = small_chain(kForward);
  for (int64_t blk = 0; blk < n / 16; ++blk) {
    __m512i x = load(src + 16 * blk), y = load(src + 16 * blk + 8);
    for (int s = 0; s < 3; ++s) {
      const __m512i nx = _mm512_permutex2var_epi64(x, c.to_x[s], y);
      const __m512i ny = _mm512_permutex2var_epi64(x, c.to_y[s], y);
      x = nx;
      y = ny;
      __m512i wv, w52;
      small_twiddles<kShift>(w, ws, n, c.t[s], blk, c.w_idx[s], wv, w52);
      if (kForward) ct<kShift>(x, y, wv, w52, q, two_q);
      else gs<kShift>(x, y, wv, w52, q, two_q);
    }
    if (kForward) {  // [0, 4q) -> [0, q): the forward transform's final reduction
      x = csub(csub(x, two_q), q);
      y = csub(csub(y, two_q), q);
    }
    store(out + 16 * blk, _mm512_permutex2var_epi64(x, c.to_a, y));
    store(out + 16 * blk + 8, _mm512_permutex2var_epi64(x, c.to_b, y));
  }
}

template <int kShift>
FHE_IFMA_FN void forward_row(const u64* in, u64* out, const u64* table, u64 q_scalar, int log_n) {
  const int64_t n = int64_t{1} << log_n;
  const u64* w = table + kFwd * n;
  const u64* ws = table + kFwdShoup * n;
  const __m512i q = set1(q_scalar), two_q = set1(2 * q_scalar);
  const u64* src = in;  // the first stage reads `in` and writes `out` (no separate copy)
  int64_t m = 1, t = n >> 1;
  for (; t >= 8; m <<= 1, t >>= 1) {
    for (int64_t i = 0; i < m; ++i) {
      const __m512i wv = set1(w[m + i]), w52 = set1(ws[m + i] >> kShift);
      const u64* sx = src + 2 * i * t;
      u64* x = out + 2 * i * t;
      for (int64_t j = 0; j < t; j += 8) {
        __m512i a = load(sx + j), b = load(sx + j + t);
        ct<kShift>(a, b, wv, w52, q, two_q);
        store(x + j, a);
        store(x + j + t, b);
      }
    }
    src = out;
  }
  small_stages<true, kShift>(src, out, w, ws, n, q, two_q);  // t = 4, 2, 1 and the final reduction
}

template <int kShift>
FHE_IFMA_FN void inverse_row(const u64* in, u64* out, const u64* table, u64 q_scalar, int log_n) {
  const int64_t n = int64_t{1} << log_n;
  const u64* w = table + kInv * n;
  const u64* ws = table + kInvShoup * n;
  const __m512i q = set1(q_scalar), two_q = set1(2 * q_scalar);
  small_stages<false, kShift>(in, out, w, ws, n, q, two_q);  // t = 1, 2, 4 (reads `in`, no separate copy)
  int64_t m = n >> 4, t = 8;
  for (; m > 1; m >>= 1, t <<= 1) {
    for (int64_t i = 0; i < m; ++i) {
      const __m512i wv = set1(w[m + i]), w52 = set1(ws[m + i] >> kShift);
      u64* x = out + 2 * i * t;
      for (int64_t j = 0; j < t; j += 8) {
        __m512i a = load(x + j), b = load(x + j + t);
        gs<kShift>(a, b, wv, w52, q, two_q);
        store(x + j, a);
        store(x + j + t, b);
      }
    }
  }
  // m = 1 with N^-1 folded in (w[0] = N^-1, w[1] = psi^-brv(1) N^-1), canonical outputs.
  const __m512i n_inv = set1(w[0]), n_inv52 = set1(ws[0] >> kShift);
  const __m512i w1 = set1(w[1]), w1_52 = set1(ws[1] >> kShift);
  const int64_t half = n >> 1;
  for (int64_t j = 0; j < half; j += 8) {
    const __m512i x = load(out + j), y = load(out + j + half);
    const __m512i s = _mm512_add_epi64(x, y);                            // < 4q
    const __m512i d = _mm512_sub_epi64(_mm512_add_epi64(x, two_q), y);  // < 4q
    store(out + j, csub(shoup<kShift>(s, n_inv, n_inv52, q), q));
    store(out + j + half, csub(shoup<kShift>(d, w1, w1_52, q), q));
  }
}

}  // namespace vec
#endif

#if FHE_CPU_X86
namespace fp64 {
using namespace avx2;

// The rows as doubles (avx2.h), four butterflies per instruction sequence. Values stay in `out`, reinterpreted as
// doubles between the first pass (which reads `in`'s words) and the last (which writes canonical words). The
// stages of half-size 2 and 1 run together on eight words in two registers, (x0..x3, x4..x7): for t = 2 the
// pairs are the 128-bit halves, (x0 x1 x4 x5 | x2 x3 x6 x7), for t = 1 the even and odd words (unpacklo / hi).
FHE_AVX2 __m256d load_d(const u64* p) { return _mm256_loadu_pd(reinterpret_cast<const double*>(p)); }
FHE_AVX2 void store_d(u64* p, __m256d v) { _mm256_storeu_pd(reinterpret_cast<double*>(p), v); }

// The twiddles of the t = 2 stage for the blocks of four words at 4b and 4b + 4: (w_b, w_b, w_b+1, w_b+1).
FHE_AVX2 Twiddle pair_twiddle(const u64* w, const u64* ws) {
  const __m256i wv = _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
  const __m256i wsv = _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ws)));
  return twiddle(_mm256_permute4x64_epi64(wv, 0x50), _mm256_permute4x64_epi64(wsv, 0x50));
}

// x, y -> x + y w, x - y w (values grow by less than 3q/4).
FHE_AVX2 void ct(__m256d& x, __m256d& y, Twiddle w, __m256d q) {
  const __m256d t = mul(y, w, q);
  y = _mm256_sub_pd(x, t);
  x = _mm256_add_pd(x, t);
}

// x, y (|x|, |y| <= q) -> centred x + y, (x - y) w: both at most 3q/4 in magnitude.
FHE_AVX2 void gs(__m256d& x, __m256d& y, Twiddle w, __m256d q, __m256d q_inv) {
  const __m256d d = _mm256_sub_pd(x, y);
  x = centre(_mm256_add_pd(x, y), q, q_inv);
  y = mul(d, w, q);
}

// Forward: the words enter centred (u - 2q: |x| <= 2q for inputs below 4q).
FHE_AVX2_FN void forward_row(const u64* in, u64* out, const u64* table, u64 q_word, int log_n) {
  const int64_t n = int64_t{1} << log_n, quarter = n >> 2, half = n >> 1;
  const u64* w = table + kFwd * n;
  const u64* ws = table + kFwdShoup * n;
  const __m256d q = _mm256_set1_pd(static_cast<double>(q_word)), q_inv = _mm256_set1_pd(1.0 / static_cast<double>(q_word));
  const __m256d two_q = _mm256_add_pd(q, q);
  {  // m = 1: words in, doubles out
    const Twiddle w1 = twiddle(w[1], ws[1]);
    for (int64_t j = 0; j < half; j += 4) {
      __m256d x = _mm256_sub_pd(to_double(load_words(in + j)), two_q), y = _mm256_sub_pd(to_double(load_words(in + j + half)), two_q);
      ct(x, y, w1, q);
      store_d(out + j, x);
      store_d(out + j + half, y);
    }
  }
  for (int64_t m = 2, t = n >> 2; t >= 4; m <<= 1, t >>= 1) {
    for (int64_t i = 0; i < m; ++i) {
      u64* x = out + 2 * i * t;
      const Twiddle wi = twiddle(w[m + i], ws[m + i]);
      for (int64_t j = 0; j < t; j += 4) {
        __m256d a = load_d(x + j), b = load_d(x + j + t);
        ct(a, b, wi, q);
        store_d(x + j, a);
        store_d(x + j + t, b);
      }
    }
  }
  for (int64_t b = 0; b < quarter; b += 2) {  // t = 2 and t = 1 on words 4b .. 4b + 7, then canonical words
    const __m256d lo = load_d(out + 4 * b), hi = load_d(out + 4 * b + 4);
    __m256d x = _mm256_permute2f128_pd(lo, hi, 0x20), y = _mm256_permute2f128_pd(lo, hi, 0x31);
    ct(x, y, pair_twiddle(w + quarter + b, ws + quarter + b), q);
    __m256d even = _mm256_unpacklo_pd(x, y), odd = _mm256_unpackhi_pd(x, y);  // (x0 x2 x4 x6), (x1 x3 x5 x7)
    ct(even, odd, twiddle(load_words(w + half + 2 * b), load_words(ws + half + 2 * b)), q);
    x = _mm256_unpacklo_pd(even, odd);  // x0 x1 x4 x5
    y = _mm256_unpackhi_pd(even, odd);  // x2 x3 x6 x7
    store_words(out + 4 * b, canonical(_mm256_permute2f128_pd(x, y, 0x20), q, q_inv));
    store_words(out + 4 * b + 4, canonical(_mm256_permute2f128_pd(x, y, 0x31), q, q_inv));
  }
}

// Inverse: the words enter centred (u - q: |x| <= q for inputs below 2q).
FHE_AVX2_FN void inverse_row(const u64* in, u64* out, const u64* table, u64 q_word, int log_n) {
  const int64_t n = int64_t{1} << log_n, quarter = n >> 2, half = n >> 1;
  const u64* w = table + kInv * n;
  const u64* ws = table + kInvShoup * n;
  const __m256d q = _mm256_set1_pd(static_cast<double>(q_word)), q_inv = _mm256_set1_pd(1.0 / static_cast<double>(q_word));
  for (int64_t b = 0; b < quarter; b += 2) {  // t = 1 and t = 2 on words 4b .. 4b + 7: words in, doubles out
    const __m256d lo = _mm256_sub_pd(to_double(load_words(in + 4 * b)), q);
    const __m256d hi = _mm256_sub_pd(to_double(load_words(in + 4 * b + 4)), q);
    const __m256d x = _mm256_permute2f128_pd(lo, hi, 0x20), y = _mm256_permute2f128_pd(lo, hi, 0x31);
    __m256d even = _mm256_unpacklo_pd(x, y), odd = _mm256_unpackhi_pd(x, y);  // (x0 x2 x4 x6), (x1 x3 x5 x7)
    gs(even, odd, twiddle(load_words(w + half + 2 * b), load_words(ws + half + 2 * b)), q, q_inv);
    __m256d a = _mm256_unpacklo_pd(even, odd), c = _mm256_unpackhi_pd(even, odd);  // x0 x1 x4 x5, x2 x3 x6 x7
    gs(a, c, pair_twiddle(w + quarter + b, ws + quarter + b), q, q_inv);
    store_d(out + 4 * b, _mm256_permute2f128_pd(a, c, 0x20));
    store_d(out + 4 * b + 4, _mm256_permute2f128_pd(a, c, 0x31));
  }
  for (int64_t m = n >> 3, t = 4; m > 1; m >>= 1, t <<= 1) {
    for (int64_t i = 0; i < m; ++i) {
      u64* x = out + 2 * i * t;
      const Twiddle wi = twiddle(w[m + i], ws[m + i]);
      for (int64_t j = 0; j < t; j += 4) {
        __m256d a = load_d(x + j), b = load_d(x + j + t);
        gs(a, b, wi, q, q_inv);
        store_d(x + j, a);
        store_d(x + j + t, b);
      }
    }
  }
  // m = 1 with N^-1 folded in (w[0] = N^-1, w[1] = psi^-brv(1) N^-1), canonical words out.
  const Twiddle n_inv = twiddle(w[0], ws[0]), w1 = twiddle(w[1], ws[1]);
  for (int64_t j = 0; j < half; j += 4) {
    const __m256d x = load_d(out + j), y = load_d(out + j + half);
    store_words(out + j, canonical(mul(_mm256_add_pd(x, y), n_inv, q), q, q_inv));
    store_words(out + j + half, canonical(mul(_mm256_sub_pd(x, y), w1, q), q, q_inv));
  }
}

}  // namespace fp64
#endif

using RowFn = void (*)(const u64*, u64*, const u64*, u64, int);

// Every row but the skipped ones (NttSkip), each read at ntt_in_offset (a strided batch in place), in the arithmetic
// of the process's path (path.h): vector52 for primes below 2^50 and vector64 for the others (IFMA), avx2 for primes
// below 2^46 (AVX2), scalar for the rest. The vector rows work in blocks of 16 words.
struct RowFns {
  RowFn scalar, avx2, vector52, vector64;
};

void for_each_row(const NttArgs& a, const RowFns& fns) {
  const int64_t n = int64_t{1} << a.log_n;
  const CpuPath path = n >= 16 ? cpu_path() : CpuPath::kScalar;
  at::parallel_for(0, a.rows, parallel_grain(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      if (ntt_row_skipped(a.skip, r, a.limbs)) continue;
      const int limb = static_cast<int>(r % a.limbs);
      const u64 q = a.moduli[limb].value;
      RowFn fn = fns.scalar;
      if (path == CpuPath::kIfma) fn = q < kIfmaMaxPrime ? fns.vector52 : fns.vector64;
      else if (path == CpuPath::kAvx2 && q < kAvx2MaxPrime) fn = fns.avx2;
      fn(a.in + ntt_in_offset(a, r), a.out + r * n, a.table + limb * a.table_rows * n, q, a.log_n);
    }
  });
}

// ModDown's last step after the transform (NttEpilogue): (c - x) * consts per batch, then sigma_k(add).
void epilogue(const NttArgs& a) {
  const int64_t n = int64_t{1} << a.log_n;
  const NttEpilogue& e = a.epilogue;
  std::vector<u64> permuted(e.add_galois != 1 ? a.limbs * n : 0);
  for (int64_t b = 0; b < a.rows / a.limbs; ++b) {
    u64* x = a.out + b * a.limbs * n;
    elementwise(ElementwiseArgs{ElementwiseOp::kSubMulConst, e.sub_from + b * e.batch_stride, x, nullptr, e.consts,
                                e.consts_shoup, x, a.moduli, a.limbs, a.limbs, a.limbs, n});
    if (b >= e.add_batches) continue;
    const u64* add = e.add + b * a.limbs * n;
    if (e.add_galois != 1) {
      automorphism_ntt(AutomorphismArgs{add, permuted.data(), a.moduli, a.limbs, a.limbs, a.log_n, e.add_galois});
      add = permuted.data();
    }
    elementwise(ElementwiseArgs{ElementwiseOp::kAdd, x, add, nullptr, nullptr, nullptr, x, a.moduli, a.limbs, a.limbs,
                                a.limbs, n});
  }
}

#if FHE_CPU_X86
void forward(const NttArgs& a) {
  for_each_row(a, {forward_row, fp64::forward_row, vec::forward_row<12>, vec::forward_row<0>});
}
void inverse(const NttArgs& a) {
  for_each_row(a, {inverse_row, fp64::inverse_row, vec::inverse_row<12>, vec::inverse_row<0>});
}
#else
void forward(const NttArgs& a) { for_each_row(a, {forward_row, forward_row, forward_row, forward_row}); }
void inverse(const NttArgs& a) { for_each_row(a, {inverse_row, inverse_row, inverse_row, inverse_row}); }
#endif

}  // namespace

void ntt_forward(const NttArgs& args) {
  forward(args);
  if (args.epilogue.sub_from != nullptr) epilogue(args);
}

// sigma_k(in) (NttArgs::galois) or in * times first, into `permuted`, then the transform of those.
void ntt_inverse(const NttArgs& args) {
  if (args.galois == 1 && args.times == nullptr) return inverse(args);
  const int64_t n = int64_t{1} << args.log_n;
  if (args.galois != 1) {
    automorphism_ntt(AutomorphismArgs{args.in, args.permuted, args.moduli, args.rows, args.limbs, args.log_n,
                                      args.galois});
  } else {
    elementwise(ElementwiseArgs{ElementwiseOp::kMul, args.in, args.times, nullptr, nullptr, nullptr, args.permuted,
                                args.moduli, args.rows, args.rows, args.limbs, n});
  }
  NttArgs plain = args;
  plain.in = args.permuted;
  plain.in_batch_stride = 0;
  inverse(plain);
}

}  // namespace fhe::cpu
