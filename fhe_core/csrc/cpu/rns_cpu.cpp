// CPU element-wise RNS ops, fast basis conversion and Galois automorphisms.
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <vector>

#include "../common/ntt.h"
#include "../kernels.h"
#include "parallel.h"
#include "ifma.h"

namespace fhe::cpu {

namespace {

#if FHE_CPU_HAVE_IFMA
// The products of one row for q < 2^50, eight words at a time; returns how many words it did
// (a multiple of 8; the caller finishes the tail). Add, sub and neg are left to the compiler's
// own vectorisation (they are bound by memory).
FHE_IFMA_FN int64_t elementwise_row_vector(const ElementwiseArgs& a, int limb, const u64* x, const u64* y,
                                           const u64* z, u64* out) {
  using namespace ifma;
  const u64 q_scalar = a.moduli[limb].value;
  const __m512i q = set1(q_scalar);
  const int64_t n8 = a.n & ~int64_t{7};
  switch (a.op) {
    case ElementwiseOp::kMul:
    case ElementwiseOp::kMulAdd: {
      const Reducer red = make_reducer(q_scalar);
      for (int64_t i = 0; i < n8; i += 8) {
        Acc acc = acc_zero();
        mac(acc, load(x + i), load(y + i));
        if (a.op == ElementwiseOp::kMulAdd) acc.lo = _mm512_add_epi64(acc.lo, load(z + i));
        store(out + i, reduce(acc, red));
      }
      return n8;
    }
    case ElementwiseOp::kMulConst:
    case ElementwiseOp::kSubMulConst: {
      const __m512i w = set1(a.consts[limb]), w52 = set1(a.consts_shoup[limb] >> 12);
      for (int64_t i = 0; i < n8; i += 8) {
        __m512i v = load(x + i);
        if (a.op == ElementwiseOp::kSubMulConst) v = _mm512_sub_epi64(_mm512_add_epi64(v, q), load(y + i));  // (0, 2q)
        store(out + i, csub(mul_shoup_lazy(v, w, w52, q), q));
      }
      return n8;
    }
    default:
      return 0;
  }
}
#endif

}  // namespace

void elementwise(const ElementwiseArgs& a) {
#if FHE_CPU_HAVE_IFMA
  const bool simd = ifma_enabled();
#endif
  at::parallel_for(0, a.rows, parallel_grain(a.n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int limb = static_cast<int>(r % a.limbs);
      const Modulus m = a.moduli[limb];
      const u64 q = m.value;
      const u64* x = a.a + r * a.n;
      const u64* y = a.b ? a.b + (r % a.b_rows) * a.n : nullptr;
      const u64* z = a.op == ElementwiseOp::kMulAdd ? a.c + r * a.n : nullptr;
      u64* out = a.out + r * a.n;
      int64_t done = 0;
#if FHE_CPU_HAVE_IFMA
      if (simd && q < kIfmaMaxPrime) done = elementwise_row_vector(a, limb, x, y, z, out);
#endif
      x += done;
      y = y ? y + done : nullptr;
      z = z ? z + done : nullptr;
      out += done;
      const int64_t len = a.n - done;
      switch (a.op) {
        case ElementwiseOp::kAdd:
          for (int64_t i = 0; i < len; ++i) out[i] = add_mod(x[i], y[i], q);
          break;
        case ElementwiseOp::kSub:
          for (int64_t i = 0; i < len; ++i) out[i] = sub_mod(x[i], y[i], q);
          break;
        case ElementwiseOp::kNeg:
          for (int64_t i = 0; i < len; ++i) out[i] = neg_mod(x[i], q);
          break;
        case ElementwiseOp::kMul:
          for (int64_t i = 0; i < len; ++i) out[i] = mul_mod(x[i], y[i], m);
          break;
        case ElementwiseOp::kMulConst: {
          const u64 w = a.consts[limb], ws = a.consts_shoup[limb];
          for (int64_t i = 0; i < len; ++i) out[i] = mul_shoup(x[i], w, ws, q);
          break;
        }
        case ElementwiseOp::kSubMulConst: {
          const u64 w = a.consts[limb], ws = a.consts_shoup[limb];
          for (int64_t i = 0; i < len; ++i) out[i] = mul_shoup(sub_mod(x[i], y[i], q), w, ws, q);
          break;
        }
        case ElementwiseOp::kMulAdd: {
          for (int64_t i = 0; i < len; ++i) out[i] = mul_add_mod(x[i], y[i], z[i], m);
          break;
        }
      }
    }
  });
}

namespace {

constexpr int64_t kConvChunk = 256;  // coefficients per task: y[alpha][kConvChunk] stays in L1/L2

// One destination row of a Conv task, scalar: out[i] = sum_k y[k][i] * consts[k][r] (+ v[i] * (-Q)).
void conv_row_scalar(const ConvArgs& a, const u64* y, const u64* consts, const u64* overflow, int count, int r,
                     int64_t len, u64* out) {
  for (int64_t i = 0; i < len; ++i) {
    U128 acc{0, 0};
    for (int k = 0; k < count; ++k) mac128(acc, y[k * kConvChunk + i], consts[k * a.rows + r]);
    if (overflow != nullptr) mac128(acc, overflow[i], a.neg_q_mod_p[r]);
    out[i] = reduce128(acc, a.dst[r]);
  }
}

#if FHE_CPU_HAVE_IFMA
// The vector Conv needs, per destination prime p_r, the terms' sum within ifma::SumBound.
// y_k is canonical mod q_k; for q_k >= 2^52 it is split as y_lo + y_hi 2^52 and y_hi multiplies
// the constant (Q_j/q_k) 2^52 mod p_r (big_consts), one more term.
struct ConvPlan {
  std::vector<uint8_t> vector_row;                 // [dnum, rows]: this (digit, row) takes the IFMA path
  std::vector<ifma::Reducer> reducers;        // [rows]
  std::vector<u64> big_consts;                // [dnum, alpha, rows], only where q_k >= 2^52
  std::vector<uint8_t> big_source;                 // [q_count]
};

ConvPlan conv_plan(const ConvArgs& a) {
  ConvPlan plan;
  plan.vector_row.assign(static_cast<size_t>(a.dnum) * a.rows, 0);
  plan.big_source.resize(a.q_count);
  plan.big_consts.assign(static_cast<size_t>(a.dnum) * a.alpha * a.rows, 0);
  for (int k = 0; k < a.q_count; ++k) plan.big_source[k] = a.src[k].value >= (u64{1} << 52);
  for (int r = 0; r < a.rows; ++r) {
    const u64 p = a.dst[r].value;
    plan.reducers.push_back(p < kIfmaMaxPrime ? ifma::make_reducer(p) : ifma::Reducer{p, 0, 0, 0});
  }
  const u64 two52 = u64{1} << 52;
  for (int j = 0; j < a.dnum; ++j) {
    const int first = j * a.alpha, count = std::min(a.alpha, a.q_count - first);
    for (int r = 0; r < a.rows; ++r) {
      const Modulus& p = a.dst[r];
      ifma::SumBound bound;
      for (int k = 0; k < count; ++k) {
        const u64 q = a.src[first + k].value;
        bound.add(std::min(q, two52), p.value);                       // y (or its low 52 bits)
        if (plan.big_source[first + k]) bound.add((q >> 52) + 1, p.value);  // y's high bits
      }
      if (a.neg_q_mod_p != nullptr) bound.add(static_cast<u64>(count) + 1, p.value);  // v <= count
      plan.vector_row[j * a.rows + r] = bound.fits(p.value);
      if (!plan.vector_row[j * a.rows + r]) continue;
      for (int k = 0; k < count; ++k) {
        if (!plan.big_source[first + k]) continue;
        const size_t idx = (static_cast<size_t>(j) * a.alpha + k) * a.rows + r;
        plan.big_consts[idx] = mul_mod(a.qhat_mod_p[idx], two52 % p.value, p);
      }
    }
  }
  return plan;
}

// y_k = x_k * qhat_inv_k mod q_k (canonical), eight coefficients at a time; len % 8 == 0.
FHE_IFMA_FN void conv_scale_vector(const u64* in, u64 w, u64 w_shoup, u64 q, int64_t len, u64* y) {
  using namespace ifma;
  const __m512i wv = set1(w), w52 = set1(w_shoup >> 12), qv = set1(q);
  for (int64_t i = 0; i < len; i += 8) store(y + i, csub(mul_shoup_lazy(load(in + i), wv, w52, qv), qv));
}

// round(sum_k y_k / q_k) as conv_rounded_overflow computes it, eight lanes at a time: the same
// correctly rounded double operations in the same order, so the same words.
FHE_IFMA_FN void conv_overflow_vector(const u64* y, const Modulus* src, int count, int64_t len, u64* overflow) {
  for (int64_t i = 0; i < len; i += 8) {
    __m512d sum = _mm512_set1_pd(0.5);
    for (int k = 0; k < count; ++k) {
      const __m512d num = _mm512_cvtepu64_pd(ifma::load(y + k * kConvChunk + i));
      sum = _mm512_add_pd(sum, _mm512_div_pd(num, _mm512_set1_pd(static_cast<double>(src[k].value))));
    }
    ifma::store(overflow + i, _mm512_cvttpd_epu64(sum));
  }
}

// One destination row, 32 coefficients per step (four independent accumulators hide the
// multiply-add latency); len % 32 == 0.
FHE_IFMA_FN void conv_row_vector(const ConvArgs& a, const u64* y, const u64* consts, const u64* big_consts,
                                 const uint8_t* big_source, const u64* overflow, int count, int r,
                                 const ifma::Reducer& red, int64_t len, u64* out) {
  using namespace ifma;
  for (int64_t i = 0; i < len; i += 32) {
    Acc acc[4] = {acc_zero(), acc_zero(), acc_zero(), acc_zero()};
    for (int k = 0; k < count; ++k) {
      const __m512i c = set1(consts[k * a.rows + r]);
      const u64* yk = y + k * kConvChunk + i;
      for (int v = 0; v < 4; ++v) mac(acc[v], load(yk + 8 * v), c);  // IFMA reads y's low 52 bits
      if (big_source[k]) {
        const __m512i c_big = set1(big_consts[k * a.rows + r]);
        for (int v = 0; v < 4; ++v) mac(acc[v], _mm512_srli_epi64(load(yk + 8 * v), 52), c_big);
      }
    }
    if (overflow != nullptr) {
      const __m512i neg_q = set1(a.neg_q_mod_p[r]);
      for (int v = 0; v < 4; ++v) mac(acc[v], load(overflow + i + 8 * v), neg_q);
    }
    for (int v = 0; v < 4; ++v) store(out + i + 8 * v, reduce(acc[v], red));
  }
}
#endif

}  // namespace

void conv(const ConvArgs& a) {
  const int64_t chunks = (a.n + kConvChunk - 1) / kConvChunk;
#if FHE_CPU_HAVE_IFMA
  const bool simd = ifma_enabled();
  const ConvPlan plan = simd ? conv_plan(a) : ConvPlan{};
#endif
  const int64_t task_words = (static_cast<int64_t>(a.alpha) + a.rows) * std::min(kConvChunk, a.n);
  at::parallel_for(0, a.batch * a.dnum * chunks, parallel_grain(task_words), [&](int64_t begin, int64_t end) {
    std::vector<u64> y(static_cast<size_t>(a.alpha) * kConvChunk);
    std::vector<u64> overflow(a.neg_q_mod_p != nullptr ? kConvChunk : 0);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / (a.dnum * chunks);
      const int j = static_cast<int>(task / chunks % a.dnum);
      const int64_t c0 = (task % chunks) * kConvChunk, len = std::min(kConvChunk, a.n - c0);
      const int first = j * a.alpha, count = std::min(a.alpha, a.q_count - first);
      const u64* in = a.in + b * a.q_count * a.n;
      u64* out = a.out + (b * a.dnum + j) * a.rows * a.n;
      const u64* consts = a.qhat_mod_p + static_cast<int64_t>(j) * a.alpha * a.rows;
#if FHE_CPU_HAVE_IFMA
      const bool vector_chunk = simd && len % 32 == 0;
#else
      const bool vector_chunk = false;
#endif
      for (int k = 0; k < count; ++k) {
        const int row = first + k;
        const u64* x = in + row * a.n + c0;
        u64* yk = y.data() + k * kConvChunk;
#if FHE_CPU_HAVE_IFMA
        if (vector_chunk && a.src[row].value < kIfmaMaxPrime) {
          conv_scale_vector(x, a.qhat_inv[row], a.qhat_inv_shoup[row], a.src[row].value, len, yk);
          continue;
        }
#endif
        for (int64_t i = 0; i < len; ++i) yk[i] = mul_shoup(x[i], a.qhat_inv[row], a.qhat_inv_shoup[row], a.src[row].value);
      }
      const u64* v = nullptr;
      if (a.neg_q_mod_p != nullptr) {
#if FHE_CPU_HAVE_IFMA
        if (vector_chunk) conv_overflow_vector(y.data(), a.src + first, count, len, overflow.data());
        else
#endif
          for (int64_t i = 0; i < len; ++i) overflow[i] = conv_rounded_overflow(&y[i], kConvChunk, a.src + first, count);
        v = overflow.data();
      }
      for (int r = 0; r < a.rows; ++r) {
        u64* row_out = out + r * a.n + c0;
#if FHE_CPU_HAVE_IFMA
        if (vector_chunk && plan.vector_row[j * a.rows + r]) {
          conv_row_vector(a, y.data(), consts, plan.big_consts.data() + static_cast<size_t>(j) * a.alpha * a.rows,
                          plan.big_source.data() + first, v, count, r, plan.reducers[r], len, row_out);
          continue;
        }
#endif
        conv_row_scalar(a, y.data(), consts, v, count, r, len, row_out);
      }
    }
  });
}

void center_lift(const CenterLiftArgs& a) {
  at::parallel_for(0, a.batch * a.l_out, parallel_grain(a.n), [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / a.l_out;
      const int j = static_cast<int>(task % a.l_out);
      const u64* in = a.in + b * a.n;
      u64* out = a.out + task * a.n;
      for (int64_t i = 0; i < a.n; ++i) out[i] = center_lift_one(in[i], a.src, a.dst[j]);
    }
  });
}

namespace {

// Bit reversal of the low `bits` bits through a byte table (the loop of common/ntt.h costs ~50
// instructions per index; this table is built once).
u32 bit_reverse_fast(u32 x, int bits) {
  static const auto table = [] {
    std::array<uint8_t, 256> t{};
    for (u32 b = 0; b < 256; ++b) t[b] = static_cast<uint8_t>(bit_reverse(b, 8));
    return t;
  }();
  const u32 r = (u32{table[x & 0xff]} << 24) | (u32{table[(x >> 8) & 0xff]} << 16) |
                (u32{table[(x >> 16) & 0xff]} << 8) | u32{table[x >> 24]};
  return r >> (32 - bits);
}

}  // namespace

// NTT-domain automorphism. Slot i = brv(j) holds the evaluation at psi^(2j+1), so it reads slot
// brv(k j + (k-1)/2 mod N) (galois_ntt_source). Because the low bits of k j + c depend only on the
// low bits of j, every aligned run of S output slots reads exactly one aligned block of S input
// slots: the gather below stays within one 8 KiB block per 1024 outputs, and the next block is
// prefetched while the current one is permuted (the blocks come in an order the hardware
// prefetcher cannot guess).
void automorphism_ntt(const AutomorphismArgs& a) {
  const int64_t n = int64_t{1} << a.log_n;
  const u64 mask = static_cast<u64>(n - 1), c = (a.galois - 1) / 2;
  std::vector<u32> source(n);
  for (int64_t j = 0; j < n; ++j)
    source[bit_reverse_fast(static_cast<u32>(j), a.log_n)] =
        bit_reverse_fast(static_cast<u32>((a.galois * static_cast<u64>(j) + c) & mask), a.log_n);
  constexpr int64_t kSegment = 1024;  // words: 8 KiB
  const int64_t segment = std::min(n, kSegment);
  at::parallel_for(0, a.rows, parallel_grain(n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const u64* in = a.in + r * n;
      u64* out = a.out + r * n;
      for (int64_t s = 0; s < n; s += segment) {
        if (s + segment < n) {
          const u64* next = in + (source[s + segment] & ~static_cast<u32>(segment - 1));
          for (int64_t line = 0; line < segment; line += 8) __builtin_prefetch(next + line);
        }
        for (int64_t i = s; i < s + segment; ++i) out[i] = in[source[i]];
      }
    }
  });
}

void automorphism_coeff(const AutomorphismArgs& a) {
  const int64_t n = int64_t{1} << a.log_n;
  const u64 mask = static_cast<u64>(2 * n - 1);
  at::parallel_for(0, a.rows, parallel_grain(n), [&](int64_t begin, int64_t end) {
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
