// CPU fast basis conversion (one task per batch, digit and chunk of coefficients) and the centred lift.
//
// On the IFMA path (path.h), primes below 2^50 take the vector rows where the terms' sum fits ifma::SumBound; on the
// AVX2 path, rows whose terms fit Avx2ConvPlan take the double-precision rows; the others the scalar 128-bit
// accumulation. Same canonical outputs.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "../kernels.h"
#include "parallel.h"
#include "avx2.h"
#include "ifma.h"
#include "scalar.h"

namespace fhe::cpu {

namespace {

constexpr int64_t kConvChunk = 256;  // coefficients per task: y[alpha][kConvChunk] stays in L1/L2

// One destination row of a Conv task, scalar: out[i] = sum_k y[k][i] * consts[k][r] (+ v[i] * (-Q)), four
// coefficients per step (four independent 128-bit sums keep the multiplier busy), one reduction per output.
void conv_row_scalar(const ConvArgs& a, const u64* y, const u64* consts, const u64* overflow, int count, int r,
                     int64_t len, u64* out) {
  const Modulus m = a.dst[r];
  const u64 neg_q = overflow != nullptr ? a.neg_q_mod_p[r] : 0;
  int64_t i = 0;
  for (; i + 4 <= len; i += 4) {
    u128 s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int k = 0; k < count; ++k) {
      const u64 c = consts[k * a.rows + r];
      const u64* yk = y + k * kConvChunk + i;
      s0 += static_cast<u128>(yk[0]) * c;
      s1 += static_cast<u128>(yk[1]) * c;
      s2 += static_cast<u128>(yk[2]) * c;
      s3 += static_cast<u128>(yk[3]) * c;
    }
    if (overflow != nullptr) {
      s0 += static_cast<u128>(overflow[i]) * neg_q;
      s1 += static_cast<u128>(overflow[i + 1]) * neg_q;
      s2 += static_cast<u128>(overflow[i + 2]) * neg_q;
      s3 += static_cast<u128>(overflow[i + 3]) * neg_q;
    }
    out[i] = reduce_sum(s0, m);
    out[i + 1] = reduce_sum(s1, m);
    out[i + 2] = reduce_sum(s2, m);
    out[i + 3] = reduce_sum(s3, m);
  }
  for (; i < len; ++i) {
    u128 sum = 0;
    for (int k = 0; k < count; ++k) sum += static_cast<u128>(y[k * kConvChunk + i]) * consts[k * a.rows + r];
    if (overflow != nullptr) sum += static_cast<u128>(overflow[i]) * neg_q;
    out[i] = reduce_sum(sum, m);
  }
}

#if FHE_CPU_X86
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

#if FHE_CPU_X86
// The AVX2 Conv (avx2.h), for sources and destinations below 2^46: each term y c split as (y_hi 2^23 + y_lo)
// (c_hi 2^23 + c_lo) with signed halves (|lo| <= 2^22, hi <= 2^23), so the four partial products are below 2^46
// and their sums over at most kAvx2ConvTerms terms stay exact below 2^50 in four double accumulators, one FMA per
// product: sum = A0 + (A1a + A1b) 2^23 + A2 2^46. Only the sum is reduced: A2 (2^46 mod p) and A1 (2^23 mod p)
// through avx2::mul (each below 5p/8 in magnitude), plus A0, made canonical once.
constexpr int kAvx2ConvTerms = 15;  // 15 * 2^46 < 2^50

struct SplitConst {
  double lo, hi;
};

SplitConst split_const(u64 v) {  // v < 2^46
  const u64 hi = (v + (u64{1} << 22)) >> 23;
  return SplitConst{static_cast<double>(static_cast<int64_t>(v) - static_cast<int64_t>(hi << 23)),
                    static_cast<double>(hi)};
}

struct Avx2ConvPlan {
  std::vector<uint8_t> vector_digit;  // [dnum]: every source prime below 2^46, at most kAvx2ConvTerms terms
  std::vector<uint8_t> vector_row;    // [rows]: p below 2^46
  std::vector<SplitConst> consts;     // [dnum, alpha, rows]: qhat_mod_p split
  std::vector<SplitConst> neg_q;      // [rows]: neg_q_mod_p split
  std::vector<double> two23, two46;   // [rows, 2]: 2^23 and 2^46 mod p, with fl(w / p)
};

Avx2ConvPlan avx2_conv_plan(const ConvArgs& a) {
  Avx2ConvPlan plan;
  const u64 bound = kAvx2MaxPrime;
  plan.vector_digit.assign(a.dnum, 0);
  for (int j = 0; j < a.dnum; ++j) {
    const int first = j * a.alpha, count = std::min(a.alpha, a.q_count - first);
    bool fits = count + (a.neg_q_mod_p != nullptr ? 1 : 0) <= kAvx2ConvTerms;
    for (int k = 0; k < count; ++k) fits = fits && a.src[first + k].value < bound;
    plan.vector_digit[j] = fits;
  }
  plan.consts.resize(static_cast<size_t>(a.dnum) * a.alpha * a.rows);
  plan.vector_row.resize(a.rows);
  plan.neg_q.resize(a.rows);
  plan.two23.resize(2 * static_cast<size_t>(a.rows));
  plan.two46.resize(2 * static_cast<size_t>(a.rows));
  for (int r = 0; r < a.rows; ++r) {
    const u64 p = a.dst[r].value;
    plan.vector_row[r] = p < bound;
    if (!plan.vector_row[r]) continue;
    for (int j = 0; j < a.dnum; ++j)
      for (int k = 0; k < std::min(a.alpha, a.q_count - j * a.alpha); ++k) {
        const size_t idx = (static_cast<size_t>(j) * a.alpha + k) * a.rows + r;
        plan.consts[idx] = split_const(a.qhat_mod_p[idx]);
      }
    if (a.neg_q_mod_p != nullptr) plan.neg_q[r] = split_const(a.neg_q_mod_p[r]);
    for (const auto& [power, out] : {std::pair{23, &plan.two23}, std::pair{46, &plan.two46}}) {
      const u64 w = (u64{1} << power) % p;
      (*out)[2 * r] = static_cast<double>(w);
      (*out)[2 * r + 1] = static_cast<double>(w) / static_cast<double>(p);
    }
  }
  return plan;
}

// The y_k of a task as doubles (exact: below 2^46), for the rounded overflow, and split into signed halves for the
// rows, once for all destination rows; len % 4 == 0.
FHE_AVX2_FN void conv_split(const u64* y, int count, int64_t len, double* y_double, double* y_lo, double* y_hi) {
  using namespace avx2;
  const __m256d two23 = _mm256_set1_pd(8388608.0), two_minus23 = _mm256_set1_pd(1.0 / 8388608.0);
  for (int k = 0; k < count; ++k)
    for (int64_t i = k * kConvChunk; i < k * kConvChunk + len; i += 4) {
      const __m256d v = to_double(load_words(y + i));
      const __m256d hi = round_int(_mm256_mul_pd(v, two_minus23));
      _mm256_storeu_pd(y_double + i, v);
      _mm256_storeu_pd(y_hi + i, hi);
      _mm256_storeu_pd(y_lo + i, _mm256_fnmadd_pd(hi, two23, v));
    }
}

// round(sum_k y_k / q_k) as conv_rounded_overflow computes it, four lanes at a time (the same correctly rounded
// double operations in the same order, so the same words); len % 4 == 0.
FHE_AVX2_FN void conv_overflow_avx2(const double* y, const Modulus* src, int count, int64_t len, u64* overflow) {
  using namespace avx2;
  for (int64_t i = 0; i < len; i += 4) {
    __m256d sum = _mm256_set1_pd(0.5);
    for (int k = 0; k < count; ++k) {
      const __m256d num = _mm256_loadu_pd(y + k * kConvChunk + i);
      sum = _mm256_add_pd(sum, _mm256_div_pd(num, _mm256_set1_pd(static_cast<double>(src[k].value))));
    }
    store_words(overflow + i, to_word(_mm256_round_pd(sum, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)));
  }
}

// The four partial sums of four coefficients.
struct SplitSums {
  __m256d a0, a1a, a1b, a2;
};

FHE_AVX2 void split_mac(SplitSums& s, __m256d y_lo, __m256d y_hi, __m256d c_lo, __m256d c_hi) {
  s.a0 = _mm256_fmadd_pd(y_lo, c_lo, s.a0);
  s.a1a = _mm256_fmadd_pd(y_lo, c_hi, s.a1a);
  s.a1b = _mm256_fmadd_pd(y_hi, c_lo, s.a1b);
  s.a2 = _mm256_fmadd_pd(y_hi, c_hi, s.a2);
}

FHE_AVX2 __m256i split_reduce(const SplitSums& s, avx2::Twiddle two23, avx2::Twiddle two46, __m256d p,
                              __m256d p_inv) {
  using namespace avx2;
  const __m256d a1 = _mm256_add_pd(s.a1a, s.a1b);  // exact: below 2^50
  return canonical(_mm256_add_pd(_mm256_add_pd(mul(s.a2, two46, p), mul(a1, two23, p)), s.a0), p, p_inv);
}

// One destination row, eight coefficients per step; len % 8 == 0.
FHE_AVX2_FN void conv_row_avx2(const ConvArgs& a, const Avx2ConvPlan& plan, const double* y_lo, const double* y_hi,
                               const SplitConst* consts, const u64* overflow, int count, int r, int64_t len, u64* out) {
  using namespace avx2;
  const u64 p_word = a.dst[r].value;
  const __m256d p = _mm256_set1_pd(static_cast<double>(p_word)), p_inv = _mm256_set1_pd(1.0 / static_cast<double>(p_word));
  const Twiddle two23{_mm256_set1_pd(plan.two23[2 * r]), _mm256_set1_pd(plan.two23[2 * r + 1])};
  const Twiddle two46{_mm256_set1_pd(plan.two46[2 * r]), _mm256_set1_pd(plan.two46[2 * r + 1])};
  for (int64_t i = 0; i < len; i += 8) {
    const __m256d zero = _mm256_setzero_pd();
    SplitSums s0{zero, zero, zero, zero}, s1{zero, zero, zero, zero};
    for (int k = 0; k < count; ++k) {
      const SplitConst c = consts[k * a.rows + r];
      const __m256d c_lo = _mm256_set1_pd(c.lo), c_hi = _mm256_set1_pd(c.hi);
      const int64_t at = k * kConvChunk + i;
      split_mac(s0, _mm256_loadu_pd(y_lo + at), _mm256_loadu_pd(y_hi + at), c_lo, c_hi);
      split_mac(s1, _mm256_loadu_pd(y_lo + at + 4), _mm256_loadu_pd(y_hi + at + 4), c_lo, c_hi);
    }
    if (overflow != nullptr) {  // v <= count: v itself is its low half
      const __m256d c_lo = _mm256_set1_pd(plan.neg_q[r].lo), c_hi = _mm256_set1_pd(plan.neg_q[r].hi);
      split_mac(s0, to_double(load_words(overflow + i)), zero, c_lo, c_hi);
      split_mac(s1, to_double(load_words(overflow + i + 4)), zero, c_lo, c_hi);
    }
    store_words(out + i, split_reduce(s0, two23, two46, p, p_inv));
    store_words(out + i + 4, split_reduce(s1, two23, two46, p, p_inv));
  }
}
#endif

}  // namespace

namespace {

struct ConvScratch {
  std::vector<u64> y, overflow;
  std::vector<double> y_double, y_lo, y_hi;  // the AVX2 rows' copies of y (conv_split)
};

// The vector plans (nullptr: not this process's path).
struct ConvPlans {
#if FHE_CPU_X86
  const ConvPlan* ifma = nullptr;
  const Avx2ConvPlan* avx2 = nullptr;
#endif
};

// One task: digit j of batch b, coefficients [c0, c0 + len).
void conv_task(const ConvArgs& a, int64_t b, int j, int64_t c0, int64_t len, ConvScratch& scratch,
               [[maybe_unused]] const ConvPlans& plans) {
  const int first = j * a.alpha, count = std::min(a.alpha, a.q_count - first);
  const u64* in = a.in + b * a.q_count * a.n;
  u64* out = a.out + (b * a.dnum + j) * a.rows * a.n;
  const u64* consts = a.qhat_mod_p + static_cast<int64_t>(j) * a.alpha * a.rows;
  u64* y = scratch.y.data();
#if FHE_CPU_X86
  const ConvPlan* plan = plans.ifma;
  const bool vector_chunk = plan != nullptr && len % 32 == 0;
  const bool avx2_chunk = plans.avx2 != nullptr && len % 8 == 0 && plans.avx2->vector_digit[j];
#endif
  for (int k = 0; k < count; ++k) {
    const int row = first + k;
    const u64* x = in + row * a.n + c0;
    u64* yk = y + k * kConvChunk;
#if FHE_CPU_X86
    if (vector_chunk && a.src[row].value < kIfmaMaxPrime) {
      conv_scale_vector(x, a.qhat_inv[row], a.qhat_inv_shoup[row], a.src[row].value, len, yk);
      continue;
    }
#endif
    for (int64_t i = 0; i < len; ++i) yk[i] = mul_shoup(x[i], a.qhat_inv[row], a.qhat_inv_shoup[row], a.src[row].value);
  }
#if FHE_CPU_X86
  double* y_double = scratch.y_double.data();
  if (avx2_chunk) conv_split(y, count, len, y_double, scratch.y_lo.data(), scratch.y_hi.data());
#endif
  const u64* v = nullptr;
  if (a.neg_q_mod_p != nullptr) {
    u64* overflow = scratch.overflow.data();
#if FHE_CPU_X86
    if (vector_chunk) conv_overflow_vector(y, a.src + first, count, len, overflow);
    else if (avx2_chunk) conv_overflow_avx2(y_double, a.src + first, count, len, overflow);
    else
#endif
      for (int64_t i = 0; i < len; ++i) overflow[i] = conv_rounded_overflow(y + i, kConvChunk, a.src + first, count);
    v = overflow;
  }
  for (int r = 0; r < a.rows; ++r) {
    u64* row_out = out + r * a.n + c0;
#if FHE_CPU_X86
    if (vector_chunk && plan->vector_row[j * a.rows + r]) {
      conv_row_vector(a, y, consts, plan->big_consts.data() + static_cast<size_t>(j) * a.alpha * a.rows,
                      plan->big_source.data() + first, v, count, r, plan->reducers[r], len, row_out);
      continue;
    }
    if (avx2_chunk && plans.avx2->vector_row[r]) {
      conv_row_avx2(a, *plans.avx2, scratch.y_lo.data(), scratch.y_hi.data(),
                    plans.avx2->consts.data() + static_cast<size_t>(j) * a.alpha * a.rows, v, count, r, len, row_out);
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
  const CpuPath path = cpu_path();  // once per call (path.h)
  ConvPlans plans;
#if FHE_CPU_X86
  const ConvPlan ifma_plan = path == CpuPath::kIfma ? conv_plan(a) : ConvPlan{};
  const Avx2ConvPlan avx2_plan = path == CpuPath::kAvx2 ? avx2_conv_plan(a) : Avx2ConvPlan{};
  if (path == CpuPath::kIfma) plans.ifma = &ifma_plan;
  if (path == CpuPath::kAvx2) plans.avx2 = &avx2_plan;
#endif
  const size_t avx2_words = path == CpuPath::kAvx2 ? static_cast<size_t>(a.alpha) * kConvChunk : 0;
  const int64_t task_words = (static_cast<int64_t>(a.alpha) + a.rows) * std::min(kConvChunk, a.n);
  at::parallel_for(0, a.batch * a.dnum * chunks, parallel_grain(task_words), [&](int64_t begin, int64_t end) {
    ConvScratch scratch{std::vector<u64>(static_cast<size_t>(a.alpha) * kConvChunk),
                        std::vector<u64>(a.neg_q_mod_p != nullptr ? kConvChunk : 0),
                        std::vector<double>(avx2_words), std::vector<double>(avx2_words),
                        std::vector<double>(avx2_words)};
    for (int64_t task = begin; task < end; ++task) {
      const int64_t c0 = (task % chunks) * kConvChunk;
      conv_task(a, task / (a.dnum * chunks), static_cast<int>(task / chunks % a.dnum), c0,
                std::min(kConvChunk, a.n - c0), scratch, plans);
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
