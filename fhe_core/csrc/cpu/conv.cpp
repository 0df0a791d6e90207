// CPU fast basis conversion (one task per batch, digit and chunk of coefficients) and the centred lift.
//
// Primes below 2^50 on a CPU with AVX-512 IFMA take the vector rows where the terms' sum fits ifma::SumBound; the
// others the scalar 128-bit accumulation. Same canonical outputs.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "../kernels.h"
#include "parallel.h"
#include "ifma.h"

namespace fhe::cpu {

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

namespace {

struct ConvScratch {
  std::vector<u64> y, overflow;
};

// One task: digit j of batch b, coefficients [c0, c0 + len).
void conv_task(const ConvArgs& a, int64_t b, int j, int64_t c0, int64_t len, ConvScratch& scratch,
               [[maybe_unused]] const void* vector_plan) {
  const int first = j * a.alpha, count = std::min(a.alpha, a.q_count - first);
  const u64* in = a.in + b * a.q_count * a.n;
  u64* out = a.out + (b * a.dnum + j) * a.rows * a.n;
  const u64* consts = a.qhat_mod_p + static_cast<int64_t>(j) * a.alpha * a.rows;
  u64* y = scratch.y.data();
#if FHE_CPU_HAVE_IFMA
  const ConvPlan* plan = static_cast<const ConvPlan*>(vector_plan);
  const bool vector_chunk = plan != nullptr && len % 32 == 0;
#endif
  for (int k = 0; k < count; ++k) {
    const int row = first + k;
    const u64* x = in + row * a.n + c0;
    u64* yk = y + k * kConvChunk;
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
    u64* overflow = scratch.overflow.data();
#if FHE_CPU_HAVE_IFMA
    if (vector_chunk) conv_overflow_vector(y, a.src + first, count, len, overflow);
    else
#endif
      for (int64_t i = 0; i < len; ++i) overflow[i] = conv_rounded_overflow(y + i, kConvChunk, a.src + first, count);
    v = overflow;
  }
  for (int r = 0; r < a.rows; ++r) {
    u64* row_out = out + r * a.n + c0;
#if FHE_CPU_HAVE_IFMA
    if (vector_chunk && plan->vector_row[j * a.rows + r]) {
      conv_row_vector(a, y, consts, plan->big_consts.data() + static_cast<size_t>(j) * a.alpha * a.rows,
                      plan->big_source.data() + first, v, count, r, plan->reducers[r], len, row_out);
      continue;
    }
#endif
    conv_row_scalar(a, y, consts, v, count, r, len, row_out);
  }
}

// ModUp's own rows (ConvArgs::own): copied over the converted ones.
void copy_own_rows(const ConvArgs& a) {
  for (int j = 0; j < a.dnum; ++j)
    for (int r = 0; r < a.rows; ++r) {
      const int k = conv_own_index(a, j, r);
      if (k >= 0) std::memcpy(a.out + (static_cast<int64_t>(j) * a.rows + r) * a.n,
                              a.own + (static_cast<int64_t>(j) * a.alpha + k) * a.n, a.n * sizeof(u64));
    }
}

}  // namespace

void conv(const ConvArgs& a) {
  const int64_t chunks = (a.n + kConvChunk - 1) / kConvChunk;
  const void* vector_plan = nullptr;
#if FHE_CPU_HAVE_IFMA
  const ConvPlan plan = ifma_enabled() ? conv_plan(a) : ConvPlan{};
  if (ifma_enabled()) vector_plan = &plan;
#endif
  const int64_t task_words = (static_cast<int64_t>(a.alpha) + a.rows) * std::min(kConvChunk, a.n);
  at::parallel_for(0, a.batch * a.dnum * chunks, parallel_grain(task_words), [&](int64_t begin, int64_t end) {
    ConvScratch scratch{std::vector<u64>(static_cast<size_t>(a.alpha) * kConvChunk),
                        std::vector<u64>(a.neg_q_mod_p != nullptr ? kConvChunk : 0)};
    for (int64_t task = begin; task < end; ++task) {
      const int64_t c0 = (task % chunks) * kConvChunk;
      conv_task(a, task / (a.dnum * chunks), static_cast<int>(task / chunks % a.dnum), c0,
                std::min(kConvChunk, a.n - c0), scratch, vector_plan);
    }
  });
  if (a.own != nullptr && a.own_copy) copy_own_rows(a);
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

}  // namespace fhe::cpu
