// The element-wise ops (add, sub, mul, neg, mul_const, sub_mul_const, mul_add), the tensor product of two degree-1
// ciphertexts and the Galois automorphisms.
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>

#include <vector>

#include "common.h"
#include "ops.h"

namespace fhe {

namespace {

const char* const kNames[] = {"add", "sub", "neg", "mul", "mul_const", "mul_add", "sub_mul_const"};

void run_elementwise(ElementwiseOp kind, const Tensor& a, const Tensor* b, const Tensor* c, const Tensor* consts,
                     const Tensor* consts_shoup, const Tensor& moduli, Tensor& out) {
  const char* op = kNames[static_cast<int>(kind)];
  const int64_t rows = check_residues(a, moduli, op);
  int64_t b_rows = rows;
  if (b != nullptr) {
    check_words(*b, op, "b");
    check_same_device(*b, a, op, "b");
    const int64_t bd = b->dim();
    FHE_CHECK(bd >= 2 && bd <= a.dim() && a.sizes().slice(a.dim() - bd) == b->sizes(), op,
              ": b must have the shape of a or of a trailing part of it (broadcast over leading dims), got ",
              b->sizes(), " for a of shape ", a.sizes());
    b_rows = b->numel() / b->size(-1);
  }
  if (c != nullptr) {
    check_words(*c, op, "c");
    check_same_device(*c, a, op, "c");
    FHE_CHECK(c->sizes() == a.sizes(), op, ": c must have the shape of a, got ", c->sizes());
  }
  const int64_t limbs = moduli.size(0);
  for (const Tensor* t : {consts, consts_shoup})
    if (t != nullptr) check_sized(*t, a, {limbs}, op, "consts");
  check_out(out, a, a.sizes(), op);
  const ElementwiseArgs args{kind, words(a), b ? words(*b) : nullptr, c ? words(*c) : nullptr,
                             consts ? words(*consts) : nullptr, consts_shoup ? words(*consts_shoup) : nullptr,
                             mutable_words(out), moduli_ptr(moduli), rows, b_rows, static_cast<int>(limbs),
                             a.size(-1)};
  FHE_RUN(elementwise, args, a);
}

}  // namespace

Tensor& binary_out(const Tensor& a, const Tensor& b, const Tensor& moduli, Tensor& out, ElementwiseOp kind) {
  run_elementwise(kind, a, &b, nullptr, nullptr, nullptr, moduli, out);
  return out;
}

Tensor& neg_out(const Tensor& a, const Tensor& moduli, Tensor& out) {
  run_elementwise(ElementwiseOp::kNeg, a, nullptr, nullptr, nullptr, nullptr, moduli, out);
  return out;
}

Tensor& mul_const_out(const Tensor& a, const Tensor& consts, const Tensor& consts_shoup, const Tensor& moduli,
                      Tensor& out) {
  run_elementwise(ElementwiseOp::kMulConst, a, nullptr, nullptr, &consts, &consts_shoup, moduli, out);
  return out;
}

Tensor& sub_mul_const_out(const Tensor& a, const Tensor& b, const Tensor& consts, const Tensor& consts_shoup,
                          const Tensor& moduli, Tensor& out) {
  run_elementwise(ElementwiseOp::kSubMulConst, a, &b, nullptr, &consts, &consts_shoup, moduli, out);
  return out;
}

Tensor& mul_add_out(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& moduli, Tensor& out) {
  run_elementwise(ElementwiseOp::kMulAdd, a, &b, &c, nullptr, nullptr, moduli, out);
  return out;
}

Tensor& tensor_product_out(const Tensor& a, const Tensor& b, const Tensor& moduli, Tensor& out) {
  const char* op = "tensor_product";
  check_residues(a, moduli, op, "a");
  check_words(b, op, "b");
  check_same_device(b, a, op, "b");
  FHE_CHECK(a.dim() == 3 && a.size(0) == 2 && b.sizes() == a.sizes(), op,
            ": a and b must both be [2, limbs, N], got ", a.sizes(), " and ", b.sizes());
  check_out(out, a, {3, a.size(1), a.size(2)}, op);
  at::assert_no_overlap(out, a);
  at::assert_no_overlap(out, b);
  const TensorProductArgs args{words(a), words(b), mutable_words(out), moduli_ptr(moduli),
                               static_cast<int>(a.size(1)), a.size(2)};
  FHE_RUN(tensor_product, args, a);
  return out;
}

Tensor tensor_product(const Tensor& a, const Tensor& b, const Tensor& moduli) {
  check_residues(a, moduli, "tensor_product", "a");  // before a.size(-2): a 1-D a gets the op's message
  Tensor out = at::empty({3, a.size(-2), a.size(-1)}, a.options());
  return tensor_product_out(a, b, moduli, out);
}

Tensor& automorphism_out(const Tensor& a, const Tensor& moduli, int64_t galois, Tensor& out, bool ntt) {
  const char* op = ntt ? "automorphism_ntt" : "automorphism_coeff";
  const int64_t rows = check_residues(a, moduli, op);
  const int log_n = log2_exact(a.size(-1), op);
  FHE_CHECK(galois > 0 && galois < 2 * a.size(-1) && (galois & 1) == 1, op,
            ": the Galois element must be odd and in [1, 2N), got ", galois);
  check_out(out, a, a.sizes(), op);
  at::assert_no_overlap(out, a);
  const AutomorphismArgs args{words(a), mutable_words(out), moduli_ptr(moduli), rows,
                              static_cast<int>(moduli.size(0)), log_n, static_cast<u64>(galois)};
  if (ntt) FHE_RUN(automorphism_ntt, args, a);
  else FHE_RUN(automorphism_coeff, args, a);
  return out;
}

Tensor& automorphism_ntt_out(const Tensor& a, const Tensor& moduli, int64_t galois, Tensor& out) {
  return automorphism_out(a, moduli, galois, out, true);
}

}  // namespace fhe
