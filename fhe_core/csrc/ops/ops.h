// Every op of torch.ops.fhe_core, one declaration per implementation (register.cpp registers them; the schemas there
// give the argument names).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <tuple>

#include "../kernels.h"

namespace fhe {

using at::Tensor;
using OptionalTensor = std::optional<Tensor>;

// ops/ntt.cpp
Tensor ntt(const Tensor& a, const Tensor& moduli, const Tensor& table, int64_t plan, at::OptionalIntArrayRef skip,
           bool forward);
Tensor& ntt_out(const Tensor& a, const Tensor& moduli, const Tensor& table, int64_t plan, at::OptionalIntArrayRef skip,
                Tensor& out, bool forward);
Tensor mod_down_ntt(const Tensor& x, const Tensor& c, int64_t p_rows, const Tensor& consts, const Tensor& consts_shoup,
                    const Tensor& moduli, const Tensor& table, int64_t plan, const OptionalTensor& add,
                    int64_t add_galois);
Tensor& mod_down_ntt_out(const Tensor& x, const Tensor& c, int64_t p_rows, const Tensor& consts,
                         const Tensor& consts_shoup, const Tensor& moduli, const Tensor& table, int64_t plan,
                         const OptionalTensor& add, int64_t add_galois, Tensor& out);
std::tuple<Tensor, Tensor> intt_galois(const Tensor& a, const Tensor& moduli, const Tensor& table, int64_t plan,
                                       int64_t galois, bool store_permuted);
std::tuple<Tensor, Tensor> intt_product(const Tensor& a, const Tensor& b, const Tensor& moduli, const Tensor& table,
                                        int64_t plan);
Tensor ntt_table(const Tensor& moduli, const Tensor& roots, int64_t log_n, bool pairs);

// ops/elementwise.cpp
Tensor& binary_out(const Tensor& a, const Tensor& b, const Tensor& moduli, Tensor& out, ElementwiseOp kind);
Tensor& neg_out(const Tensor& a, const Tensor& moduli, Tensor& out);
Tensor& mul_const_out(const Tensor& a, const Tensor& consts, const Tensor& consts_shoup, const Tensor& moduli,
                      Tensor& out);
Tensor& sub_mul_const_out(const Tensor& a, const Tensor& b, const Tensor& consts, const Tensor& consts_shoup,
                          const Tensor& moduli, Tensor& out);
Tensor& mul_add_out(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& moduli, Tensor& out);
Tensor tensor_product(const Tensor& a, const Tensor& b, const Tensor& moduli);
Tensor& tensor_product_out(const Tensor& a, const Tensor& b, const Tensor& moduli, Tensor& out);
Tensor& automorphism_out(const Tensor& a, const Tensor& moduli, int64_t galois, Tensor& out, bool ntt);

// ops/conv.cpp
Tensor bconv(const Tensor& a, const Tensor& src_moduli, const Tensor& dst_moduli, const Tensor& qhat_inv,
             const Tensor& qhat_inv_shoup, const Tensor& qhat_mod_p, int64_t plan, const OptionalTensor& neg_q_mod_p,
             bool lazy, const OptionalTensor& fragments);
Tensor& bconv_out(const Tensor& a, const Tensor& src_moduli, const Tensor& dst_moduli, const Tensor& qhat_inv,
                  const Tensor& qhat_inv_shoup, const Tensor& qhat_mod_p, int64_t plan,
                  const OptionalTensor& neg_q_mod_p, bool lazy, const OptionalTensor& fragments, Tensor& out);
Tensor mod_up_conv(const Tensor& coeffs, const Tensor& src_moduli, const Tensor& qhat_inv, const Tensor& qhat_inv_shoup,
                   const Tensor& dst_moduli, const Tensor& qhat_mod_p, int64_t plan, const OptionalTensor& own,
                   bool lazy, const OptionalTensor& fragments, bool copy_own);
Tensor& mod_up_conv_out(const Tensor& coeffs, const Tensor& src_moduli, const Tensor& qhat_inv,
                        const Tensor& qhat_inv_shoup, const Tensor& dst_moduli, const Tensor& qhat_mod_p, int64_t plan,
                        const OptionalTensor& own, bool lazy, const OptionalTensor& fragments, bool copy_own,
                        Tensor& out);
Tensor conv_mma_fragments(const Tensor& qhat_mod_p, const Tensor& dst_moduli, const OptionalTensor& neg_q_mod_p);
Tensor center_lift(const Tensor& a, int64_t q, const Tensor& dst_moduli);
Tensor& center_lift_out(const Tensor& a, int64_t q, const Tensor& dst_moduli, Tensor& out);

// ops/keyswitch.cpp
Tensor ks_inner_product(const Tensor& digits, const Tensor& key, int64_t q_count, int64_t p_row, const Tensor& moduli);
Tensor& ks_inner_product_out(const Tensor& digits, const Tensor& key, int64_t q_count, int64_t p_row,
                             const Tensor& moduli, Tensor& out);
Tensor ntt_inner_product(Tensor& digits, const Tensor& moduli, const Tensor& table, const Tensor& key, int64_t q_count,
                         int64_t p_row, int64_t plan, at::OptionalIntArrayRef skip, const OptionalTensor& own,
                         int64_t own_galois, const OptionalTensor& tensor_a, const OptionalTensor& tensor_b,
                         const OptionalTensor& p_mod_q);

// ops/fused.cpp
Tensor& ks_inner_product_fused_out(const Tensor& digits, const Tensor& key, int64_t q_count, int64_t p_row,
                                   const Tensor& moduli, int64_t galois, const OptionalTensor& add, int64_t add_galois,
                                   bool accumulate, Tensor& out);
Tensor& linear_combination_out(at::TensorList terms, const Tensor& weights, const Tensor& moduli,
                               const OptionalTensor& constant, int64_t constant_components, Tensor& out);
Tensor& giant_products_out(const Tensor& babies, at::TensorList pts, at::IntArrayRef index, const Tensor& moduli,
                           Tensor& out);
Tensor& ks_inner_product_pair_out(const Tensor& digits_a, const Tensor& digits_b, const Tensor& key, int64_t q_count,
                                  int64_t p_row, const Tensor& moduli, Tensor& out);
Tensor& ks_inner_product_babies_out(const Tensor& digits, at::TensorList keys, at::IntArrayRef galois,
                                    at::IntArrayRef positions, int64_t q_count, int64_t p_row, const Tensor& moduli,
                                    const OptionalTensor& add, Tensor& out);

// ops/sampling.cpp
Tensor sample_uniform(const Tensor& moduli, int64_t n, at::IntArrayRef key, int64_t nonce);
Tensor sample_cbd(const Tensor& moduli, int64_t n, at::IntArrayRef key, int64_t nonce, int64_t eta);
Tensor sample_ternary(const Tensor& moduli, int64_t n, at::IntArrayRef key, int64_t nonce, int64_t hamming_weight);

}  // namespace fhe
