// The checks every key-switching inner product makes (ops/keyswitch.cpp, ops/fused.cpp).
#pragma once

#include "common.h"

namespace fhe {

constexpr int64_t kMaxDigits = 63;  // dnum products of < 2^122 fit a 128-bit accumulator

// The arguments of an inner product of digits ([dnum, limbs, N] residues, 1 <= dnum <= kMaxDigits) with a switching
// key ([>= dnum, 2, key_rows, N] on their device; its rows [0, q_count) for limbs [0, q_count), the others from
// p_row on); out: nullptr.
KsInnerProductArgs ks_args(const Tensor& digits, const Tensor& key, int64_t q_count, int64_t p_row,
                           const Tensor& moduli, const char* op);
// The digits alone (ks_args without a key).
void check_ks_digits(const Tensor& digits, const Tensor& moduli, const char* op);
// A key for those digits; returns its row count.
int64_t check_ks_key(const Tensor& key, const Tensor& digits, const char* op);
void check_ks_rows(int64_t q_count, int64_t p_row, int64_t limbs, int64_t key_rows, const char* op);

}  // namespace fhe
