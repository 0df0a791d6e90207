// CPU element-wise RNS ops, the tensor product and Galois automorphisms.
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <vector>

#include "../common/ntt.h"
#include "../kernels.h"
#include "parallel.h"
#include "avx2.h"
#include "ifma.h"

namespace fhe::cpu {

namespace {

#if FHE_CPU_X86
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

#if FHE_CPU_X86
// The products of one row for q < 2^46 in double precision (avx2.h), four words at a time; returns how many words it
// did (a multiple of 4; the caller finishes the tail).
FHE_AVX2_FN int64_t elementwise_row_avx2(const ElementwiseArgs& a, int limb, const u64* x, const u64* y, const u64* z,
                                         u64* out) {
  using namespace avx2;
  const u64 q_word = a.moduli[limb].value;
  const __m256d q = _mm256_set1_pd(static_cast<double>(q_word)), q_inv = _mm256_set1_pd(1.0 / static_cast<double>(q_word));
  const int64_t n4 = a.n & ~int64_t{3};
  switch (a.op) {
    case ElementwiseOp::kMul:
    case ElementwiseOp::kMulAdd:
      for (int64_t i = 0; i < n4; i += 4) {
        __m256d v = mul_any(to_double(load_words(x + i)), to_double(load_words(y + i)), q, q_inv);  // |v| < 5q/8
        if (a.op == ElementwiseOp::kMulAdd) v = _mm256_add_pd(v, to_double(load_words(z + i)));
        store_words(out + i, canonical(v, q, q_inv));
      }
      return n4;
    case ElementwiseOp::kMulConst:
    case ElementwiseOp::kSubMulConst: {
      const Twiddle w = twiddle(a.consts[limb], a.consts_shoup[limb]);
      for (int64_t i = 0; i < n4; i += 4) {
        __m256d v = to_double(load_words(x + i));
        if (a.op == ElementwiseOp::kSubMulConst) v = _mm256_sub_pd(v, to_double(load_words(y + i)));  // (-q, q)
        store_words(out + i, canonical(mul(v, w, q), q, q_inv));
      }
      return n4;
    }
    default:
      return 0;
  }
}
#endif

}  // namespace

void elementwise(const ElementwiseArgs& a) {
#if FHE_CPU_X86
  const CpuPath path = cpu_path();  // once per call (path.h)
  const bool simd = path == CpuPath::kIfma;
  const bool avx2 = path == CpuPath::kAvx2;
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
#if FHE_CPU_X86
      if (simd && q < kIfmaMaxPrime) done = elementwise_row_vector(a, limb, x, y, z, out);
      if (avx2 && q < kAvx2MaxPrime) done = elementwise_row_avx2(a, limb, x, y, z, out);
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

// The tensor product: the element-wise kernels, d1 as a1 b0 then a0 b1 + d1 (the same canonical residues as the
// CUDA kernel's single reduction of the sum).
void tensor_product(const TensorProductArgs& t) {
  const int64_t plane = static_cast<int64_t>(t.limbs) * t.n;
  const u64 *a0 = t.a, *a1 = t.a + plane, *b0 = t.b, *b1 = t.b + plane;
  u64 *d0 = t.out, *d1 = t.out + plane, *d2 = t.out + 2 * plane;
  const auto run = [&](ElementwiseOp op, const u64* x, const u64* y, const u64* z, u64* out) {
    elementwise(ElementwiseArgs{op, x, y, z, nullptr, nullptr, out, t.moduli, t.limbs, t.limbs, t.limbs, t.n});
  };
  run(ElementwiseOp::kMul, a0, b0, nullptr, d0);
  run(ElementwiseOp::kMul, a1, b1, nullptr, d2);
  run(ElementwiseOp::kMul, a1, b0, nullptr, d1);
  run(ElementwiseOp::kMulAdd, a0, b1, d1, d1);
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
