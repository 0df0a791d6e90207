// CPU twins of cuda/fused.cu (see kernels.h), composed of the CPU build's own kernels (their AVX-512
// IFMA paths included), so the CPU keeps its speed: on the CPU the passes a fused kernel saves are
// cheap next to the arithmetic, and a scalar 128-bit loop would be slower than the vector kernels.
// Every step is an exact modular operation on canonical values, so the words equal the CUDA kernels'.
#include <algorithm>
#include <cstring>
#include <vector>

#include "../kernels.h"

namespace fhe::cpu {
namespace {

void add_rows(u64* x, const u64* y, const Modulus* moduli, int64_t rows, int64_t n) {  // x += y, [rows, n]
  elementwise(ElementwiseArgs{ElementwiseOp::kAdd, x, y, nullptr, nullptr, nullptr, x, moduli, rows, rows,
                              static_cast<int>(rows), n});
}

}  // namespace

// Each baby step as its own fused inner product (the composition below).
void ks_inner_product_babies(const KsInnerProductBabiesArgs& f) {
  const int64_t plane = static_cast<int64_t>(f.base.limbs) * f.base.n;
  for (int b = 0; b < f.count; ++b) {
    KsInnerProductArgs base = f.base;
    base.key = f.keys[b];
    base.out = f.outs[b];
    ks_inner_product_fused(KsInnerProductFusedArgs{base, plane, f.galois[b], f.add, f.add_rows, f.galois[b], false,
                                                   f.log_n});
  }
}

// Each digit set's inner product (the CPU kernel), then its two components into place.
void ks_inner_product_pair(const KsInnerProductPairArgs& p) {
  const KsInnerProductArgs& a = p.base;
  const int64_t plane = static_cast<int64_t>(a.limbs) * a.n;
  std::vector<u64> product(static_cast<size_t>(2 * plane));
  for (int i = 0; i < 2; ++i) {
    KsInnerProductArgs one = a;
    one.digits = i == 0 ? a.digits : p.digits_b;
    one.out = product.data();
    ks_inner_product(one);
    for (int c = 0; c < 2; ++c)
      std::memcpy(a.out + (2 * c + i) * plane, product.data() + c * plane, plane * sizeof(u64));
  }
}

// Per giant, the inner product of its plaintexts with the baby steps they pair with (a view of the
// stack when those are consecutive, else a gathered copy): what the per-giant calls computed.
void giant_products(const GiantProductsArgs& a) {
  const int64_t plane = static_cast<int64_t>(a.limbs) * a.n;
  for (int g = 0; g < a.giants; ++g) {
    std::vector<int> position;  // baby position of plaintext t
    for (int j = 0; j < a.n_babies; ++j) {
      const int t = a.index[g][j];
      if (t < 0) continue;
      if (static_cast<int>(position.size()) <= t) position.resize(t + 1, -1);
      position[t] = j;
    }
    const int m = static_cast<int>(position.size());
    if (m == 0) {
      for (int c = 0; c < 2; ++c) std::fill_n(a.out + c * a.out_stride + g * plane, plane, u64{0});
      continue;
    }
    bool consecutive = true;
    for (int t = 1; t < m; ++t) consecutive = consecutive && position[t] == position[0] + t;
    std::vector<u64> gathered;
    const u64* key = a.babies + 2 * position[0] * plane;
    if (!consecutive) {
      gathered.resize(static_cast<size_t>(2 * m) * plane);
      for (int t = 0; t < m; ++t)
        std::memcpy(gathered.data() + 2 * t * plane, a.babies + 2 * position[t] * plane, 2 * plane * sizeof(u64));
      key = gathered.data();
    }
    std::vector<u64> product(static_cast<size_t>(2 * plane));
    ks_inner_product(KsInnerProductArgs{a.pts[g], key, product.data(), a.moduli, m, a.limbs, a.limbs, a.limbs,
                                        a.limbs, a.n});
    for (int c = 0; c < 2; ++c)
      std::memcpy(a.out + c * a.out_stride + g * plane, product.data() + c * plane, plane * sizeof(u64));
  }
}

void ks_inner_product_fused(const KsInnerProductFusedArgs& f) {
  const KsInnerProductArgs& a = f.base;
  const int64_t plane = static_cast<int64_t>(a.limbs) * a.n;
  std::vector<u64> permuted;
  KsInnerProductArgs product = a;
  if (f.galois != 1) {  // the digits' permuted copy
    permuted.resize(static_cast<size_t>(a.dnum) * plane);
    automorphism_ntt(AutomorphismArgs{a.digits, permuted.data(), a.moduli, static_cast<int64_t>(a.dnum) * a.limbs,
                                      a.limbs, f.log_n, f.galois});
    product.digits = permuted.data();
  }
  const bool direct = !f.accumulate && f.out_stride == plane;  // write straight into a contiguous out
  std::vector<u64> scratch(direct ? 0 : static_cast<size_t>(2 * plane));
  product.out = direct ? a.out : scratch.data();
  ks_inner_product(product);
  if (f.add != nullptr && f.add_rows > 0) {
    const int first = a.limbs - f.add_rows;
    const u64* add = f.add;
    std::vector<u64> permuted_add;
    if (f.add_galois != 1) {
      permuted_add.resize(static_cast<size_t>(f.add_rows) * a.n);
      automorphism_ntt(AutomorphismArgs{f.add, permuted_add.data(), a.moduli + first, f.add_rows, f.add_rows,
                                        f.log_n, f.add_galois});
      add = permuted_add.data();
    }
    add_rows(product.out + first * a.n, add, a.moduli + first, f.add_rows, a.n);
  }
  if (direct) return;
  for (int c = 0; c < 2; ++c) {
    u64* out = a.out + c * f.out_stride;
    if (f.accumulate) {
      add_rows(out, scratch.data() + c * plane, a.moduli, a.limbs, a.n);
    } else {
      std::memcpy(out, scratch.data() + c * plane, plane * sizeof(u64));
    }
  }
}

// Rows (limb, half) of N/2 words: a term's [limbs, N] block read as [2 limbs, N/2], where the weight
// of row (i, h) is weights[k][i][h]: one mul_const per term and component, then an addition.
void linear_combination(const LinearCombinationArgs& a) {
  const int64_t half = a.n / 2, rows = 2 * static_cast<int64_t>(a.limbs), plane = a.limbs * a.n;
  std::vector<Modulus> moduli(rows);
  for (int64_t r = 0; r < rows; ++r) moduli[r] = a.moduli[r / 2];
  std::vector<u64> shoup(static_cast<size_t>(a.count) * rows);
  for (int k = 0; k < a.count; ++k)
    for (int64_t r = 0; r < rows; ++r)
      shoup[k * rows + r] = shoup_precompute(a.weights[k * rows + r], moduli[r].value);
  std::vector<u64> term(plane), constant;
  if (a.constant != nullptr && a.constant_components > 0) {
    constant.resize(plane);
    for (int64_t r = 0; r < rows; ++r) std::fill_n(constant.data() + r * half, half, a.constant[r]);
  }
  for (int64_t b = 0; b < a.batch; ++b) {
    u64* out = a.out + b * a.out_stride;
    for (int k = 0; k < a.count; ++k) {
      u64* target = k == 0 ? out : term.data();
      elementwise(ElementwiseArgs{ElementwiseOp::kMulConst, a.terms[k] + b * a.term_stride[k], nullptr, nullptr,
                                  a.weights + k * rows, shoup.data() + k * rows, target, moduli.data(), rows, rows,
                                  static_cast<int>(rows), half});
      if (k > 0) add_rows(out, term.data(), a.moduli, a.limbs, a.n);
    }
    if (b < a.constant_components && !constant.empty()) add_rows(out, constant.data(), a.moduli, a.limbs, a.n);
  }
}

}  // namespace fhe::cpu
