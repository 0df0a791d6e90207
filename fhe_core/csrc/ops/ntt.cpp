// The NTT ops: ntt, intt, mod_down_ntt (ModDown's last step in the store), intt_galois (a rotation's ModUp input),
// intt_product (HMult's) and the twiddle tables (host).
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>

#include <tuple>

#include "../common/ntt.h"
#include "common.h"
#include "ops.h"

namespace fhe {

namespace {

// The arguments of a transform of a's rows (checked: a, moduli, table, plan).
NttArgs ntt_args(const Tensor& a, Tensor& out, const Tensor& moduli, const Tensor& table, int64_t plan, int64_t rows,
                 const char* op) {
  NttArgs args{words(a), mutable_words(out), moduli_ptr(moduli), words(table), rows,
               static_cast<int>(moduli.size(0)), log2_exact(a.size(-1), op)};
  args.table_rows = check_ntt_table(table, a, moduli, op);
  args.plan = checked_plan(plan, op);
  return args;
}

// c of mod_down_ntt: [batch, p_rows + limbs, N], contiguous or a batch of contiguous [rows, N] blocks (rescale: the
// first rows of each component).
void check_mod_down_c(const Tensor& c, const Tensor& x, int64_t p_rows, int64_t limbs, const char* op) {
  const int64_t n = x.size(-1);
  FHE_CHECK(c.scalar_type() == at::kLong, op, ": c must be int64, got ", c.scalar_type());
  check_same_device(c, x, op, "c");
  FHE_CHECK(p_rows >= 0 && c.dim() == 3 && c.size(0) == x.size(0) && c.size(1) - limbs == p_rows && c.size(2) == n,
            op, ": c must be [", x.size(0), ", ", p_rows, " + ", limbs, ", ", n, "], got ", c.sizes());
  FHE_CHECK(c.stride(2) == 1 && c.stride(1) == n && (c.size(0) == 1 || c.stride(0) >= c.size(1) * n), op,
            ": c must be contiguous or a batch of contiguous [rows, N] blocks, got strides ", c.strides());
}

// One limb's rows of the table (common/ntt.h): psi^k and psi^-k at slot brv(k), 1/N folded into the inverse's
// index 1 (used only by the last stage) and stored at index 0 (never a twiddle), the Shoup companions, and (pairs)
// the interleaved (w, w') and FP64 rows of the CUDA kernels.
void fill_ntt_table(u64* fwd, u64 psi, const Modulus& m, int log_n, bool pairs) {
  const int64_t n = int64_t{1} << log_n;
  const u64 q = m.value, psi_inv = pow_mod(psi, 2 * n - 1, m);
  u64* inv = fwd + kInv * n;
  u64 p = 1, pi = 1;
  for (int64_t k = 0; k < n; ++k) {
    const u32 slot = bit_reverse(static_cast<u32>(k), log_n);
    fwd[slot] = p;
    inv[slot] = pi;
    p = mul_mod(p, psi, m);
    pi = mul_mod(pi, psi_inv, m);
  }
  const u64 n_inv = pow_mod(static_cast<u64>(n) % q, q - 2, m);
  inv[1] = mul_mod(inv[1], n_inv, m);
  inv[0] = n_inv;
  u64* fwd_shoup = fwd + kFwdShoup * n;
  u64* inv_shoup = fwd + kInvShoup * n;
  for (int64_t k = 0; k < n; ++k) {
    fwd_shoup[k] = shoup_precompute(fwd[k], q);
    inv_shoup[k] = shoup_precompute(inv[k], q);
  }
  if (!pairs) return;
  for (int64_t k = 0; k < n; ++k) {
    fwd[kFwdPairs * n + 2 * k] = fwd[k];
    fwd[kFwdPairs * n + 2 * k + 1] = fwd_shoup[k];
    fwd[kInvPairs * n + 2 * k] = inv[k];
    fwd[kInvPairs * n + 2 * k + 1] = inv_shoup[k];
    store_fp64_pair(fwd + kFwdFp64 * n + 2 * k, fwd[k], q);
    store_fp64_pair(fwd + kInvFp64 * n + 2 * k, inv[k], q);
  }
}

}  // namespace

Tensor& ntt_out(const Tensor& a, const Tensor& moduli, const Tensor& table, int64_t plan, at::OptionalIntArrayRef skip,
                Tensor& out, bool forward) {
  const char* op = forward ? "ntt" : "intt";
  // A strided batch of contiguous [limbs, N] blocks is read in place (ModDown's P rows of each component).
  const bool strided = !a.is_contiguous();
  FHE_CHECK(!strided || (a.dim() == 3 && a.stride(2) == 1 && a.stride(1) == a.size(2) &&
                         a.stride(0) >= a.size(1) * a.size(2) && !skip.has_value() && !out.is_same(a)),
            op, ": a must be contiguous, or [batch, limbs, N] with contiguous [limbs, N] blocks (not in place, no "
            "skip); got shape ", a.sizes(), " and strides ", a.strides());
  const int64_t rows = check_residues(strided ? a.select(0, 0) : a, moduli, op) * (strided ? a.size(0) : 1);
  check_out(out, a, a.sizes(), op);
  NttArgs args = ntt_args(a, out, moduli, table, plan, rows, op);
  if (!out.is_same(a)) at::assert_no_partial_overlap(out, a);
  // torch cannot tell whether a strided input overlaps out (it answers "too hard" and lets it pass)
  FHE_CHECK(!strided || !out.is_alias_of(a), op, ": out must not share memory with a strided a");
  if (strided) args.in_batch_stride = a.stride(0);
  args.skip = checked_skip(skip, moduli.size(0), op);
  if (forward) FHE_RUN(ntt_forward, args, a);
  else FHE_RUN(ntt_inverse, args, a);
  return out;
}

Tensor ntt(const Tensor& a, const Tensor& moduli, const Tensor& table, int64_t plan, at::OptionalIntArrayRef skip,
           bool forward) {
  // skipped rows are not written: they are copied from a so that the result is fully defined
  Tensor out = skip.has_value() ? a.clone(at::MemoryFormat::Contiguous) : fresh_like(a);
  return ntt_out(a, moduli, table, plan, skip, out, forward);
}

// The forward NTT of ModDown's conversion with its last step: out[b] = (c[b, p_rows:] - NTT(x[b])) * consts, plus
// sigma_add_galois(add[b]) on the first add.size(0) batches.
Tensor& mod_down_ntt_out(const Tensor& x, const Tensor& c, int64_t p_rows, const Tensor& consts,
                         const Tensor& consts_shoup, const Tensor& moduli, const Tensor& table, int64_t plan,
                         const std::optional<Tensor>& add, int64_t add_galois, Tensor& out) {
  const char* op = "mod_down_ntt";
  const int64_t rows = check_residues(x, moduli, op, "x");
  const int64_t limbs = moduli.size(0), n = x.size(-1);
  FHE_CHECK(x.dim() == 3, op, ": x must be [batch, limbs, N], got ", x.sizes());
  check_mod_down_c(c, x, p_rows, limbs, op);
  check_sized(consts, x, {limbs}, op, "consts");
  check_sized(consts_shoup, x, {limbs}, op, "consts");
  check_out(out, x, x.sizes(), op);
  if (!out.is_same(x)) at::assert_no_partial_overlap(out, x);
  at::assert_no_overlap(out, c);
  check_galois(add_galois, n, op, "add_galois");
  NttArgs args = ntt_args(x, out, moduli, table, plan, rows, op);
  args.epilogue = NttEpilogue{words(c) + p_rows * n, c.size(0) == 1 ? c.size(1) * n : c.stride(0), words(consts),
                              words(consts_shoup)};
  if (add.has_value()) {
    check_words(*add, op, "add");
    check_same_device(*add, x, op, "add");
    FHE_CHECK(add->dim() == 3 && add->size(0) <= x.size(0) && add->size(1) == limbs && add->size(2) == n, op,
              ": add must be [<= ", x.size(0), ", ", limbs, ", ", n, "], got ", add->sizes());
    at::assert_no_overlap(out, *add);  // add is read in the NTT's last store, after out is written
    args.epilogue.add = words(*add);
    args.epilogue.add_batches = add->size(0);
    args.epilogue.add_galois = static_cast<u64>(add_galois);
  }
  FHE_RUN(ntt_forward, args, x);
  return out;
}

Tensor mod_down_ntt(const Tensor& x, const Tensor& c, int64_t p_rows, const Tensor& consts, const Tensor& consts_shoup,
                    const Tensor& moduli, const Tensor& table, int64_t plan, const std::optional<Tensor>& add,
                    int64_t add_galois) {
  Tensor out = fresh_like(x);
  return mod_down_ntt_out(x, c, p_rows, consts, consts_shoup, moduli, table, plan, add, add_galois, out);
}

// A rotation's ModUp input: (INTT(sigma_k(a)), sigma_k(a)) for a contiguous [..., l, N] NTT-domain a (the tuned
// CUDA kernels read sigma_k(a) inside the inverse; store_permuted false: the second result may be left unwritten).
std::tuple<Tensor, Tensor> intt_galois(const Tensor& a, const Tensor& moduli, const Tensor& table, int64_t plan,
                                       int64_t galois, bool store_permuted) {
  const char* op = "intt_galois";
  FHE_CHECK(a.is_contiguous(), op, ": a must be contiguous, got strides ", a.strides());
  const int64_t rows = check_residues(a, moduli, op);
  check_galois(galois, a.size(-1), op, "the Galois element");
  Tensor out = fresh_like(a);
  if (galois == 1) return {ntt_out(a, moduli, table, plan, std::nullopt, out, false), a.clone()};
  Tensor permuted = fresh_like(a);
  NttArgs args = ntt_args(a, out, moduli, table, plan, rows, op);
  args.galois = static_cast<u64>(galois);
  args.permuted = mutable_words(permuted);
  args.store_permuted = store_permuted;
  FHE_RUN(ntt_inverse, args, a);
  return {out, permuted};
}

// HMult's ModUp input: (INTT(a * b), a * b) for contiguous NTT-domain a, b [..., l, N] (the tensor product's d2 of two
// ciphertexts' second components; the tuned CUDA kernels form the products inside the inverse).
std::tuple<Tensor, Tensor> intt_product(const Tensor& a, const Tensor& b, const Tensor& moduli, const Tensor& table,
                                        int64_t plan) {
  const char* op = "intt_product";
  const int64_t rows = check_residues(a, moduli, op, "a");
  check_words(b, op, "b");
  check_same_device(b, a, op, "b");
  FHE_CHECK(b.sizes() == a.sizes(), op, ": b must have a's shape ", a.sizes(), ", got ", b.sizes());
  Tensor out = fresh_like(a), product = fresh_like(a);
  NttArgs args = ntt_args(a, out, moduli, table, plan, rows, op);
  args.times = words(b);
  args.permuted = mutable_words(product);
  FHE_RUN(ntt_inverse, args, a);
  return {out, product};
}

// NTT table [l, 4, N] (pairs: [l, 12, N], for CUDA) for primes with given primitive 2N-th roots psi (rows as in
// common/ntt.h).
Tensor ntt_table(const Tensor& moduli, const Tensor& roots, int64_t log_n, bool pairs) {
  const char* op = "ntt_table";
  check_words(moduli, op, "moduli");
  check_words(roots, op, "roots");
  FHE_CHECK(moduli.device().is_cpu() && roots.device().is_cpu(), op, ": tables are built on the CPU");
  FHE_CHECK(moduli.dim() == 2 && moduli.size(1) == 4, op, ": moduli must be [limbs, 4]");
  FHE_CHECK(roots.dim() == 1 && roots.size(0) == moduli.size(0), op, ": roots must be [limbs]");
  FHE_CHECK(log_n >= kMinLogN && log_n <= kMaxLogN, op, ": log_n must be in [", kMinLogN, ", ", kMaxLogN, "], got ",
            log_n);
  const int log = static_cast<int>(log_n);
  const int64_t n = int64_t{1} << log, limbs = moduli.size(0);
  const int64_t table_rows = pairs ? kNttTableRows : kNttTableRowsCpu;
  Tensor table = at::empty({limbs, table_rows, n}, moduli.options());
  for (int64_t l = 0; l < limbs; ++l) {
    const Modulus& m = moduli_ptr(moduli)[l];
    const u64 psi = words(roots)[l];
    FHE_CHECK(pow_mod(psi, n, m) == m.value - 1, op, ": root ", psi, " is not a primitive 2N-th root mod ", m.value);
    fill_ntt_table(mutable_words(table) + l * table_rows * n, psi, m, log, pairs);
  }
  return table;
}

}  // namespace fhe
