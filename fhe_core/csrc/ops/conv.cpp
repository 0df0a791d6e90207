// The basis conversions: bconv (one digit of every input limb: the plain Conv, or the exact centred one), mod_up_conv
// (every digit of ModUp at once), the tensor-core Conv's precomputed fragments (host) and the centred lift.
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <vector>

#include "common.h"
#include "ops.h"

namespace fhe {

namespace {

constexpr int64_t kMaxBconvInputLimbs = 64;  // 64 products of < 2^122 fit a 128-bit accumulator
constexpr int64_t kMmaMaxSlots = 16;         // the tensor-core Conv's slots (input limbs, + 1 if exact)

int64_t mma_k_tiles(int64_t slots) { return (slots + 3) / 4; }

// The optional precomputed B fragments of a Conv call: int32 [dnum, rows, KT, 64] on the input's device.
const u32* checked_fragments(const std::optional<Tensor>& fragments, const Tensor& a, int64_t dnum, int64_t rows,
                             int64_t slots, const char* op) {
  if (!fragments.has_value()) return nullptr;
  const Tensor& f = *fragments;
  FHE_CHECK(f.scalar_type() == at::kInt && f.is_contiguous(), op, ": fragments must be contiguous int32");
  check_same_device(f, a, op, "fragments");
  const std::vector<int64_t> sizes{dnum, rows, mma_k_tiles(slots), 64};
  FHE_CHECK(slots <= kMmaMaxSlots && f.sizes() == at::IntArrayRef(sizes), op, ": fragments must be ", sizes,
            " (conv_mma_fragments of the same constants), got ", f.sizes());
  return reinterpret_cast<const u32*>(f.data_ptr<int32_t>());
}

// Output sizes of a conversion of a's limbs into dst_moduli's primes.
std::vector<int64_t> converted_sizes(const Tensor& a, const Tensor& dst_moduli) {
  std::vector<int64_t> sizes(a.sizes().begin(), a.sizes().end());
  if (sizes.size() >= 2 && dst_moduli.dim() >= 1) sizes[sizes.size() - 2] = dst_moduli.size(0);  // (else: checks fail)
  return sizes;
}

// The words of fragment table row (j, r): for slot k < 4 KT the constant C and its byte shifts D_a = 2^(8a) C mod
// p_r (a < 8); the word for lane 4 b + 2 (k & 1) + h, register (k & 3) / 2 of K tile k / 4 holds byte b of D_4h, ...,
// D_4h+3 (cuda/conv.cu, the m16n8k32 B layout).
void fill_fragments(u32* row, const u64* consts, int64_t stride, int64_t alpha, const u64* neg, int64_t kt_count,
                    u64 q, const char* op) {
  for (int64_t k = 0; k < 4 * kt_count; ++k) {
    const u64 c = k < alpha ? consts[k * stride] : (neg != nullptr && k == alpha ? *neg : 0);
    FHE_CHECK(c < q, op, ": constants must be reduced mod their prime");
    u64 d[8];
    d[0] = c;
    for (int a = 1; a < 8; ++a) d[a] = static_cast<u64>((static_cast<unsigned __int128>(d[a - 1]) << 8) % q);
    for (int h = 0; h < 2; ++h)
      for (int b = 0; b < 8; ++b) {
        u32 word = 0;
        for (int e = 0; e < 4; ++e) word |= static_cast<u32>((d[4 * h + e] >> (8 * b)) & 0xff) << (8 * e);
        row[((k / 4) * 32 + 4 * b + 2 * (k & 1) + h) * 2 + (k & 3) / 2] = word;
      }
  }
}

}  // namespace

// The tensor-core Conv's B fragments (cuda/conv.cu), computed once per set of constants instead of by every block.
// qhat_mod_p: [dnum, alpha, rows] (ModUp) or [alpha, rows] (one digit, bconv); slot alpha holds (-Q) mod p_r with
// neg_q_mod_p. Returns int32 [dnum, rows, KT, 64] on the CPU (KT = ceil(slots / 4)).
Tensor conv_mma_fragments(const Tensor& qhat_mod_p, const Tensor& dst_moduli, const std::optional<Tensor>& neg_q_mod_p) {
  const char* op = "conv_mma_fragments";
  check_words(qhat_mod_p, op, "qhat_mod_p");
  check_words(dst_moduli, op, "dst_moduli");
  FHE_CHECK(qhat_mod_p.device().is_cpu() && dst_moduli.device().is_cpu(), op, ": takes CPU tensors");
  FHE_CHECK(qhat_mod_p.dim() == 2 || qhat_mod_p.dim() == 3, op, ": qhat_mod_p must be [alpha, rows] or "
            "[dnum, alpha, rows], got ", qhat_mod_p.sizes());
  const int64_t dnum = qhat_mod_p.dim() == 3 ? qhat_mod_p.size(0) : 1;
  const int64_t alpha = qhat_mod_p.size(-2), rows = qhat_mod_p.size(-1);
  FHE_CHECK(dst_moduli.dim() == 2 && dst_moduli.size(0) == rows && dst_moduli.size(1) == 4, op,
            ": dst_moduli must be [", rows, ", 4], got ", dst_moduli.sizes());
  const u64* neg = nullptr;
  if (neg_q_mod_p.has_value()) {
    check_words(*neg_q_mod_p, op, "neg_q_mod_p");
    FHE_CHECK(neg_q_mod_p->device().is_cpu() && neg_q_mod_p->dim() == 1 && neg_q_mod_p->size(0) == rows &&
                  dnum == 1, op, ": neg_q_mod_p must be [", rows, "] on the CPU, with one digit");
    neg = words(*neg_q_mod_p);
  }
  const int64_t slots = alpha + (neg != nullptr ? 1 : 0), kt_count = mma_k_tiles(slots);
  FHE_CHECK(slots >= 1 && slots <= kMmaMaxSlots, op, ": the tensor cores take 1 to ", kMmaMaxSlots, " slots, got ",
            slots);
  Tensor out = at::zeros({dnum, rows, kt_count, 64}, qhat_mod_p.options().dtype(at::kInt));
  u32* fragments = reinterpret_cast<u32*>(out.data_ptr<int32_t>());
  for (int64_t j = 0; j < dnum; ++j)
    for (int64_t r = 0; r < rows; ++r)
      fill_fragments(fragments + (j * rows + r) * kt_count * 64, words(qhat_mod_p) + j * alpha * rows + r, rows, alpha,
                     neg != nullptr ? neg + r : nullptr, kt_count, moduli_ptr(dst_moduli)[r].value, op);
  return out;
}

Tensor& bconv_out(const Tensor& a, const Tensor& src_moduli, const Tensor& dst_moduli, const Tensor& qhat_inv,
                  const Tensor& qhat_inv_shoup, const Tensor& qhat_mod_p, int64_t plan,
                  const std::optional<Tensor>& neg_q_mod_p, bool lazy, const std::optional<Tensor>& fragments,
                  Tensor& out) {
  const char* op = "bconv";
  check_residues(a, src_moduli, op);
  check_moduli(dst_moduli, a, op, "dst_moduli");
  const int64_t l_in = src_moduli.size(0), l_out = dst_moduli.size(0);
  FHE_CHECK(l_in <= kMaxBconvInputLimbs, op, ": at most ", kMaxBconvInputLimbs, " input limbs, got ", l_in);
  check_sized(qhat_inv, a, {l_in}, op, "qhat_inv");
  check_sized(qhat_inv_shoup, a, {l_in}, op, "qhat_inv");
  check_sized(qhat_mod_p, a, {l_in, l_out}, op, "qhat_mod_p");
  if (neg_q_mod_p.has_value()) {
    check_sized(*neg_q_mod_p, a, {l_out}, op, "neg_q_mod_p");
    // u < l_in: one more product of < 2^(6 + 61) must still fit the 128-bit accumulator
    FHE_CHECK(l_in < kMaxBconvInputLimbs, op, ": the exact conversion takes at most ", kMaxBconvInputLimbs - 1,
              " input limbs, got ", l_in);
  }
  check_out(out, a, converted_sizes(a, dst_moduli), op);
  // One digit made of every input limb: the plain Conv.
  ConvArgs args{words(a), mutable_words(out), moduli_ptr(src_moduli), moduli_ptr(dst_moduli), words(qhat_inv),
                words(qhat_inv_shoup), words(qhat_mod_p), a.numel() / (l_in * a.size(-1)), static_cast<int>(l_in),
                static_cast<int>(l_in), 1, static_cast<int>(l_out), a.size(-1), words(neg_q_mod_p)};
  args.lazy_out = lazy;
  args.plan = checked_plan(plan, op);
  args.mma_fragments = checked_fragments(fragments, a, 1, l_out, l_in + (neg_q_mod_p.has_value() ? 1 : 0), op);
  FHE_RUN(conv, args, a);
  return out;
}

Tensor bconv(const Tensor& a, const Tensor& src_moduli, const Tensor& dst_moduli, const Tensor& qhat_inv,
             const Tensor& qhat_inv_shoup, const Tensor& qhat_mod_p, int64_t plan,
             const std::optional<Tensor>& neg_q_mod_p, bool lazy, const std::optional<Tensor>& fragments) {
  Tensor out = at::empty(converted_sizes(a, dst_moduli), a.options());
  return bconv_out(a, src_moduli, dst_moduli, qhat_inv, qhat_inv_shoup, qhat_mod_p, plan, neg_q_mod_p, lazy,
                   fragments, out);
}

// ModUp's Conv of every digit of coeffs ([q_count, N]) to the rows of dst_moduli: [dnum, rows, N]. own: the digits'
// own rows (the last q_count rows), copied from it (copy_own) or left unwritten for the inner product to read.
Tensor& mod_up_conv_out(const Tensor& coeffs, const Tensor& src_moduli, const Tensor& qhat_inv,
                        const Tensor& qhat_inv_shoup, const Tensor& dst_moduli, const Tensor& qhat_mod_p, int64_t plan,
                        const std::optional<Tensor>& own, bool lazy, const std::optional<Tensor>& fragments,
                        bool copy_own, Tensor& out) {
  const char* op = "mod_up_conv";
  check_residues(coeffs, src_moduli, op, "coeffs");
  FHE_CHECK(coeffs.dim() == 2, op, ": coeffs must be [q_count, N], got ", coeffs.sizes());
  const int64_t q_count = coeffs.size(0), n = coeffs.size(1);
  check_sized(qhat_inv, coeffs, {q_count}, op, "qhat_inv");
  check_sized(qhat_inv_shoup, coeffs, {q_count}, op, "qhat_inv");
  check_moduli(dst_moduli, coeffs, op, "dst_moduli");
  check_words(qhat_mod_p, op, "qhat_mod_p");
  check_same_device(qhat_mod_p, coeffs, op, "qhat_mod_p");
  FHE_CHECK(qhat_mod_p.dim() == 3 && qhat_mod_p.size(2) == dst_moduli.size(0), op,
            ": qhat_mod_p must be [dnum, alpha, rows], got ", qhat_mod_p.sizes());
  const int64_t dnum = qhat_mod_p.size(0), alpha = qhat_mod_p.size(1), rows = dst_moduli.size(0);
  FHE_CHECK(alpha >= 1 && alpha <= kMaxBconvInputLimbs && dnum == (q_count + alpha - 1) / alpha, op, ": ", dnum,
            " digits of ", alpha, " primes do not cover ", q_count, " primes (or alpha exceeds ", kMaxBconvInputLimbs,
            ")");
  check_out(out, coeffs, {dnum, rows, n}, op);
  at::assert_no_overlap(out, coeffs);
  ConvArgs args{words(coeffs), mutable_words(out), moduli_ptr(src_moduli), moduli_ptr(dst_moduli), words(qhat_inv),
                words(qhat_inv_shoup), words(qhat_mod_p), 1, static_cast<int>(q_count), static_cast<int>(alpha),
                static_cast<int>(dnum), static_cast<int>(rows), n};
  if (own.has_value()) {
    check_words(*own, op, "own");
    check_same_device(*own, coeffs, op, "own");
    FHE_CHECK(own->sizes() == coeffs.sizes() && rows >= q_count, op, ": own must be [", q_count, ", ", n,
              "] over the last ", q_count, " of the ", rows, " rows, got ", own->sizes());
    at::assert_no_overlap(out, *own);
    args.own = words(*own);
    args.own_begin = static_cast<int>(rows - q_count);
    args.own_copy = copy_own;
  }
  args.lazy_out = lazy;
  args.plan = checked_plan(plan, op);
  args.mma_fragments = checked_fragments(fragments, coeffs, dnum, rows, alpha, op);
  FHE_RUN(conv, args, coeffs);
  return out;
}

Tensor mod_up_conv(const Tensor& coeffs, const Tensor& src_moduli, const Tensor& qhat_inv, const Tensor& qhat_inv_shoup,
                   const Tensor& dst_moduli, const Tensor& qhat_mod_p, int64_t plan, const std::optional<Tensor>& own,
                   bool lazy, const std::optional<Tensor>& fragments, bool copy_own) {
  Tensor out = at::empty({qhat_mod_p.size(0), dst_moduli.size(0), coeffs.size(1)}, coeffs.options());
  return mod_up_conv_out(coeffs, src_moduli, qhat_inv, qhat_inv_shoup, dst_moduli, qhat_mod_p, plan, own, lazy,
                         fragments, copy_own, out);
}

Tensor& center_lift_out(const Tensor& a, int64_t q, const Tensor& dst_moduli, Tensor& out) {
  const char* op = "center_lift";
  check_words(a, op, "a");
  FHE_CHECK(a.dim() >= 2 && a.size(-2) == 1 && a.size(-1) > 0, op, ": a must be one limb [..., 1, N], got ", a.sizes());
  FHE_CHECK(q > 2 && (q & 1) == 1 && q < (int64_t{1} << kMaxModulusBits), op, ": q must be an odd modulus below 2^",
            kMaxModulusBits, ", got ", q);
  check_moduli(dst_moduli, a, op, "dst_moduli");
  check_out(out, a, converted_sizes(a, dst_moduli), op);
  at::assert_no_overlap(out, a);
  const CenterLiftArgs args{words(a), mutable_words(out), make_modulus(static_cast<u64>(q)), moduli_ptr(dst_moduli),
                            a.numel() / a.size(-1), static_cast<int>(dst_moduli.size(0)), a.size(-1)};
  FHE_RUN(center_lift, args, a);
  return out;
}

Tensor center_lift(const Tensor& a, int64_t q, const Tensor& dst_moduli) {
  Tensor out = at::empty(converted_sizes(a, dst_moduli), a.options());
  return center_lift_out(a, q, dst_moduli, out);
}

}  // namespace fhe
