// The glue's shared checks (ops/common.h).
#include "common.h"

#include "../common/ntt.h"

namespace fhe {

void check_words(const Tensor& t, const char* op, const char* name) {
  FHE_CHECK(t.scalar_type() == at::kLong, op, ": ", name, " must be int64, got ", t.scalar_type());
  FHE_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous");
}

void check_same_device(const Tensor& t, const Tensor& ref, const char* op, const char* name) {
  FHE_CHECK(t.device() == ref.device(), op, ": ", name, " is on ", t.device(), " but the input is on ", ref.device());
}

void check_sized(const Tensor& t, const Tensor& ref, at::IntArrayRef sizes, const char* op, const char* name) {
  check_words(t, op, name);
  check_same_device(t, ref, op, name);
  FHE_CHECK(t.sizes() == sizes, op, ": ", name, " must be ", sizes, ", got ", t.sizes());
}

int64_t check_residues(const Tensor& a, const Tensor& moduli, const char* op, const char* name) {
  check_words(a, op, name);
  check_words(moduli, op, "moduli");
  check_same_device(moduli, a, op, "moduli");
  FHE_CHECK(moduli.dim() == 2 && moduli.size(1) == 4, op, ": moduli must be [limbs, 4], got ", moduli.sizes());
  FHE_CHECK(a.dim() >= 2, op, ": ", name, " must be [..., limbs, N], got ", a.sizes());
  FHE_CHECK(a.size(-2) == moduli.size(0), op, ": ", name, " has ", a.size(-2), " limbs but moduli has ",
            moduli.size(0));
  FHE_CHECK(a.size(-1) > 0, op, ": ", name, " has N = 0");
  return a.numel() / a.size(-1);
}

void check_moduli(const Tensor& moduli, const Tensor& ref, const char* op, const char* name) {
  check_words(moduli, op, name);
  check_same_device(moduli, ref, op, name);
  FHE_CHECK(moduli.dim() == 2 && moduli.size(1) == 4 && moduli.size(0) > 0, op, ": ", name, " must be [rows, 4], got ",
            moduli.sizes());
}

int log2_exact(int64_t n, const char* op) {
  FHE_CHECK(n > 0 && (n & (n - 1)) == 0, op, ": N must be a power of two, got ", n);
  int log_n = 0;
  while ((int64_t{1} << log_n) < n) ++log_n;
  FHE_CHECK(log_n >= kMinLogN && log_n <= kMaxLogN, op, ": N must be in [2^", kMinLogN, ", 2^", kMaxLogN, "], got 2^",
            log_n);
  return log_n;
}

void check_out(const Tensor& out, const Tensor& like, at::IntArrayRef sizes, const char* op) {
  check_words(out, op, "out");
  check_same_device(out, like, op, "out");
  FHE_CHECK(out.sizes() == sizes, op, ": out must have shape ", sizes, ", got ", out.sizes());
}

void check_blocks(const Tensor& out, const Tensor& ref, at::IntArrayRef sizes, const char* op, const char* name) {
  const int64_t rows = sizes[1], n = sizes[2];
  FHE_CHECK(out.scalar_type() == at::kLong && out.sizes() == sizes && out.stride(2) == 1 && out.stride(1) == n &&
                (sizes[0] == 1 || out.stride(0) >= rows * n),
            op, ": ", name, " must be ", sizes, " with contiguous [", rows, ", ", n, "] blocks, got shape ",
            out.sizes(), " and strides ", out.strides());
  check_same_device(out, ref, op, name);
}

void check_galois(int64_t galois, int64_t n, const char* op, const char* what) {
  FHE_CHECK(galois > 0 && galois < 2 * n && (galois & 1) == 1, op, ": ", what,
            " must be an odd Galois element in [1, 2N), got ", galois);
}

KernelPlan checked_plan(int64_t flags, const char* op) {
  FHE_CHECK(flags >= 0 && (flags & ~kPlanFlags) == 0, op, ": plan must be KernelPlan.kernel_flags (0 to ", kPlanFlags,
            "), got ", flags);
  return kernel_plan(flags);
}

NttSkip checked_skip(at::OptionalIntArrayRef skip, int64_t limbs, const char* op) {
  if (!skip.has_value()) return NttSkip{};
  const auto s = *skip;
  FHE_CHECK(s.size() == 3 && s[0] >= 0 && s[1] >= 0 && s[2] >= 0 && s[0] <= limbs && s[1] <= limbs && s[2] <= limbs,
            op, ": skip must be (begin, stride, length), each in [0, ", limbs, "], got ", s);
  return NttSkip{static_cast<int>(s[0]), static_cast<int>(s[1]), static_cast<int>(s[2])};
}

int check_ntt_table(const Tensor& table, const Tensor& a, const Tensor& moduli, const char* op) {
  check_words(table, op, "table");
  check_same_device(table, a, op, "table");
  const bool cpu = table.device().is_cpu();
  const int64_t r = table.dim() == 3 ? table.size(1) : -1;
  FHE_CHECK(table.dim() == 3 && table.size(0) == moduli.size(0) && table.size(2) == a.size(-1) &&
                (r == kNttTableRows || (cpu && r == kNttTableRowsCpu)),
            op, ": table must be [limbs, ", cpu ? "4 or 12" : "12", ", N] = [", moduli.size(0), ", ",
            cpu ? "4 or 12" : "12", ", ", a.size(-1), "], got ", table.sizes(),
            cpu ? "" : " (a CUDA table holds the (w, w') pair rows: ntt_table(..., pairs=True))");
  return static_cast<int>(r);
}

}  // namespace fhe
