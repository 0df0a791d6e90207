// CPU negacyclic NTT: the iterative Cooley-Tukey / Gentleman-Sande loops of common/ntt.h, one row per task on
// torch's intra-op thread pool, and the compositions the CUDA kernels fuse (ModDown's epilogue, a rotation's
// sigma_k and HMult's products before the inverse).
//
// Primes below 2^50 on a CPU with AVX-512 IFMA take a vector path (eight butterflies per
// instruction sequence, cpu/ifma.h); the others take the scalar reference loops. Both give the
// canonical residues of the same transform, so their outputs are equal word for word.
#include <ATen/Parallel.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "../common/ntt.h"
#include "../kernels.h"
#include "parallel.h"
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

using RowFn = void (*)(const u64*, u64*, const u64*, u64, int);

// Every row but the skipped ones (NttSkip), each read at ntt_in_offset (a strided batch in place). vector52: primes
// below 2^50 (IFMA); vector64: the others (64-bit products from 32-bit ones).
void for_each_row(const NttArgs& a, RowFn scalar_fn, RowFn vector52_fn, RowFn vector64_fn) {
  const int64_t n = int64_t{1} << a.log_n;
  const bool simd = vector52_fn != nullptr && n >= 16 && ifma_enabled();  // blocks of 16 words
  at::parallel_for(0, a.rows, parallel_grain(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      if (ntt_row_skipped(a.skip, r, a.limbs)) continue;
      const int limb = static_cast<int>(r % a.limbs);
      const u64 q = a.moduli[limb].value;
      const RowFn fn = !simd ? scalar_fn : q < kIfmaMaxPrime ? vector52_fn : vector64_fn;
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

#if FHE_CPU_HAVE_IFMA
void forward(const NttArgs& a) { for_each_row(a, forward_row, vec::forward_row<12>, vec::forward_row<0>); }
void inverse(const NttArgs& a) { for_each_row(a, inverse_row, vec::inverse_row<12>, vec::inverse_row<0>); }
#else
void forward(const NttArgs& a) { for_each_row(a, forward_row, nullptr, nullptr); }
void inverse(const NttArgs& a) { for_each_row(a, inverse_row, nullptr, nullptr); }
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
