// The fused passes of the bootstrapping circuit (kernels.h): the key-switching inner product with its neighbours
// (ks_inner_product_fused), linear combinations, the giant steps' plaintext products, a pair's two inner products
// and the double-hoisted baby steps. Every op writes into a caller's `out` (a view of a larger buffer, or
// accumulated into).
#include <ATen/MemoryOverlap.h>

#include <vector>

#include "keyswitch.h"
#include "ops.h"

namespace fhe {

namespace {

// add: [<= limbs, N] rows added to the last rows of component 0.
void check_add_rows(const Tensor& add, const Tensor& digits, int64_t limbs, const char* op) {
  const int64_t n = digits.size(2);
  check_words(add, op, "add");
  check_same_device(add, digits, op, "add");
  FHE_CHECK(add.dim() == 2 && add.size(0) <= limbs && add.size(1) == n, op, ": add must be [<= ", limbs, ", ", n,
            "], got ", add.sizes());
}

// The checked terms of a linear combination into args (terms[k]: [batch, >= limbs, N] of contiguous [rows, N]).
void set_terms(LinearCombinationArgs& args, at::TensorList terms, const Tensor& out, const char* op) {
  const int64_t batch = out.size(0), limbs = out.size(1), n = out.size(2);
  for (size_t k = 0; k < terms.size(); ++k) {
    const Tensor& t = terms[k];
    FHE_CHECK(t.scalar_type() == at::kLong && t.dim() == 3 && t.size(0) == batch && t.size(1) >= limbs &&
                  t.size(2) == n && t.stride(2) == 1 && t.stride(1) == n && t.stride(0) >= t.size(1) * n,
              op, ": term ", k, " must be [", batch, ", >= ", limbs, ", ", n, "] with contiguous [rows, N] blocks, got "
              "shape ", t.sizes(), " and strides ", t.strides());
    check_same_device(t, out, op, "a term");
    at::assert_no_overlap(out, t);
    args.terms[k] = words(t);
    args.term_stride[k] = t.stride(0);
  }
  args.count = static_cast<int>(terms.size());
}

// Giant g's plaintexts into args: [1..kMaxDigits, limbs, N], each used by exactly one baby position.
void set_giant(GiantProductsArgs& args, int g, const Tensor& p, at::IntArrayRef index, const Tensor& babies,
               const char* op) {
  const int64_t n_babies = babies.size(0), limbs = babies.size(2), n = babies.size(3);
  check_words(p, op, "a plaintext block");
  check_same_device(p, babies, op, "a plaintext block");
  FHE_CHECK(p.dim() == 3 && p.size(1) == limbs && p.size(2) == n && p.size(0) >= 1 && p.size(0) <= kMaxDigits, op,
            ": giant ", g, "'s plaintexts must be [1..", kMaxDigits, ", ", limbs, ", ", n, "], got ", p.sizes());
  std::vector<int> seen(p.size(0), 0);
  for (int64_t j = 0; j < n_babies; ++j) {
    const int64_t t = index[g * n_babies + j];
    FHE_CHECK(t >= -1 && t < p.size(0), op, ": index ", t, " of giant ", g, " outside [-1, ", p.size(0), ")");
    if (t >= 0) ++seen[t];
    args.index[g][j] = static_cast<int8_t>(t);
  }
  for (int64_t t = 0; t < p.size(0); ++t)
    FHE_CHECK(seen[t] == 1, op, ": giant ", g, "'s plaintext ", t, " must pair with exactly one baby step");
  args.pts[g] = words(p);
}

}  // namespace

// The inner product with the digits read through sigma_galois, add (through sigma_add_galois) on the last
// add.size(0) rows of component 0 and (accumulate) out's previous contents. out: [2, limbs, N] of two contiguous
// [limbs, N] blocks at any distance.
Tensor& ks_inner_product_fused_out(const Tensor& digits, const Tensor& key, int64_t q_count, int64_t p_row,
                                   const Tensor& moduli, int64_t galois, const std::optional<Tensor>& add,
                                   int64_t add_galois, bool accumulate, Tensor& out) {
  const char* op = "ks_inner_product_fused";
  KsInnerProductArgs base = ks_args(digits, key, q_count, p_row, moduli, op);
  const int64_t limbs = digits.size(1), n = digits.size(2);
  const int log_n = log2_exact(n, op);
  for (const int64_t k : {galois, add_galois})
    FHE_CHECK(k > 0 && k < 2 * n && k % 2 == 1, op, ": a Galois element must be odd in [1, ", 2 * n, "), got ", k);
  check_blocks(out, digits, {2, limbs, n}, op, "out");
  at::assert_no_overlap(out, digits);
  at::assert_no_overlap(out, key);
  base.out = mutable_words(out);
  KsInnerProductFusedArgs args{base, out.stride(0), static_cast<u64>(galois), nullptr, 0,
                               static_cast<u64>(add_galois), accumulate, log_n};
  if (add.has_value()) {
    check_add_rows(*add, digits, limbs, op);
    at::assert_no_overlap(out, *add);
    args.add = words(*add);
    args.add_rows = static_cast<int>(add->size(0));
  }
  FHE_RUN(ks_inner_product_fused, args, digits);
  return out;
}

// out = sum_k weights[k] * terms[k] (+ constant on the first constant_components components); see kernels.h.
// out: [batch, limbs, N], contiguous or a batch of contiguous [limbs, N] blocks (a pair's ciphertext).
Tensor& linear_combination_out(at::TensorList terms, const Tensor& weights, const Tensor& moduli,
                               const std::optional<Tensor>& constant, int64_t constant_components, Tensor& out) {
  const char* op = "linear_combination";
  const int64_t count = static_cast<int64_t>(terms.size());
  FHE_CHECK(count >= 1 && count <= kMaxCombinationTerms, op, ": 1 to ", kMaxCombinationTerms, " terms, got ", count);
  FHE_CHECK(out.scalar_type() == at::kLong && out.dim() == 3 && out.stride(2) == 1 && out.stride(1) == out.size(2) &&
                (out.size(0) == 1 || out.stride(0) >= out.size(1) * out.size(2)),
            op, ": out must be an int64 [batch, limbs, N] of contiguous [limbs, N] blocks, got shape ", out.sizes(),
            " and strides ", out.strides());
  check_words(moduli, op, "moduli");
  check_same_device(moduli, out, op, "moduli");
  FHE_CHECK(moduli.dim() == 2 && moduli.size(1) == 4 && moduli.size(0) == out.size(1), op, ": moduli must be [",
            out.size(1), ", 4], got ", moduli.sizes());
  const int64_t batch = out.size(0), limbs = out.size(1), n = out.size(2);
  log2_exact(n, op);
  check_sized(weights, out, {count, limbs, 2}, op, "weights");
  LinearCombinationArgs args{};
  set_terms(args, terms, out, op);
  args.weights = words(weights);
  if (constant.has_value()) {
    check_sized(*constant, out, {limbs, 2}, op, "constant");
    FHE_CHECK(constant_components >= 0 && constant_components <= batch, op, ": constant_components must be in [0, ",
              batch, "], got ", constant_components);
    args.constant = words(*constant);
    args.constant_components = static_cast<int>(constant_components);
  }
  args.out = mutable_words(out);
  args.moduli = moduli_ptr(moduli);
  args.batch = batch;
  args.limbs = static_cast<int>(limbs);
  args.n = n;
  args.out_stride = batch == 1 ? limbs * n : out.stride(0);
  FHE_RUN(linear_combination, args, out);
  return out;
}

// The plaintext products of up to kMaxGiants giant steps in one pass over the baby stack, out [2, giants, limbs, N]
// (a slice of a [2, G, limbs, N] buffer): index[g * n_babies + j] is giant g's plaintext for baby position j, or -1.
Tensor& giant_products_out(const Tensor& babies, at::TensorList pts, at::IntArrayRef index, const Tensor& moduli,
                           Tensor& out) {
  const char* op = "giant_products";
  check_residues(babies, moduli, op, "babies");
  FHE_CHECK(babies.dim() == 4 && babies.size(1) == 2, op, ": babies must be [n1, 2, limbs, N], got ", babies.sizes());
  const int64_t n_babies = babies.size(0), limbs = babies.size(2), n = babies.size(3);
  const int64_t giants = static_cast<int64_t>(pts.size());
  FHE_CHECK(giants >= 1 && giants <= kMaxGiants, op, ": 1 to ", kMaxGiants, " giant steps, got ", giants);
  FHE_CHECK(n_babies >= 1 && n_babies <= kMaxBabies, op, ": 1 to ", kMaxBabies, " baby steps, got ", n_babies);
  FHE_CHECK(static_cast<int64_t>(index.size()) == giants * n_babies, op, ": index must have giants x n1 = ",
            giants * n_babies, " entries, got ", index.size());
  GiantProductsArgs args{};
  for (int g = 0; g < giants; ++g) set_giant(args, g, pts[g], index, babies, op);
  FHE_CHECK(out.scalar_type() == at::kLong && out.dim() == 4 && out.size(0) == 2 && out.size(1) == giants &&
                out.size(2) == limbs && out.size(3) == n && out.stride(3) == 1 && out.stride(2) == n &&
                out.stride(1) == limbs * n && out.stride(0) >= giants * limbs * n,
            op, ": out must be [2, ", giants, ", ", limbs, ", ", n, "] with contiguous [giants, limbs, N] blocks, got "
            "shape ", out.sizes(), " and strides ", out.strides());
  check_same_device(out, babies, op, "out");
  at::assert_no_overlap(out, babies);
  for (const Tensor& p : pts) at::assert_no_overlap(out, p);
  args.babies = words(babies);
  args.out_stride = out.stride(0);
  args.giants = static_cast<int>(giants);
  args.n_babies = static_cast<int>(n_babies);
  args.out = mutable_words(out);
  args.moduli = moduli_ptr(moduli);
  args.limbs = static_cast<int>(limbs);
  args.n = n;
  FHE_RUN(giant_products, args, babies);
  return out;
}

// Two digit sets against one key, out [2 (component), 2 (set), limbs, N]: the relinearizations of a pair.
Tensor& ks_inner_product_pair_out(const Tensor& digits_a, const Tensor& digits_b, const Tensor& key, int64_t q_count,
                                  int64_t p_row, const Tensor& moduli, Tensor& out) {
  const char* op = "ks_inner_product_pair";
  KsInnerProductArgs base = ks_args(digits_a, key, q_count, p_row, moduli, op);
  check_words(digits_b, op, "digits_b");
  check_same_device(digits_b, digits_a, op, "digits_b");
  FHE_CHECK(digits_b.sizes() == digits_a.sizes(), op, ": the two digit sets differ in shape: ", digits_a.sizes(),
            " and ", digits_b.sizes());
  check_out(out, digits_a, {2, 2, digits_a.size(1), digits_a.size(2)}, op);
  for (const Tensor* t : {&digits_a, &digits_b, &key}) at::assert_no_overlap(out, *t);
  base.out = mutable_words(out);
  FHE_RUN(ks_inner_product_pair, (KsInnerProductPairArgs{base, words(digits_b)}), digits_a);
  return out;
}

// The baby steps of a double-hoisted linear transform in one launch: baby b's key keys[b] and element galois[b], its
// result in out[positions[b]] ([n, 2, limbs, N], the baby-step stack), plus sigma_b(add) on the last add.size(0) rows
// of component 0.
Tensor& ks_inner_product_babies_out(const Tensor& digits, at::TensorList keys, at::IntArrayRef galois,
                                    at::IntArrayRef positions, int64_t q_count, int64_t p_row, const Tensor& moduli,
                                    const std::optional<Tensor>& add, Tensor& out) {
  const char* op = "ks_inner_product_babies";
  check_ks_digits(digits, moduli, op);
  const int64_t limbs = digits.size(1), n = digits.size(2), count = static_cast<int64_t>(keys.size());
  FHE_CHECK(count >= 1 && count <= kMaxBabySteps && static_cast<int64_t>(galois.size()) == count &&
                static_cast<int64_t>(positions.size()) == count,
            op, ": 1 to ", kMaxBabySteps, " baby steps, with one Galois element and one position each; got ", count,
            " keys, ", galois.size(), " elements, ", positions.size(), " positions");
  check_words(out, op, "out");
  check_same_device(out, digits, op, "out");
  FHE_CHECK(out.dim() == 4 && out.size(1) == 2 && out.size(2) == limbs && out.size(3) == n, op, ": out must be [n, 2, ",
            limbs, ", ", n, "], got ", out.sizes());
  at::assert_no_overlap(out, digits);
  KsInnerProductBabiesArgs args{};
  args.base = ks_args(digits, keys[0], q_count, p_row, moduli, op);
  args.base.key = nullptr;
  for (int64_t b = 0; b < count; ++b) {
    const int64_t rows = check_ks_key(keys[b], digits, op);
    FHE_CHECK(rows == args.base.key_rows, op, ": the keys must have one row count, got ", args.base.key_rows, " and ",
              rows);
    FHE_CHECK(galois[b] > 0 && galois[b] < 2 * n && galois[b] % 2 == 1, op, ": a Galois element must be odd in [1, ",
              2 * n, "), got ", galois[b]);
    FHE_CHECK(positions[b] >= 0 && positions[b] < out.size(0), op, ": position ", positions[b], " outside [0, ",
              out.size(0), ")");
    for (int64_t c = 0; c < b; ++c)
      FHE_CHECK(positions[c] != positions[b], op, ": two baby steps write position ", positions[b]);
    at::assert_no_overlap(out, keys[b]);
    args.keys[b] = words(keys[b]);
    args.outs[b] = mutable_words(out) + positions[b] * 2 * limbs * n;
    args.galois[b] = static_cast<u64>(galois[b]);
  }
  args.count = static_cast<int>(count);
  args.log_n = log2_exact(n, op);
  if (add.has_value()) {
    check_add_rows(*add, digits, limbs, op);
    for (int64_t b = 0; b < count; ++b) at::assert_no_overlap(out[positions[b]], *add);
    args.add = words(*add);
    args.add_rows = static_cast<int>(add->size(0));
  }
  FHE_RUN(ks_inner_product_babies, args, digits);
  return out;
}

}  // namespace fhe
