// The key-switching ops: the inner product of the gadget digits with a switching key, and ModUp's forward NTT with
// the inner product as one op (ntt_inner_product).
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>

#include <algorithm>

#include "keyswitch.h"
#include "ops.h"

namespace fhe {

void check_ks_digits(const Tensor& digits, const Tensor& moduli, const char* op) {
  check_residues(digits, moduli, op, "digits");
  FHE_CHECK(digits.dim() == 3, op, ": digits must be [dnum, limbs, N], got ", digits.sizes());
  FHE_CHECK(digits.size(0) >= 1 && digits.size(0) <= kMaxDigits, op, ": 1 to ", kMaxDigits, " digits, got ",
            digits.size(0));
}

int64_t check_ks_key(const Tensor& key, const Tensor& digits, const char* op) {
  check_words(key, op, "key");
  check_same_device(key, digits, op, "key");
  const int64_t dnum = digits.size(0), n = digits.size(2);
  FHE_CHECK(key.dim() == 4 && key.size(0) >= dnum && key.size(1) == 2 && key.size(3) == n, op,
            ": key must be [dnum >= ", dnum, ", 2, rows, ", n, "], got ", key.sizes());
  return key.size(2);
}

void check_ks_rows(int64_t q_count, int64_t p_row, int64_t limbs, int64_t key_rows, const char* op) {
  FHE_CHECK(q_count >= 0 && q_count <= limbs && q_count <= p_row && p_row + (limbs - q_count) <= key_rows, op,
            ": limbs [0, ", q_count, ") must be key rows [0, ", q_count, ") and the other ", limbs - q_count,
            " rows from ", p_row, ", within the key's ", key_rows, " rows");
}

KsInnerProductArgs ks_args(const Tensor& digits, const Tensor& key, int64_t q_count, int64_t p_row,
                           const Tensor& moduli, const char* op) {
  check_ks_digits(digits, moduli, op);
  const int64_t key_rows = check_ks_key(key, digits, op);
  check_ks_rows(q_count, p_row, digits.size(1), key_rows, op);
  return KsInnerProductArgs{words(digits), words(key), nullptr, moduli_ptr(moduli), static_cast<int>(digits.size(0)),
                            static_cast<int>(digits.size(1)), static_cast<int>(q_count), p_row, key_rows,
                            digits.size(2)};
}

Tensor& ks_inner_product_out(const Tensor& digits, const Tensor& key, int64_t q_count, int64_t p_row,
                             const Tensor& moduli, Tensor& out) {
  const char* op = "ks_inner_product";
  KsInnerProductArgs args = ks_args(digits, key, q_count, p_row, moduli, op);
  check_out(out, digits, {2, digits.size(1), digits.size(2)}, op);
  at::assert_no_overlap(out, digits);
  args.out = mutable_words(out);
  FHE_RUN(ks_inner_product, args, digits);
  return out;
}

Tensor ks_inner_product(const Tensor& digits, const Tensor& key, int64_t q_count, int64_t p_row, const Tensor& moduli) {
  Tensor out = at::empty({2, digits.size(1), digits.size(2)}, digits.options());
  return ks_inner_product_out(digits, key, q_count, p_row, moduli, out);
}

namespace {

bool fuses(const NttInnerProductArgs& args, const Tensor& digits) {
#ifdef FHE_CORE_WITH_CUDA
  return digits.is_cuda() && cuda::ntt_inner_product_fuses(args);
#else
  return false;
#endif
}

bool takes_tensor(const NttInnerProductArgs& args, const Tensor& digits) {
#ifdef FHE_CORE_WITH_CUDA
  return digits.is_cuda() && cuda::ntt_inner_product_takes_tensor(args);
#else
  return false;
#endif
}

// The skipped rows from `own` (through sigma_galois) copied into the digits, for the paths that read them there
// (the CPU, CUDA where the fused kernel does not apply).
void copy_own_rows(Tensor& digits, const Tensor& own, int64_t galois, const Tensor& moduli, const NttSkip& skip) {
  const int64_t limbs = digits.size(1);
  Tensor source = own;
  if (galois != 1) {
    source = at::empty_like(own);
    automorphism_ntt_out(own, moduli.narrow(0, skip.begin, limbs - skip.begin), galois, source);
  }
  for (int64_t j = 0; j < digits.size(0); ++j) {
    const int64_t lo = skip.begin + j * skip.stride, hi = std::min<int64_t>(limbs, lo + skip.length);
    if (lo < hi) digits.select(0, j).narrow(0, lo, hi - lo).copy_(source.narrow(0, lo - skip.begin, hi - lo));
  }
}

// `own` ([limbs - skip[0], N]: the rows from skip[0] on): read by the fused kernel, else copied into the digits.
void set_own(NttInnerProductArgs& args, Tensor& digits, const Tensor& own, int64_t own_galois, const Tensor& moduli,
             bool skip, const char* op) {
  FHE_CHECK(skip, op, ": own needs skip (the rows it stands for)");
  const int64_t rows = digits.size(1) - args.ntt.skip.begin, n = digits.size(2);
  check_words(own, op, "own");
  check_same_device(own, digits, op, "own");
  FHE_CHECK(own.dim() == 2 && own.size(0) == rows && own.size(1) == n, op, ": own must be [", rows, ", ", n,
            "] (the rows from skip[0] on), got ", own.sizes());
  at::assert_no_overlap(digits, own);
  args.own = words(own);
  args.own_galois = static_cast<u64>(own_galois);
  if (!fuses(args, digits)) {
    copy_own_rows(digits, own, own_galois, moduli, args.ntt.skip);
    args.own = nullptr;
    args.own_galois = 1;
  }
}

// HMult's tensor terms (NttInnerProductArgs::tensor_a): only the CUDA digit-group kernel adds them, so the caller
// (KernelPlan.tensor_in_inner_product) passes them only where it runs; anywhere else this is an error.
void set_tensor_terms(NttInnerProductArgs& args, const Tensor& digits, const Tensor& a, const Tensor& b,
                      const Tensor& p_mod_q, const char* op) {
  const int64_t q_rows = args.ntt.limbs - args.ntt.skip.begin;
  for (const auto& [t, name] : {std::pair<const Tensor&, const char*>{a, "tensor_a"}, {b, "tensor_b"}}) {
    check_sized(t, digits, {2, q_rows, digits.size(2)}, op, name);
    at::assert_no_overlap(digits, t);
  }
  check_sized(p_mod_q, digits, {q_rows}, op, "p_mod_q");
  args.tensor_a = words(a);
  args.tensor_b = words(b);
  args.p_mod_q = words(p_mod_q);
  FHE_CHECK(takes_tensor(args, digits), op,
            ": tensor_a/tensor_b need the CUDA digit-group kernel (the tuned plan, own given, at most 4 digits, "
            "16-byte aligned tensors); elsewhere take the tensor product before the key switch");
}

}  // namespace

// ModUp's forward NTT (in place, skipping `skip`'s rows) and the inner product as one op: returns
// ks_inner_product(ntt(digits, skip)); digits is scratch afterwards. With own, the skipped rows come from own
// (through sigma_own_galois); with tensor_a, tensor_b and p_mod_q, the Q rows of component c also get
// (P mod q_i) * t_c (kernels.h, NttInnerProductArgs).
Tensor ntt_inner_product(Tensor& digits, const Tensor& moduli, const Tensor& table, const Tensor& key, int64_t q_count,
                         int64_t p_row, int64_t plan, at::OptionalIntArrayRef skip, const std::optional<Tensor>& own,
                         int64_t own_galois, const std::optional<Tensor>& tensor_a,
                         const std::optional<Tensor>& tensor_b, const std::optional<Tensor>& p_mod_q) {
  const char* op = "ntt_inner_product";
  NttInnerProductArgs args{NttArgs{}, ks_args(digits, key, q_count, p_row, moduli, op)};
  const int64_t dnum = digits.size(0), limbs = digits.size(1), n = digits.size(2);
  at::assert_no_overlap(key, digits);
  Tensor out = at::empty({2, limbs, n}, digits.options());
  args.ip.out = mutable_words(out);
  args.ntt = NttArgs{words(digits), mutable_words(digits), moduli_ptr(moduli), words(table), dnum * limbs,
                     static_cast<int>(limbs), log2_exact(n, op)};
  args.ntt.table_rows = check_ntt_table(table, digits, moduli, op);
  args.ntt.plan = checked_plan(plan, op);
  args.ntt.skip = checked_skip(skip, limbs, op);
  check_galois(own_galois, n, op, "own_galois");
  if (own.has_value()) set_own(args, digits, *own, own_galois, moduli, skip.has_value(), op);
  else FHE_CHECK(own_galois == 1, op, ": own_galois needs own");
  if (tensor_a.has_value() || tensor_b.has_value() || p_mod_q.has_value()) {
    FHE_CHECK(tensor_a.has_value() && tensor_b.has_value() && p_mod_q.has_value(), op,
              ": tensor_a, tensor_b and p_mod_q go together");
    FHE_CHECK(own.has_value() && own_galois == 1, op, ": tensor_a needs own (and own_galois 1)");
    set_tensor_terms(args, digits, *tensor_a, *tensor_b, *p_mod_q, op);
  }
  FHE_RUN(ntt_inner_product, args, digits);
  return out;
}

}  // namespace fhe
