// torch.ops.fhe_core: every op's schema, and its implementation registered for the CPU and CUDA dispatch keys (the
// same function for both: it runs the kernel of its tensors' device, ops/common.h).
#include <Python.h>
#include <torch/library.h>

#include <string>

#include "../cpu/path.h"
#include "common.h"
#include "ops.h"

namespace fhe {
namespace {

// The ops whose implementations take a flag (transform direction, element-wise kind) or have no out variant.
template <bool kForward>
Tensor ntt_op(const Tensor& a, const Tensor& moduli, const Tensor& table, int64_t plan, at::OptionalIntArrayRef skip) {
  return ntt(a, moduli, table, plan, skip, kForward);
}
template <bool kForward>
Tensor& ntt_out_op(const Tensor& a, const Tensor& moduli, const Tensor& table, int64_t plan,
                   at::OptionalIntArrayRef skip, Tensor& out) {
  return ntt_out(a, moduli, table, plan, skip, out, kForward);
}
template <ElementwiseOp kKind>
Tensor& binary_out_op(const Tensor& a, const Tensor& b, const Tensor& moduli, Tensor& out) {
  return binary_out(a, b, moduli, out, kKind);
}
template <ElementwiseOp kKind>
Tensor binary_op(const Tensor& a, const Tensor& b, const Tensor& moduli) {
  Tensor out = fresh_like(a);
  return binary_out(a, b, moduli, out, kKind);
}
Tensor neg_op(const Tensor& a, const Tensor& moduli) {
  Tensor out = fresh_like(a);
  return neg_out(a, moduli, out);
}
Tensor mul_const_op(const Tensor& a, const Tensor& consts, const Tensor& consts_shoup, const Tensor& moduli) {
  Tensor out = fresh_like(a);
  return mul_const_out(a, consts, consts_shoup, moduli, out);
}
Tensor sub_mul_const_op(const Tensor& a, const Tensor& b, const Tensor& consts, const Tensor& consts_shoup,
                        const Tensor& moduli) {
  Tensor out = fresh_like(a);
  return sub_mul_const_out(a, b, consts, consts_shoup, moduli, out);
}
Tensor mul_add_op(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& moduli) {
  Tensor out = fresh_like(a);
  return mul_add_out(a, b, c, moduli, out);
}
template <bool kNtt>
Tensor& automorphism_out_op(const Tensor& a, const Tensor& moduli, int64_t galois, Tensor& out) {
  return automorphism_out(a, moduli, galois, out, kNtt);
}
template <bool kNtt>
Tensor automorphism_op(const Tensor& a, const Tensor& moduli, int64_t galois) {
  Tensor out = fresh_like(a);
  return automorphism_out(a, moduli, galois, out, kNtt);
}

void register_impls(torch::Library& m) {
  m.impl("ntt", &ntt_op<true>);
  m.impl("ntt.out", &ntt_out_op<true>);
  m.impl("intt", &ntt_op<false>);
  m.impl("intt.out", &ntt_out_op<false>);
  m.impl("mod_down_ntt", &mod_down_ntt);
  m.impl("mod_down_ntt.out", &mod_down_ntt_out);
  m.impl("intt_galois", &intt_galois);
  m.impl("intt_product", &intt_product);
  m.impl("add", &binary_op<ElementwiseOp::kAdd>);
  m.impl("add.out", &binary_out_op<ElementwiseOp::kAdd>);
  m.impl("sub", &binary_op<ElementwiseOp::kSub>);
  m.impl("sub.out", &binary_out_op<ElementwiseOp::kSub>);
  m.impl("mul", &binary_op<ElementwiseOp::kMul>);
  m.impl("mul.out", &binary_out_op<ElementwiseOp::kMul>);
  m.impl("neg", &neg_op);
  m.impl("neg.out", &neg_out);
  m.impl("mul_const", &mul_const_op);
  m.impl("mul_const.out", &mul_const_out);
  m.impl("sub_mul_const", &sub_mul_const_op);
  m.impl("sub_mul_const.out", &sub_mul_const_out);
  m.impl("mul_add", &mul_add_op);
  m.impl("mul_add.out", &mul_add_out);
  m.impl("tensor_product", &tensor_product);
  m.impl("tensor_product.out", &tensor_product_out);
  m.impl("bconv", &bconv);
  m.impl("bconv.out", &bconv_out);
  m.impl("ks_inner_product", &ks_inner_product);
  m.impl("ks_inner_product.out", &ks_inner_product_out);
  m.impl("ntt_inner_product", &ntt_inner_product);
  m.impl("mod_up_conv", &mod_up_conv);
  m.impl("mod_up_conv.out", &mod_up_conv_out);
  m.impl("center_lift", &center_lift);
  m.impl("center_lift.out", &center_lift_out);
  m.impl("automorphism_ntt", &automorphism_op<true>);
  m.impl("automorphism_ntt.out", &automorphism_out_op<true>);
  m.impl("automorphism_coeff", &automorphism_op<false>);
  m.impl("automorphism_coeff.out", &automorphism_out_op<false>);
  m.impl("ks_inner_product_fused", &ks_inner_product_fused_out);
  m.impl("linear_combination", &linear_combination_out);
  m.impl("giant_products", &giant_products_out);
  m.impl("ks_inner_product_pair", &ks_inner_product_pair_out);
  m.impl("ks_inner_product_babies", &ks_inner_product_babies_out);
  m.impl("sample_uniform", &sample_uniform);
  m.impl("sample_cbd", &sample_cbd);
  m.impl("sample_ternary", &sample_ternary);
}

const char* cpu_path_name(cpu::CpuPath path) {
  switch (path) {
    case cpu::CpuPath::kIfma:
      return "ifma";
    case cpu::CpuPath::kAvx2:
      return "avx2";
    case cpu::CpuPath::kScalar:
      break;
  }
  return "scalar";
}

void set_cpu_path_by_name(const std::string& name) {
  for (const cpu::CpuPath path : {cpu::CpuPath::kScalar, cpu::CpuPath::kAvx2, cpu::CpuPath::kIfma}) {
    if (name != cpu_path_name(path)) continue;
    TORCH_CHECK(cpu::set_cpu_path(path), "this CPU cannot run the '", name, "' path (it supports up to '",
                cpu_path_name(cpu::cpu_path_supported()), "')");
    return;
  }
  TORCH_CHECK(false, "unknown CPU path '", name, "': expected 'ifma', 'avx2' or 'scalar'");
}

}  // namespace
}  // namespace fhe

TORCH_LIBRARY(fhe_core, m) {
  // (int plan: KernelPlan.kernel_flags, plan.h)
  m.def("ntt(Tensor a, Tensor moduli, Tensor table, int plan, int[]? skip=None) -> Tensor");
  m.def("ntt.out(Tensor a, Tensor moduli, Tensor table, int plan, int[]? skip=None, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("intt(Tensor a, Tensor moduli, Tensor table, int plan, int[]? skip=None) -> Tensor");
  m.def("intt.out(Tensor a, Tensor moduli, Tensor table, int plan, int[]? skip=None, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("mod_down_ntt(Tensor x, Tensor c, int p_rows, Tensor consts, Tensor consts_shoup, Tensor moduli, "
        "Tensor table, int plan, Tensor? add=None, int add_galois=1) -> Tensor");
  m.def("mod_down_ntt.out(Tensor x, Tensor c, int p_rows, Tensor consts, Tensor consts_shoup, Tensor moduli, "
        "Tensor table, int plan, Tensor? add=None, int add_galois=1, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("intt_galois(Tensor a, Tensor moduli, Tensor table, int plan, int galois, bool store_permuted=True) -> "
        "(Tensor, Tensor)");
  m.def("intt_product(Tensor a, Tensor b, Tensor moduli, Tensor table, int plan) -> (Tensor, Tensor)");
  for (const char* name : {"add", "sub", "mul"}) {
    m.def((std::string(name) + "(Tensor a, Tensor b, Tensor moduli) -> Tensor").c_str());
    m.def((std::string(name) + ".out(Tensor a, Tensor b, Tensor moduli, *, Tensor(a!) out) -> Tensor(a!)").c_str());
  }
  m.def("neg(Tensor a, Tensor moduli) -> Tensor");
  m.def("neg.out(Tensor a, Tensor moduli, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("mul_const(Tensor a, Tensor consts, Tensor consts_shoup, Tensor moduli) -> Tensor");
  m.def("mul_const.out(Tensor a, Tensor consts, Tensor consts_shoup, Tensor moduli, *, Tensor(a!) out) -> "
        "Tensor(a!)");
  m.def("sub_mul_const(Tensor a, Tensor b, Tensor consts, Tensor consts_shoup, Tensor moduli) -> Tensor");
  m.def("sub_mul_const.out(Tensor a, Tensor b, Tensor consts, Tensor consts_shoup, Tensor moduli, *, "
        "Tensor(a!) out) -> Tensor(a!)");
  m.def("mul_add(Tensor a, Tensor b, Tensor c, Tensor moduli) -> Tensor");
  m.def("mul_add.out(Tensor a, Tensor b, Tensor c, Tensor moduli, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("tensor_product(Tensor a, Tensor b, Tensor moduli) -> Tensor");
  m.def("tensor_product.out(Tensor a, Tensor b, Tensor moduli, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("bconv(Tensor a, Tensor src_moduli, Tensor dst_moduli, Tensor qhat_inv, Tensor qhat_inv_shoup, "
        "Tensor qhat_mod_p, int plan, Tensor? neg_q_mod_p=None, bool lazy=False, Tensor? fragments=None) -> Tensor");
  m.def("bconv.out(Tensor a, Tensor src_moduli, Tensor dst_moduli, Tensor qhat_inv, Tensor qhat_inv_shoup, "
        "Tensor qhat_mod_p, int plan, Tensor? neg_q_mod_p=None, bool lazy=False, Tensor? fragments=None, *, "
        "Tensor(a!) out) -> Tensor(a!)");
  m.def("ks_inner_product(Tensor digits, Tensor key, int q_count, int p_row, Tensor moduli) -> Tensor");
  m.def("ks_inner_product.out(Tensor digits, Tensor key, int q_count, int p_row, Tensor moduli, *, "
        "Tensor(a!) out) -> Tensor(a!)");
  m.def("ntt_inner_product(Tensor(a!) digits, Tensor moduli, Tensor table, Tensor key, int q_count, int p_row, "
        "int plan, int[]? skip=None, Tensor? own=None, int own_galois=1, Tensor? tensor_a=None, Tensor? tensor_b=None, "
        "Tensor? p_mod_q=None) -> Tensor");
  m.def("mod_up_conv(Tensor coeffs, Tensor src_moduli, Tensor qhat_inv, Tensor qhat_inv_shoup, Tensor dst_moduli, "
        "Tensor qhat_mod_p, int plan, Tensor? own=None, bool lazy=False, Tensor? fragments=None, bool copy_own=True) "
        "-> Tensor");
  m.def("mod_up_conv.out(Tensor coeffs, Tensor src_moduli, Tensor qhat_inv, Tensor qhat_inv_shoup, "
        "Tensor dst_moduli, Tensor qhat_mod_p, int plan, Tensor? own=None, bool lazy=False, Tensor? fragments=None, "
        "bool copy_own=True, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("conv_mma_fragments(Tensor qhat_mod_p, Tensor dst_moduli, Tensor? neg_q_mod_p=None) -> Tensor");
  m.def("center_lift(Tensor a, int q, Tensor dst_moduli) -> Tensor");
  m.def("center_lift.out(Tensor a, int q, Tensor dst_moduli, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("automorphism_ntt(Tensor a, Tensor moduli, int galois) -> Tensor");
  m.def("automorphism_ntt.out(Tensor a, Tensor moduli, int galois, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("automorphism_coeff(Tensor a, Tensor moduli, int galois) -> Tensor");
  m.def("automorphism_coeff.out(Tensor a, Tensor moduli, int galois, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("sample_uniform(Tensor moduli, int n, int[] key, int nonce) -> Tensor");
  m.def("sample_cbd(Tensor moduli, int n, int[] key, int nonce, int eta) -> Tensor");
  m.def("sample_ternary(Tensor moduli, int n, int[] key, int nonce, int hamming_weight) -> Tensor");
  m.def("ntt_table(Tensor moduli, Tensor roots, int log_n, bool pairs=False) -> Tensor");
  // (out-only ops: out is a strided view of a caller's buffer, or accumulated into)
  m.def("ks_inner_product_fused(Tensor digits, Tensor key, int q_count, int p_row, Tensor moduli, int galois, "
        "Tensor? add, int add_galois, bool accumulate, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("linear_combination(Tensor[] terms, Tensor weights, Tensor moduli, Tensor? constant, "
        "int constant_components, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("giant_products(Tensor babies, Tensor[] pts, int[] index, Tensor moduli, *, Tensor(a!) out) -> Tensor(a!)");
  m.def("ks_inner_product_pair(Tensor digits_a, Tensor digits_b, Tensor key, int q_count, int p_row, Tensor moduli, "
        "*, Tensor(a!) out) -> Tensor(a!)");
  m.def("ks_inner_product_babies(Tensor digits, Tensor[] keys, int[] galois, int[] positions, int q_count, int p_row, "
        "Tensor moduli, Tensor? add, *, Tensor(a!) out) -> Tensor(a!)");
  // The CPU kernels' arithmetic (cpu/path.h): "ifma", "avx2" or "scalar".
  m.def("cpu_path() -> str", []() { return std::string(fhe::cpu_path_name(fhe::cpu::cpu_path())); });
  m.def("cpu_path_supported() -> str",
        []() { return std::string(fhe::cpu_path_name(fhe::cpu::cpu_path_supported())); });
  m.def("set_cpu_path(str path) -> ()", [](const std::string& name) { fhe::set_cpu_path_by_name(name); });
  m.def("cuda_built() -> bool", []() {
#ifdef FHE_CORE_WITH_CUDA
    return true;
#else
    return false;
#endif
  });
}

TORCH_LIBRARY_IMPL(fhe_core, CPU, m) {
  fhe::register_impls(m);
  m.impl("ntt_table", &fhe::ntt_table);
  m.impl("conv_mma_fragments", &fhe::conv_mma_fragments);
}

#ifdef FHE_CORE_WITH_CUDA
TORCH_LIBRARY_IMPL(fhe_core, CUDA, m) { fhe::register_impls(m); }
#endif

// An empty Python module: importing fhe_core._C runs the static registrations above.
extern "C" PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}
