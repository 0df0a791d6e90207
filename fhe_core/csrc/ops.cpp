// torch.ops.fhe_core: operator schemas, argument validation and backend registration.
//
// Every op is implemented once here as a template over the backend; TORCH_LIBRARY_IMPL registers
// the CPU instance and (in CUDA builds) the CUDA instance, and PyTorch's dispatcher picks one
// from the tensors' device. Caller errors raise through FHE_CHECK (check.h) with the op's name.
#include <ATen/MemoryOverlap.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <Python.h>
#include <torch/library.h>

#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "check.h"
#include "common/ntt.h"
#include "kernels.h"

namespace fhe {

namespace {

using at::Tensor;

constexpr int kMinLogN = 10;
constexpr int kMaxLogN = 17;

// ---- validation ------------------------------------------------------------------------------

void check_words(const Tensor& t, const char* op, const char* name) {
  FHE_CHECK(t.scalar_type() == at::kLong, op, ": ", name, " must be int64, got ", t.scalar_type());
  FHE_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous");
}

void check_same_device(const Tensor& t, const Tensor& ref, const char* op, const char* name) {
  FHE_CHECK(t.device() == ref.device(), op, ": ", name, " is on ", t.device(), " but the input is on ",
              ref.device());
}

// A residue tensor [..., limbs, N] with limbs = moduli.size(0); returns rows = numel / N.
int64_t check_residues(const Tensor& a, const Tensor& moduli, const char* op, const char* name = "a") {
  check_words(a, op, name);
  check_words(moduli, op, "moduli");
  check_same_device(moduli, a, op, "moduli");
  FHE_CHECK(moduli.dim() == 2 && moduli.size(1) == 4, op, ": moduli must be [limbs, 4], got ",
              moduli.sizes());
  FHE_CHECK(a.dim() >= 2, op, ": ", name, " must be [..., limbs, N], got ", a.sizes());
  FHE_CHECK(a.size(-2) == moduli.size(0), op, ": ", name, " has ", a.size(-2), " limbs but moduli has ",
              moduli.size(0));
  FHE_CHECK(a.size(-1) > 0, op, ": ", name, " has N = 0");
  return a.numel() / a.size(-1);
}

int log2_exact(int64_t n, const char* op) {
  FHE_CHECK(n > 0 && (n & (n - 1)) == 0, op, ": N must be a power of two, got ", n);
  int log_n = 0;
  while ((int64_t{1} << log_n) < n) ++log_n;
  FHE_CHECK(log_n >= kMinLogN && log_n <= kMaxLogN, op, ": N must be in [2^", kMinLogN, ", 2^", kMaxLogN,
              "], got 2^", log_n);
  return log_n;
}

void check_out(const Tensor& out, const Tensor& like, at::IntArrayRef sizes, const char* op) {
  check_words(out, op, "out");
  check_same_device(out, like, op, "out");
  FHE_CHECK(out.sizes() == sizes, op, ": out must have shape ", sizes, ", got ", out.sizes());
}

const Modulus* moduli_ptr(const Tensor& moduli) {
  return reinterpret_cast<const Modulus*>(moduli.data_ptr<int64_t>());
}
const u64* words(const Tensor& t) { return reinterpret_cast<const u64*>(t.data_ptr<int64_t>()); }
u64* mutable_words(Tensor& t) { return reinterpret_cast<u64*>(t.data_ptr<int64_t>()); }

// The kernel plan's flag bits (plan.h) as the launchers read them.
KernelPlan checked_plan(int64_t flags, const char* op) {
  FHE_CHECK(flags >= 0 && (flags & ~kPlanFlags) == 0, op, ": plan must be KernelPlan.kernel_flags (0 to ", kPlanFlags,
            "), got ", flags);
  return kernel_plan(flags);
}

ChaChaKey chacha_key(at::IntArrayRef key, const char* op) {
  FHE_CHECK(key.size() == 8, op, ": key must be 8 words of 32 bits, got ", key.size());
  ChaChaKey k{};
  for (int i = 0; i < 8; ++i) {
    FHE_CHECK(key[i] >= 0 && key[i] <= 0xffffffffLL, op, ": key word ", i, " is not a 32-bit value");
    k.w[i] = static_cast<u32>(key[i]);
  }
  return k;
}

// ---- backends --------------------------------------------------------------------------------

// Rows with a skip (NttSkip) or a strided input: the CPU kernels transform whole contiguous row
// ranges, so each row that is not skipped becomes a one-row transform, in parallel over rows.
// ModDown's epilogue (NttEpilogue) on the CPU: the plain transform, then (c - x) * consts per batch.
void cpu_ntt_epilogue(const NttArgs& a) {
  const int64_t n = int64_t{1} << a.log_n;
  const NttEpilogue& e = a.epilogue;
  for (int64_t b = 0; b < a.rows / a.limbs; ++b) {
    u64* x = a.out + b * a.limbs * n;
    cpu::elementwise(ElementwiseArgs{ElementwiseOp::kSubMulConst, e.sub_from + b * e.batch_stride, x, nullptr,
                                     e.consts, e.consts_shoup, x, a.moduli, a.limbs, a.limbs, a.limbs, n});
    if (b < e.add_batches)
      cpu::elementwise(ElementwiseArgs{ElementwiseOp::kAdd, x, e.add + b * a.limbs * n, nullptr, nullptr, nullptr, x,
                                       a.moduli, a.limbs, a.limbs, a.limbs, n});
  }
}

template <void (*kTransform)(const NttArgs&)>
void cpu_ntt(const NttArgs& a) {
  if (a.epilogue.sub_from != nullptr) {
    NttArgs plain = a;
    plain.epilogue = NttEpilogue{};
    cpu_ntt<kTransform>(plain);
    return cpu_ntt_epilogue(a);
  }
  if (a.skip.length == 0 && a.in_batch_stride == 0) return kTransform(a);
  const int64_t n = int64_t{1} << a.log_n;
  at::parallel_for(0, a.rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      if (ntt_row_skipped(a.skip, row, a.limbs)) continue;
      const int limb = static_cast<int>(row % a.limbs);
      NttArgs one{a.in + ntt_in_offset(a, row), a.out + row * n, a.moduli + limb,
                  a.table + limb * a.table_rows * n, 1, 1, a.log_n};
      one.table_rows = a.table_rows;
      kTransform(one);
    }
  });
}

// The tensor product on the CPU: the element-wise kernels, d1 as a1 b0 then a0 b1 + d1 (the same
// canonical residues as the CUDA kernel's single reduction of the sum).
void cpu_tensor_product(const TensorProductArgs& t) {
  const int64_t plane = static_cast<int64_t>(t.limbs) * t.n;
  const u64 *a0 = t.a, *a1 = t.a + plane, *b0 = t.b, *b1 = t.b + plane;
  u64 *d0 = t.out, *d1 = t.out + plane, *d2 = t.out + 2 * plane;
  auto run = [&](ElementwiseOp op, const u64* x, const u64* y, const u64* z, u64* out) {
    cpu::elementwise(ElementwiseArgs{op, x, y, z, nullptr, nullptr, out, t.moduli, t.limbs, t.limbs, t.limbs, t.n});
  };
  run(ElementwiseOp::kMul, a0, b0, nullptr, d0);
  run(ElementwiseOp::kMul, a1, b1, nullptr, d2);
  run(ElementwiseOp::kMul, a1, b0, nullptr, d1);
  run(ElementwiseOp::kMulAdd, a0, b1, d1, d1);
}

struct CpuBackend {
  static void ntt_forward(const NttArgs& a, const Tensor&) { cpu_ntt<cpu::ntt_forward>(a); }
  static void ntt_inverse(const NttArgs& a, const Tensor&) { cpu_ntt<cpu::ntt_inverse>(a); }
  static bool ntt_fuses_products(const NttArgs&) { return false; }  // (NttArgs::times: CUDA only)
  static void elementwise(const ElementwiseArgs& a, const Tensor&) { cpu::elementwise(a); }
  static void tensor_product(const TensorProductArgs& a, const Tensor&) { cpu_tensor_product(a); }
  static void conv(const ConvArgs& a, const Tensor&) {
    cpu::conv(a);
    if (a.own == nullptr || !a.own_copy) return;
    for (int j = 0; j < a.dnum; ++j)  // ModUp's own rows: copied over the converted ones
      for (int r = 0; r < a.rows; ++r) {
        const int k = conv_own_index(a, j, r);
        if (k >= 0) std::memcpy(a.out + (static_cast<int64_t>(j) * a.rows + r) * a.n,
                                a.own + (static_cast<int64_t>(j) * a.alpha + k) * a.n, a.n * sizeof(u64));
      }
  }
  static void ks_inner_product(const KsInnerProductArgs& a, const Tensor&) { cpu::ks_inner_product(a); }
  static void ntt_inner_product(const NttInnerProductArgs& a, const Tensor&) {  // the two ops in turn
    cpu_ntt<cpu::ntt_forward>(a.ntt);
    cpu::ks_inner_product(a.ip);
  }
  static bool ntt_inner_product_fuses(const NttInnerProductArgs&) { return false; }
  static bool ntt_inner_product_takes_tensor(const NttInnerProductArgs&) { return false; }
  static void center_lift(const CenterLiftArgs& a, const Tensor&) { cpu::center_lift(a); }
  static void automorphism_ntt(const AutomorphismArgs& a, const Tensor&) { cpu::automorphism_ntt(a); }
  static void automorphism_coeff(const AutomorphismArgs& a, const Tensor&) { cpu::automorphism_coeff(a); }
  static void sample(const SampleArgs& a, const Tensor&) { cpu::sample(a); }
  static void sample_fixed_weight(const FixedWeightArgs& a, const Tensor&) { cpu::sample_fixed_weight(a); }
  static void ks_inner_product_fused(const KsInnerProductFusedArgs& a, const Tensor&) {
    cpu::ks_inner_product_fused(a);
  }
  static void linear_combination(const LinearCombinationArgs& a, const Tensor&) { cpu::linear_combination(a); }
  static void giant_products(const GiantProductsArgs& a, const Tensor&) { cpu::giant_products(a); }
  static void ks_inner_product_pair(const KsInnerProductPairArgs& a, const Tensor&) { cpu::ks_inner_product_pair(a); }
  static void ks_inner_product_babies(const KsInnerProductBabiesArgs& a, const Tensor&) {
    cpu::ks_inner_product_babies(a);
  }
};

#ifdef FHE_CORE_WITH_CUDA
// The current PyTorch stream of the tensor's device, through c10's device-generic interface, so
// this file needs no CUDA headers and links without torch's CUDA libraries.
cuda::Stream current_stream(const Tensor& t) {
  const c10::Stream s = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(t.device());
  return cuda::Stream{s.native_handle(), static_cast<int>(t.device().index())};
}

struct CudaBackend {
  static void ntt_forward(const NttArgs& a, const Tensor& t) { cuda::ntt_forward(a, current_stream(t)); }
  static void ntt_inverse(const NttArgs& a, const Tensor& t) { cuda::ntt_inverse(a, current_stream(t)); }
  static bool ntt_fuses_products(const NttArgs& a) { return cuda::ntt_fuses_products(a); }
  static void elementwise(const ElementwiseArgs& a, const Tensor& t) { cuda::elementwise(a, current_stream(t)); }
  static void tensor_product(const TensorProductArgs& a, const Tensor& t) {
    cuda::tensor_product(a, current_stream(t));
  }
  static void conv(const ConvArgs& a, const Tensor& t) { cuda::conv(a, current_stream(t)); }
  static void ks_inner_product(const KsInnerProductArgs& a, const Tensor& t) {
    cuda::ks_inner_product(a, current_stream(t));
  }
  static void ntt_inner_product(const NttInnerProductArgs& a, const Tensor& t) {
    cuda::ntt_inner_product(a, current_stream(t));
  }
  static bool ntt_inner_product_fuses(const NttInnerProductArgs& a) { return cuda::ntt_inner_product_fuses(a); }
  static bool ntt_inner_product_takes_tensor(const NttInnerProductArgs& a) {
    return cuda::ntt_inner_product_takes_tensor(a);
  }
  static void center_lift(const CenterLiftArgs& a, const Tensor& t) { cuda::center_lift(a, current_stream(t)); }
  static void automorphism_ntt(const AutomorphismArgs& a, const Tensor& t) {
    cuda::automorphism_ntt(a, current_stream(t));
  }
  static void automorphism_coeff(const AutomorphismArgs& a, const Tensor& t) {
    cuda::automorphism_coeff(a, current_stream(t));
  }
  static void sample(const SampleArgs& a, const Tensor& t) { cuda::sample(a, current_stream(t)); }
  static void sample_fixed_weight(const FixedWeightArgs& a, const Tensor& t) {
    cuda::sample_fixed_weight(a, current_stream(t));
  }
  static void ks_inner_product_fused(const KsInnerProductFusedArgs& a, const Tensor& t) {
    cuda::ks_inner_product_fused(a, current_stream(t));
  }
  static void linear_combination(const LinearCombinationArgs& a, const Tensor& t) {
    cuda::linear_combination(a, current_stream(t));
  }
  static void giant_products(const GiantProductsArgs& a, const Tensor& t) {
    cuda::giant_products(a, current_stream(t));
  }
  static void ks_inner_product_pair(const KsInnerProductPairArgs& a, const Tensor& t) {
    cuda::ks_inner_product_pair(a, current_stream(t));
  }
  static void ks_inner_product_babies(const KsInnerProductBabiesArgs& a, const Tensor& t) {
    cuda::ks_inner_product_babies(a, current_stream(t));
  }
};
#endif

// ---- NTT -------------------------------------------------------------------------------------

// The table's rows per limb: 12 on CUDA (the kernels read the (w, w') pairs and the FP64 pairs), 4 or 12 on the
// CPU (whose kernels read rows 0-3 only; RNSBasis builds the pair rows for CUDA tables only).
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

template <class B, bool kForward>
Tensor& ntt_out(const Tensor& a, const Tensor& moduli, const Tensor& table, int64_t plan, at::OptionalIntArrayRef skip,
                Tensor& out) {
  const char* op = kForward ? "ntt" : "intt";
  // A strided batch of contiguous [limbs, N] blocks is read in place (ModDown's P rows of each component).
  const bool strided = !a.is_contiguous();
  FHE_CHECK(!strided || (a.dim() == 3 && a.stride(2) == 1 && a.stride(1) == a.size(2) &&
                         a.stride(0) >= a.size(1) * a.size(2) && !skip.has_value() && !out.is_same(a)),
            op, ": a must be contiguous, or [batch, limbs, N] with contiguous [limbs, N] blocks (not in place, no "
            "skip); got shape ", a.sizes(), " and strides ", a.strides());
  const int64_t rows = check_residues(strided ? a.select(0, 0) : a, moduli, op) * (strided ? a.size(0) : 1);
  const int log_n = log2_exact(a.size(-1), op);
  const int table_rows = check_ntt_table(table, a, moduli, op);
  check_out(out, a, a.sizes(), op);
  if (!out.is_same(a)) at::assert_no_partial_overlap(out, a);
  // torch cannot tell whether a strided input overlaps out (it answers "too hard" and lets it pass)
  FHE_CHECK(!strided || !out.is_alias_of(a), op, ": out must not share memory with a strided a");
  NttArgs args{words(a), mutable_words(out), moduli_ptr(moduli), words(table), rows,
               static_cast<int>(moduli.size(0)), log_n};
  args.table_rows = table_rows;
  args.plan = checked_plan(plan, op);
  if (strided) args.in_batch_stride = a.stride(0);
  if (skip.has_value()) {
    const auto s = *skip;
    const int64_t limbs = moduli.size(0);
    FHE_CHECK(s.size() == 3 && s[0] >= 0 && s[1] >= 0 && s[2] >= 0 && s[0] <= limbs && s[1] <= limbs &&
                  s[2] <= limbs,
              op, ": skip must be (begin, stride, length), each in [0, ", limbs, "], got ", s);
    args.skip = NttSkip{static_cast<int>(s[0]), static_cast<int>(s[1]), static_cast<int>(s[2])};
  }
  if (kForward) B::ntt_forward(args, a);
  else B::ntt_inverse(args, a);
  return out;
}

// The forward NTT of ModDown's conversion with its last step: out[b] = (c[b, p_rows:] - NTT(x[b])) * consts.
void check_galois(int64_t galois, int64_t n, const char* op, const char* what) {
  FHE_CHECK(galois > 0 && galois < 2 * n && (galois & 1) == 1, op, ": ", what,
            " must be an odd Galois element in [1, 2N), got ", galois);
}

template <class B>
constexpr bool kIsCpu = std::is_same_v<B, CpuBackend>;

template <class B, bool kNtt>
Tensor& automorphism_out(const Tensor& a, const Tensor& moduli, int64_t galois, Tensor& out);

template <class B>
Tensor& mod_down_ntt_out(const Tensor& x, const Tensor& c, int64_t p_rows, const Tensor& consts,
                         const Tensor& consts_shoup, const Tensor& moduli, const Tensor& table, int64_t plan,
                         const std::optional<Tensor>& add, int64_t add_galois, Tensor& out) {
  const char* op = "mod_down_ntt";
  const int64_t rows = check_residues(x, moduli, op, "x");
  const int log_n = log2_exact(x.size(-1), op);
  const int table_rows = check_ntt_table(table, x, moduli, op);
  const int64_t limbs = moduli.size(0), n = x.size(-1);
  FHE_CHECK(x.dim() == 3, op, ": x must be [batch, limbs, N], got ", x.sizes());
  // c may be a strided batch of contiguous [p_rows + limbs, N] blocks (rescale: the first l rows of each component)
  FHE_CHECK(c.scalar_type() == at::kLong, op, ": c must be int64, got ", c.scalar_type());
  check_same_device(c, x, op, "c");
  FHE_CHECK(p_rows >= 0 && c.dim() == 3 && c.size(0) == x.size(0) && c.size(1) - limbs == p_rows && c.size(2) == n,
            op, ": c must be [", x.size(0), ", ", p_rows, " + ", limbs, ", ", n, "], got ", c.sizes());
  FHE_CHECK(c.stride(2) == 1 && c.stride(1) == n && (c.size(0) == 1 || c.stride(0) >= c.size(1) * n), op,
            ": c must be contiguous or a batch of contiguous [rows, N] blocks, got strides ", c.strides());
  for (const Tensor* t : {&consts, &consts_shoup}) {
    check_words(*t, op, "consts");
    check_same_device(*t, x, op, "consts");
    FHE_CHECK(t->dim() == 1 && t->size(0) == limbs, op, ": per-limb constants must be [", limbs, "], got ",
              t->sizes());
  }
  check_out(out, x, x.sizes(), op);
  if (!out.is_same(x)) at::assert_no_partial_overlap(out, x);
  at::assert_no_overlap(out, c);
  NttArgs args{words(x), mutable_words(out), moduli_ptr(moduli), words(table), rows, static_cast<int>(limbs), log_n};
  args.table_rows = table_rows;
  args.plan = checked_plan(plan, op);
  args.epilogue = NttEpilogue{words(c) + p_rows * n, c.size(0) == 1 ? c.size(1) * n : c.stride(0), words(consts),
                              words(consts_shoup)};
  if (add.has_value()) {  // added to the first add.size(0) batches
    check_words(*add, op, "add");
    check_same_device(*add, x, op, "add");
    FHE_CHECK(add->dim() == 3 && add->size(0) <= x.size(0) && add->size(1) == limbs && add->size(2) == n, op,
              ": add must be [<= ", x.size(0), ", ", limbs, ", ", n, "], got ", add->sizes());
    at::assert_no_overlap(out, *add);  // add is read in the NTT's last store, after out is written
    check_galois(add_galois, n, op, "add_galois");
    FHE_CHECK(add_galois == 1 || add->is_contiguous(), op, ": add must be contiguous with add_galois");
    if (add_galois != 1 && kIsCpu<B>) {  // the CPU: sigma_k(add) first (what the CUDA store reads in place)
      Tensor permuted = at::empty_like(*add, at::MemoryFormat::Contiguous);
      automorphism_out<B, true>(*add, moduli, add_galois, permuted);
      args.epilogue.add = words(permuted);
      args.epilogue.add_batches = add->size(0);
      B::ntt_forward(args, x);
      return out;
    }
    args.epilogue.add = words(*add);
    args.epilogue.add_batches = add->size(0);
    args.epilogue.add_galois = static_cast<u64>(add_galois);
  } else {
    check_galois(add_galois, n, op, "add_galois");
  }
  B::ntt_forward(args, x);
  return out;
}

// A rotation's ModUp input: (INTT(sigma_k(a)), sigma_k(a)) for a contiguous [..., l, N] NTT-domain a. On
// CUDA (the tuned kernels) the inverse NTT reads sigma_k(a) straight from a and stores the permuted rows on
// the way; elsewhere it is automorphism_ntt, then intt.
template <class B>
std::tuple<Tensor, Tensor> intt_galois(const Tensor& a, const Tensor& moduli, const Tensor& table, int64_t plan,
                                       int64_t galois, bool store_permuted) {
  const char* op = "intt_galois";
  FHE_CHECK(a.is_contiguous(), op, ": a must be contiguous, got strides ", a.strides());
  const int64_t rows = check_residues(a, moduli, op);
  const int log_n = log2_exact(a.size(-1), op);
  const int table_rows = check_ntt_table(table, a, moduli, op);
  check_galois(galois, a.size(-1), op, "the Galois element");
  Tensor out = at::empty_like(a, at::MemoryFormat::Contiguous);
  Tensor permuted = at::empty_like(a, at::MemoryFormat::Contiguous);
  if (kIsCpu<B> || galois == 1) {
    automorphism_out<B, true>(a, moduli, galois, permuted);
    ntt_out<B, false>(permuted, moduli, table, plan, std::nullopt, out);
    return {out, permuted};
  }
  NttArgs args{words(a), mutable_words(out), moduli_ptr(moduli), words(table), rows,
               static_cast<int>(moduli.size(0)), log_n};
  args.table_rows = table_rows;
  args.plan = checked_plan(plan, op);
  args.galois = static_cast<u64>(galois);
  args.permuted = mutable_words(permuted);
  args.store_permuted = store_permuted;
  B::ntt_inverse(args, a);
  return {out, permuted};
}

template <class B>
Tensor mod_down_ntt(const Tensor& x, const Tensor& c, int64_t p_rows, const Tensor& consts,
                    const Tensor& consts_shoup, const Tensor& moduli, const Tensor& table, int64_t plan,
                    const std::optional<Tensor>& add, int64_t add_galois) {
  Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
  return mod_down_ntt_out<B>(x, c, p_rows, consts, consts_shoup, moduli, table, plan, add, add_galois, out);
}

template <class B, bool kForward>
Tensor ntt(const Tensor& a, const Tensor& moduli, const Tensor& table, int64_t plan, at::OptionalIntArrayRef skip) {
  // skipped rows are not written: they are copied from a so that the result is fully defined
  Tensor out = skip.has_value() ? a.clone(at::MemoryFormat::Contiguous) : at::empty_like(a, at::MemoryFormat::Contiguous);
  return ntt_out<B, kForward>(a, moduli, table, plan, skip, out);
}

// ---- tensor product of two degree-1 ciphertexts ----------------------------------------------

template <class B>
Tensor& tensor_product_out(const Tensor& a, const Tensor& b, const Tensor& moduli, Tensor& out) {
  const char* op = "tensor_product";
  check_residues(a, moduli, op, "a");
  check_words(b, op, "b");
  check_same_device(b, a, op, "b");
  FHE_CHECK(a.dim() == 3 && a.size(0) == 2 && b.sizes() == a.sizes(), op,
            ": a and b must both be [2, limbs, N], got ", a.sizes(), " and ", b.sizes());
  const std::vector<int64_t> sizes{3, a.size(1), a.size(2)};
  check_out(out, a, sizes, op);
  at::assert_no_overlap(out, a);
  at::assert_no_overlap(out, b);
  const TensorProductArgs args{words(a), words(b), mutable_words(out), moduli_ptr(moduli),
                               static_cast<int>(a.size(1)), a.size(2)};
  B::tensor_product(args, a);
  return out;
}

template <class B>
Tensor tensor_product(const Tensor& a, const Tensor& b, const Tensor& moduli) {
  check_residues(a, moduli, "tensor_product", "a");  // before a.size(-2): a 1-D a gets the op's message
  Tensor out = at::empty({3, a.size(-2), a.size(-1)}, a.options());
  return tensor_product_out<B>(a, b, moduli, out);
}

// ---- element-wise ----------------------------------------------------------------------------

template <class B>
void run_elementwise(ElementwiseOp kind, const char* op, const Tensor& a, const Tensor* b, const Tensor* c,
                     const Tensor* consts, const Tensor* consts_shoup, const Tensor& moduli, Tensor& out) {
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
  for (const Tensor* t : {consts, consts_shoup}) {
    if (t == nullptr) continue;
    check_words(*t, op, "consts");
    check_same_device(*t, a, op, "consts");
    FHE_CHECK(t->dim() == 1 && t->size(0) == limbs, op, ": per-limb constants must be [", limbs, "], got ",
                t->sizes());
  }
  check_out(out, a, a.sizes(), op);
  const ElementwiseArgs args{kind,
                             words(a),
                             b ? words(*b) : nullptr,
                             c ? words(*c) : nullptr,
                             consts ? words(*consts) : nullptr,
                             consts_shoup ? words(*consts_shoup) : nullptr,
                             mutable_words(out),
                             moduli_ptr(moduli),
                             rows,
                             b_rows,
                             static_cast<int>(limbs),
                             a.size(-1)};
  B::elementwise(args, a);
}

template <class B, ElementwiseOp kKind>
Tensor& binary_out(const Tensor& a, const Tensor& b, const Tensor& moduli, Tensor& out) {
  const char* names[] = {"add", "sub", "neg", "mul", "mul_const", "mul_add", "sub_mul_const"};
  run_elementwise<B>(kKind, names[static_cast<int>(kKind)], a, &b, nullptr, nullptr, nullptr, moduli, out);
  return out;
}
template <class B, ElementwiseOp kKind>
Tensor binary(const Tensor& a, const Tensor& b, const Tensor& moduli) {
  Tensor out = at::empty_like(a, at::MemoryFormat::Contiguous);
  return binary_out<B, kKind>(a, b, moduli, out);
}

// HMult's ModUp input: (INTT(a * b), a * b) for contiguous NTT-domain a, b [..., l, N] (the tensor product's d2 of
// two ciphertexts' second components). On CUDA (the tuned kernels, 16-byte aligned) the inverse NTT reads a and b,
// transforms their products and stores them on the way; elsewhere mul, then intt.
template <class B>
std::tuple<Tensor, Tensor> intt_product(const Tensor& a, const Tensor& b, const Tensor& moduli, const Tensor& table,
                                        int64_t plan) {
  const char* op = "intt_product";
  const int64_t rows = check_residues(a, moduli, op, "a");
  check_words(b, op, "b");
  check_same_device(b, a, op, "b");
  FHE_CHECK(b.sizes() == a.sizes(), op, ": b must have a's shape ", a.sizes(), ", got ", b.sizes());
  const int log_n = log2_exact(a.size(-1), op);
  const int table_rows = check_ntt_table(table, a, moduli, op);
  Tensor out = at::empty_like(a, at::MemoryFormat::Contiguous);
  Tensor product = at::empty_like(a, at::MemoryFormat::Contiguous);
  NttArgs args{words(a), mutable_words(out), moduli_ptr(moduli), words(table), rows,
               static_cast<int>(moduli.size(0)), log_n};
  args.table_rows = table_rows;
  args.plan = checked_plan(plan, op);
  args.times = words(b);
  args.permuted = mutable_words(product);
  if (B::ntt_fuses_products(args)) {
    B::ntt_inverse(args, a);
  } else {
    binary_out<B, ElementwiseOp::kMul>(a, b, moduli, product);
    ntt_out<B, false>(product, moduli, table, plan, std::nullopt, out);
  }
  return {out, product};
}

template <class B>
Tensor& neg_out(const Tensor& a, const Tensor& moduli, Tensor& out) {
  run_elementwise<B>(ElementwiseOp::kNeg, "neg", a, nullptr, nullptr, nullptr, nullptr, moduli, out);
  return out;
}
template <class B>
Tensor neg(const Tensor& a, const Tensor& moduli) {
  Tensor out = at::empty_like(a, at::MemoryFormat::Contiguous);
  return neg_out<B>(a, moduli, out);
}

template <class B>
Tensor& mul_const_out(const Tensor& a, const Tensor& consts, const Tensor& consts_shoup, const Tensor& moduli,
                      Tensor& out) {
  run_elementwise<B>(ElementwiseOp::kMulConst, "mul_const", a, nullptr, nullptr, &consts, &consts_shoup, moduli,
                     out);
  return out;
}
template <class B>
Tensor mul_const(const Tensor& a, const Tensor& consts, const Tensor& consts_shoup, const Tensor& moduli) {
  Tensor out = at::empty_like(a, at::MemoryFormat::Contiguous);
  return mul_const_out<B>(a, consts, consts_shoup, moduli, out);
}

template <class B>
Tensor& sub_mul_const_out(const Tensor& a, const Tensor& b, const Tensor& consts, const Tensor& consts_shoup,
                          const Tensor& moduli, Tensor& out) {
  run_elementwise<B>(ElementwiseOp::kSubMulConst, "sub_mul_const", a, &b, nullptr, &consts, &consts_shoup, moduli,
                     out);
  return out;
}
template <class B>
Tensor sub_mul_const(const Tensor& a, const Tensor& b, const Tensor& consts, const Tensor& consts_shoup,
                     const Tensor& moduli) {
  Tensor out = at::empty_like(a, at::MemoryFormat::Contiguous);
  return sub_mul_const_out<B>(a, b, consts, consts_shoup, moduli, out);
}

template <class B>
Tensor& mul_add_out(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& moduli, Tensor& out) {
  run_elementwise<B>(ElementwiseOp::kMulAdd, "mul_add", a, &b, &c, nullptr, nullptr, moduli, out);
  return out;
}
template <class B>
Tensor mul_add(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& moduli) {
  Tensor out = at::empty_like(a, at::MemoryFormat::Contiguous);
  return mul_add_out<B>(a, b, c, moduli, out);
}

// ---- fast basis conversion -------------------------------------------------------------------

constexpr int64_t kMaxBconvInputLimbs = 64;  // 64 products of < 2^122 fit a 128-bit accumulator
constexpr int64_t kMmaMaxSlots = 16;         // the tensor-core Conv's slots (input limbs, + 1 if exact)

int64_t mma_k_tiles(int64_t slots) { return (slots + 3) / 4; }

// The optional precomputed B fragments of a Conv call (see conv_mma_fragments): int32
// [dnum, rows, KT, 64] on the input's device, or nothing when there are none.
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

// The tensor-core Conv's B fragments (cuda/rns.cu), computed once per set of constants instead of by
// every block: for digit j, output row r and slot k < 4 KT (KT = ceil(slots / 4), slots = alpha, + 1
// with neg_q_mod_p), the constant C (qhat_mod_p[j][k][r]; (-Q) mod p_r at slot alpha; else 0) and its
// byte shifts D_a = 2^(8a) C mod p_r (a < 8); the word for lane 4 b + 2 (k & 1) + h, register (k & 3) / 2
// of K tile k / 4 holds byte b of D_4h, ..., D_4h+3. qhat_mod_p: [dnum, alpha, rows] (ModUp) or
// [alpha, rows] (one digit, bconv). Returns int32 [dnum, rows, KT, 64] on the CPU.
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
  FHE_CHECK(slots >= 1 && slots <= kMmaMaxSlots, op, ": the tensor cores take 1 to ", kMmaMaxSlots,
            " slots, got ", slots);
  Tensor out = at::zeros({dnum, rows, kt_count, 64}, qhat_mod_p.options().dtype(at::kInt));
  u32* words_out = reinterpret_cast<u32*>(out.data_ptr<int32_t>());
  const u64* consts = words(qhat_mod_p);
  const Modulus* moduli = moduli_ptr(dst_moduli);
  for (int64_t j = 0; j < dnum; ++j)
    for (int64_t r = 0; r < rows; ++r) {
      const u64 q = moduli[r].value;
      u32* row = words_out + (j * rows + r) * kt_count * 64;
      for (int64_t k = 0; k < 4 * kt_count; ++k) {
        const u64 c = k < alpha ? consts[(j * alpha + k) * rows + r] : (neg != nullptr && k == alpha ? neg[r] : 0);
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
  return out;
}

std::vector<int64_t> bconv_out_sizes(const Tensor& a, const Tensor& dst_moduli) {
  std::vector<int64_t> sizes(a.sizes().begin(), a.sizes().end());
  sizes[sizes.size() - 2] = dst_moduli.size(0);
  return sizes;
}

template <class B>
Tensor& bconv_out(const Tensor& a, const Tensor& src_moduli, const Tensor& dst_moduli, const Tensor& qhat_inv,
                  const Tensor& qhat_inv_shoup, const Tensor& qhat_mod_p, int64_t plan,
                  const std::optional<Tensor>& neg_q_mod_p, bool lazy, const std::optional<Tensor>& fragments,
                  Tensor& out) {
  const char* op = "bconv";
  check_residues(a, src_moduli, op);
  check_words(dst_moduli, op, "dst_moduli");
  check_same_device(dst_moduli, a, op, "dst_moduli");
  FHE_CHECK(dst_moduli.dim() == 2 && dst_moduli.size(1) == 4 && dst_moduli.size(0) > 0, op,
              ": dst_moduli must be [l_out, 4], got ", dst_moduli.sizes());
  const int64_t l_in = src_moduli.size(0), l_out = dst_moduli.size(0);
  FHE_CHECK(l_in <= kMaxBconvInputLimbs, op, ": at most ", kMaxBconvInputLimbs, " input limbs, got ", l_in);
  for (const Tensor* t : {&qhat_inv, &qhat_inv_shoup}) {
    check_words(*t, op, "qhat_inv");
    check_same_device(*t, a, op, "qhat_inv");
    FHE_CHECK(t->dim() == 1 && t->size(0) == l_in, op, ": qhat_inv must be [", l_in, "], got ", t->sizes());
  }
  check_words(qhat_mod_p, op, "qhat_mod_p");
  check_same_device(qhat_mod_p, a, op, "qhat_mod_p");
  FHE_CHECK(qhat_mod_p.dim() == 2 && qhat_mod_p.size(0) == l_in && qhat_mod_p.size(1) == l_out, op,
              ": qhat_mod_p must be [", l_in, ", ", l_out, "], got ", qhat_mod_p.sizes());
  if (neg_q_mod_p.has_value()) {
    const Tensor& neg = *neg_q_mod_p;
    check_words(neg, op, "neg_q_mod_p");
    check_same_device(neg, a, op, "neg_q_mod_p");
    FHE_CHECK(neg.dim() == 1 && neg.size(0) == l_out, op, ": neg_q_mod_p must be [", l_out, "], got ", neg.sizes());
    // u < l_in: one more product of < 2^(6 + 61) must still fit the 128-bit accumulator
    FHE_CHECK(l_in < kMaxBconvInputLimbs, op, ": the exact conversion takes at most ", kMaxBconvInputLimbs - 1,
              " input limbs, got ", l_in);
  }
  const auto sizes = bconv_out_sizes(a, dst_moduli);
  check_out(out, a, sizes, op);
  // One digit made of every input limb: the plain Conv.
  ConvArgs args{words(a), mutable_words(out), moduli_ptr(src_moduli), moduli_ptr(dst_moduli), words(qhat_inv),
                words(qhat_inv_shoup), words(qhat_mod_p), a.numel() / (l_in * a.size(-1)),
                static_cast<int>(l_in), static_cast<int>(l_in), 1, static_cast<int>(l_out), a.size(-1),
                neg_q_mod_p.has_value() ? words(*neg_q_mod_p) : nullptr};
  args.lazy_out = lazy;
  args.plan = checked_plan(plan, op);
  args.mma_fragments = checked_fragments(fragments, a, 1, l_out, l_in + (neg_q_mod_p.has_value() ? 1 : 0), op);
  B::conv(args, a);
  return out;
}

template <class B>
Tensor bconv(const Tensor& a, const Tensor& src_moduli, const Tensor& dst_moduli, const Tensor& qhat_inv,
             const Tensor& qhat_inv_shoup, const Tensor& qhat_mod_p, int64_t plan,
             const std::optional<Tensor>& neg_q_mod_p, bool lazy, const std::optional<Tensor>& fragments) {
  Tensor out = at::empty(bconv_out_sizes(a, dst_moduli), a.options());
  return bconv_out<B>(a, src_moduli, dst_moduli, qhat_inv, qhat_inv_shoup, qhat_mod_p, plan, neg_q_mod_p, lazy,
                      fragments, out);
}

// ---- key-switching inner product -----------------------------------------------------------

constexpr int64_t kMaxDigits = 63;  // dnum products of < 2^122 fit a 128-bit accumulator

// ---- the checks every key-switching inner product makes -----------------------------------------

struct KsDigitShape {
  int64_t dnum, limbs, n;
};

// digits: residues [dnum, limbs, N] with 1 <= dnum <= kMaxDigits.
KsDigitShape check_ks_digits(const Tensor& digits, const Tensor& moduli, const char* op) {
  check_residues(digits, moduli, op, "digits");
  FHE_CHECK(digits.dim() == 3, op, ": digits must be [dnum, limbs, N], got ", digits.sizes());
  const KsDigitShape d{digits.size(0), digits.size(1), digits.size(2)};
  FHE_CHECK(d.dnum >= 1 && d.dnum <= kMaxDigits, op, ": 1 to ", kMaxDigits, " digits, got ", d.dnum);
  return d;
}

// A switching key [>= dnum, 2, rows, N] on the digits' device; returns its row count.
int64_t check_ks_key(const Tensor& key, const Tensor& digits, const KsDigitShape& d, const char* op) {
  check_words(key, op, "key");
  check_same_device(key, digits, op, "key");
  FHE_CHECK(key.dim() == 4 && key.size(0) >= d.dnum && key.size(1) == 2 && key.size(3) == d.n, op,
            ": key must be [dnum >= ", d.dnum, ", 2, rows, ", d.n, "], got ", key.sizes());
  return key.size(2);
}

// The digits' limbs [0, q_count) are key rows [0, q_count), the others key rows from p_row on.
void check_ks_rows(int64_t q_count, int64_t p_row, int64_t limbs, int64_t key_rows, const char* op) {
  FHE_CHECK(q_count >= 0 && q_count <= limbs && q_count <= p_row && p_row + (limbs - q_count) <= key_rows, op,
            ": limbs [0, ", q_count, ") must be key rows [0, ", q_count, ") and the other ", limbs - q_count,
            " rows from ", p_row, ", within the key's ", key_rows, " rows");
}

template <class B>
Tensor& ks_inner_product_out(const Tensor& digits, const Tensor& key, int64_t q_count, int64_t p_row,
                             const Tensor& moduli, Tensor& out) {
  const char* op = "ks_inner_product";
  const KsDigitShape d = check_ks_digits(digits, moduli, op);
  const int64_t dnum = d.dnum, limbs = d.limbs, n = d.n;
  const int64_t key_rows = check_ks_key(key, digits, d, op);
  check_ks_rows(q_count, p_row, limbs, key_rows, op);
  const std::vector<int64_t> sizes{2, limbs, n};
  check_out(out, digits, sizes, op);
  at::assert_no_overlap(out, digits);
  const KsInnerProductArgs args{words(digits), words(key), mutable_words(out), moduli_ptr(moduli),
                                static_cast<int>(dnum), static_cast<int>(limbs), static_cast<int>(q_count),
                                p_row, key_rows, n};
  B::ks_inner_product(args, digits);
  return out;
}

template <class B>
Tensor ks_inner_product(const Tensor& digits, const Tensor& key, int64_t q_count, int64_t p_row,
                        const Tensor& moduli) {
  Tensor out = at::empty({2, digits.size(1), digits.size(2)}, digits.options());
  return ks_inner_product_out<B>(digits, key, q_count, p_row, moduli, out);
}

// ntt_inner_product's skipped rows from `own` (through sigma_galois) copied into the digits, for the paths that
// read them there (the CPU, CUDA where the fused kernel does not apply).
template <class B>
void copy_own_rows(Tensor& digits, const Tensor& own, int64_t galois, const Tensor& moduli, const NttSkip& skip) {
  const int64_t limbs = digits.size(1);
  Tensor source = own;
  if (galois != 1) {
    source = at::empty_like(own);
    automorphism_out<B, true>(own, moduli.narrow(0, skip.begin, limbs - skip.begin), galois, source);
  }
  for (int64_t j = 0; j < digits.size(0); ++j) {
    const int64_t lo = skip.begin + j * skip.stride, hi = std::min<int64_t>(limbs, lo + skip.length);
    if (lo < hi) digits.select(0, j).narrow(0, lo, hi - lo).copy_(source.narrow(0, lo - skip.begin, hi - lo));
  }
}

// ntt_inner_product's tensor terms (NttInnerProductArgs::tensor_a): only the digit-group kernel adds them, so the
// caller (KernelPlan.tensor_in_inner_product) passes them only where it runs; anywhere else this is an error.
template <class B>
void set_tensor_terms(NttInnerProductArgs& args, const Tensor& digits, const Tensor& a, const Tensor& b,
                      const Tensor& p_mod_q, const char* op) {
  const int64_t q_rows = args.ntt.limbs - args.ntt.skip.begin;
  for (const auto& [t, name] : {std::pair<const Tensor&, const char*>{a, "tensor_a"}, {b, "tensor_b"}}) {
    check_words(t, op, name);
    check_same_device(t, digits, op, name);
    FHE_CHECK(t.dim() == 3 && t.size(0) == 2 && t.size(1) == q_rows && t.size(2) == digits.size(2), op, ": ", name,
              " must be [2, ", q_rows, ", ", digits.size(2), "] (a degree-1 ciphertext over the rows from skip[0] on), "
              "got ", t.sizes());
    at::assert_no_overlap(digits, t);
  }
  check_words(p_mod_q, op, "p_mod_q");
  check_same_device(p_mod_q, digits, op, "p_mod_q");
  FHE_CHECK(p_mod_q.dim() == 1 && p_mod_q.size(0) == q_rows, op, ": p_mod_q must be [", q_rows, "], got ",
            p_mod_q.sizes());
  args.tensor_a = words(a);
  args.tensor_b = words(b);
  args.p_mod_q = words(p_mod_q);
  FHE_CHECK(B::ntt_inner_product_takes_tensor(args), op,
            ": tensor_a/tensor_b need the CUDA digit-group kernel (the tuned plan, own given, at most 4 digits, "
            "16-byte aligned tensors); elsewhere take the tensor product before the key switch");
}

// ModUp's forward NTT (in place, skipping `skip`'s rows) and the inner product as one op: returns
// ks_inner_product(ntt(digits, skip)); digits is scratch afterwards (NttInnerProductArgs). With own, the skipped
// rows come from own (row i - skip[0] for limb i, through sigma_own_galois) instead of the digits. With tensor_a,
// tensor_b and p_mod_q (CUDA, the digit-group kernel), the Q rows of component c also get (P mod q_i) * t_c
// (kernels.h).
template <class B>
Tensor ntt_inner_product(Tensor& digits, const Tensor& moduli, const Tensor& table, const Tensor& key,
                         int64_t q_count, int64_t p_row, int64_t plan, at::OptionalIntArrayRef skip,
                         const std::optional<Tensor>& own,
                         int64_t own_galois, const std::optional<Tensor>& tensor_a,
                         const std::optional<Tensor>& tensor_b, const std::optional<Tensor>& p_mod_q) {
  const char* op = "ntt_inner_product";
  const KsDigitShape d = check_ks_digits(digits, moduli, op);
  const int log_n = log2_exact(d.n, op);
  const int table_rows = check_ntt_table(table, digits, moduli, op);
  const int64_t key_rows = check_ks_key(key, digits, d, op);
  check_ks_rows(q_count, p_row, d.limbs, key_rows, op);
  at::assert_no_overlap(key, digits);
  Tensor out = at::empty({2, d.limbs, d.n}, digits.options());
  NttArgs nt{words(digits), mutable_words(digits), moduli_ptr(moduli), words(table), d.dnum * d.limbs,
             static_cast<int>(d.limbs), log_n};
  nt.table_rows = table_rows;
  nt.plan = checked_plan(plan, op);
  if (skip.has_value()) {
    const auto s = *skip;
    FHE_CHECK(s.size() == 3 && s[0] >= 0 && s[1] >= 0 && s[2] >= 0 && s[0] <= d.limbs && s[1] <= d.limbs &&
                  s[2] <= d.limbs,
              op, ": skip must be (begin, stride, length), each in [0, ", d.limbs, "], got ", s);
    nt.skip = NttSkip{static_cast<int>(s[0]), static_cast<int>(s[1]), static_cast<int>(s[2])};
  }
  const KsInnerProductArgs ip{words(digits), words(key), mutable_words(out), moduli_ptr(moduli),
                              static_cast<int>(d.dnum), static_cast<int>(d.limbs), static_cast<int>(q_count),
                              p_row, key_rows, d.n};
  NttInnerProductArgs args{nt, ip};
  check_galois(own_galois, d.n, op, "own_galois");
  if (own.has_value()) {
    FHE_CHECK(skip.has_value(), op, ": own needs skip (the rows it stands for)");
    check_words(*own, op, "own");
    check_same_device(*own, digits, op, "own");
    const int64_t rows = d.limbs - nt.skip.begin;
    FHE_CHECK(own->dim() == 2 && own->size(0) == rows && own->size(1) == d.n, op, ": own must be [", rows, ", ", d.n,
              "] (the rows from skip[0] on), got ", own->sizes());
    at::assert_no_overlap(digits, *own);
    args.own = words(*own);
    args.own_galois = static_cast<u64>(own_galois);
    if (!B::ntt_inner_product_fuses(args)) {
      copy_own_rows<B>(digits, *own, own_galois, moduli, nt.skip);
      args.own = nullptr;
      args.own_galois = 1;
    }
  } else {
    FHE_CHECK(own_galois == 1, op, ": own_galois needs own");
  }
  const bool tensor = tensor_a.has_value() || tensor_b.has_value() || p_mod_q.has_value();
  if (tensor) {
    FHE_CHECK(tensor_a.has_value() && tensor_b.has_value() && p_mod_q.has_value(), op,
              ": tensor_a, tensor_b and p_mod_q go together");
    FHE_CHECK(own.has_value() && own_galois == 1, op, ": tensor_a needs own (and own_galois 1)");
    set_tensor_terms<B>(args, digits, *tensor_a, *tensor_b, *p_mod_q, op);
  }
  B::ntt_inner_product(args, digits);
  return out;
}

// ---- ModUp basis extension of all digits -------------------------------------------------------

template <class B>
Tensor& mod_up_conv_out(const Tensor& coeffs, const Tensor& src_moduli, const Tensor& qhat_inv,
                        const Tensor& qhat_inv_shoup, const Tensor& dst_moduli, const Tensor& qhat_mod_p, int64_t plan,
                        const std::optional<Tensor>& own, bool lazy, const std::optional<Tensor>& fragments,
                        bool copy_own, Tensor& out) {
  const char* op = "mod_up_conv";
  check_residues(coeffs, src_moduli, op, "coeffs");
  FHE_CHECK(coeffs.dim() == 2, op, ": coeffs must be [q_count, N], got ", coeffs.sizes());
  const int64_t q_count = coeffs.size(0), n = coeffs.size(1);
  for (const Tensor* t : {&qhat_inv, &qhat_inv_shoup}) {
    check_words(*t, op, "qhat_inv");
    check_same_device(*t, coeffs, op, "qhat_inv");
    FHE_CHECK(t->dim() == 1 && t->size(0) == q_count, op, ": qhat_inv must be [", q_count, "], got ", t->sizes());
  }
  check_words(dst_moduli, op, "dst_moduli");
  check_same_device(dst_moduli, coeffs, op, "dst_moduli");
  FHE_CHECK(dst_moduli.dim() == 2 && dst_moduli.size(1) == 4 && dst_moduli.size(0) > 0, op,
            ": dst_moduli must be [rows, 4], got ", dst_moduli.sizes());
  check_words(qhat_mod_p, op, "qhat_mod_p");
  check_same_device(qhat_mod_p, coeffs, op, "qhat_mod_p");
  FHE_CHECK(qhat_mod_p.dim() == 3 && qhat_mod_p.size(2) == dst_moduli.size(0), op,
            ": qhat_mod_p must be [dnum, alpha, rows], got ", qhat_mod_p.sizes());
  const int64_t dnum = qhat_mod_p.size(0), alpha = qhat_mod_p.size(1), rows = dst_moduli.size(0);
  FHE_CHECK(alpha >= 1 && alpha <= kMaxBconvInputLimbs && dnum == (q_count + alpha - 1) / alpha, op, ": ", dnum,
            " digits of ", alpha, " primes do not cover ", q_count, " primes (or alpha exceeds ",
            kMaxBconvInputLimbs, ")");
  const std::vector<int64_t> sizes{dnum, rows, n};
  check_out(out, coeffs, sizes, op);
  at::assert_no_overlap(out, coeffs);
  ConvArgs args{words(coeffs), mutable_words(out), moduli_ptr(src_moduli), moduli_ptr(dst_moduli),
                words(qhat_inv), words(qhat_inv_shoup), words(qhat_mod_p), 1, static_cast<int>(q_count),
                static_cast<int>(alpha), static_cast<int>(dnum), static_cast<int>(rows), n};
  if (own.has_value()) {  // the digits' own rows, the last q_count rows of (P, Q), copied from `own`
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
  B::conv(args, coeffs);
  return out;
}

template <class B>
Tensor mod_up_conv(const Tensor& coeffs, const Tensor& src_moduli, const Tensor& qhat_inv,
                   const Tensor& qhat_inv_shoup, const Tensor& dst_moduli, const Tensor& qhat_mod_p, int64_t plan,
                   const std::optional<Tensor>& own, bool lazy, const std::optional<Tensor>& fragments,
                   bool copy_own) {
  Tensor out = at::empty({qhat_mod_p.size(0), dst_moduli.size(0), coeffs.size(1)}, coeffs.options());
  return mod_up_conv_out<B>(coeffs, src_moduli, qhat_inv, qhat_inv_shoup, dst_moduli, qhat_mod_p, plan, own, lazy,
                            fragments, copy_own, out);
}

// ---- centered lift -----------------------------------------------------------------------------

template <class B>
Tensor& center_lift_out(const Tensor& a, int64_t q, const Tensor& dst_moduli, Tensor& out) {
  const char* op = "center_lift";
  check_words(a, op, "a");
  FHE_CHECK(a.dim() >= 2 && a.size(-2) == 1 && a.size(-1) > 0, op, ": a must be one limb [..., 1, N], got ",
            a.sizes());
  FHE_CHECK(q > 2 && (q & 1) == 1 && q < (int64_t{1} << kMaxModulusBits), op,
            ": q must be an odd modulus below 2^", kMaxModulusBits, ", got ", q);
  check_words(dst_moduli, op, "dst_moduli");
  check_same_device(dst_moduli, a, op, "dst_moduli");
  FHE_CHECK(dst_moduli.dim() == 2 && dst_moduli.size(1) == 4 && dst_moduli.size(0) > 0, op,
            ": dst_moduli must be [l_out, 4], got ", dst_moduli.sizes());
  const auto sizes = bconv_out_sizes(a, dst_moduli);
  check_out(out, a, sizes, op);
  at::assert_no_overlap(out, a);
  const CenterLiftArgs args{words(a), mutable_words(out), make_modulus(static_cast<u64>(q)), moduli_ptr(dst_moduli),
                            a.numel() / a.size(-1), static_cast<int>(dst_moduli.size(0)), a.size(-1)};
  B::center_lift(args, a);
  return out;
}

template <class B>
Tensor center_lift(const Tensor& a, int64_t q, const Tensor& dst_moduli) {
  Tensor out = at::empty(bconv_out_sizes(a, dst_moduli), a.options());
  return center_lift_out<B>(a, q, dst_moduli, out);
}

// ---- automorphisms ---------------------------------------------------------------------------

template <class B, bool kNtt>
Tensor& automorphism_out(const Tensor& a, const Tensor& moduli, int64_t galois, Tensor& out) {
  const char* op = kNtt ? "automorphism_ntt" : "automorphism_coeff";
  const int64_t rows = check_residues(a, moduli, op);
  const int log_n = log2_exact(a.size(-1), op);
  FHE_CHECK(galois > 0 && galois < 2 * a.size(-1) && (galois & 1) == 1, op,
              ": the Galois element must be odd and in [1, 2N), got ", galois);
  check_out(out, a, a.sizes(), op);
  at::assert_no_overlap(out, a);
  const AutomorphismArgs args{words(a), mutable_words(out), moduli_ptr(moduli), rows,
                              static_cast<int>(moduli.size(0)), log_n, static_cast<u64>(galois)};
  if (kNtt) B::automorphism_ntt(args, a);
  else B::automorphism_coeff(args, a);
  return out;
}

template <class B, bool kNtt>
Tensor automorphism(const Tensor& a, const Tensor& moduli, int64_t galois) {
  Tensor out = at::empty_like(a, at::MemoryFormat::Contiguous);
  return automorphism_out<B, kNtt>(a, moduli, galois, out);
}

// ---- sampling --------------------------------------------------------------------------------

Tensor sample_output(const Tensor& moduli, int64_t n, const char* op) {
  check_words(moduli, op, "moduli");
  FHE_CHECK(moduli.dim() == 2 && moduli.size(1) == 4 && moduli.size(0) > 0, op,
              ": moduli must be [limbs, 4], got ", moduli.sizes());
  log2_exact(n, op);
  return at::empty({moduli.size(0), n}, moduli.options());
}

template <class B>
Tensor sample_uniform(const Tensor& moduli, int64_t n, at::IntArrayRef key, int64_t nonce) {
  Tensor out = sample_output(moduli, n, "sample_uniform");
  const SampleArgs args{SampleKind::kUniform, chacha_key(key, "sample_uniform"), static_cast<u64>(nonce),
                        mutable_words(out), moduli_ptr(moduli), static_cast<int>(moduli.size(0)), n, 0};
  B::sample(args, moduli);
  return out;
}

template <class B>
Tensor sample_cbd(const Tensor& moduli, int64_t n, at::IntArrayRef key, int64_t nonce, int64_t eta) {
  FHE_CHECK(eta >= 1 && eta <= 32, "sample_cbd: eta must be in [1, 32], got ", eta);
  Tensor out = sample_output(moduli, n, "sample_cbd");
  const SampleArgs args{SampleKind::kCenteredBinomial, chacha_key(key, "sample_cbd"), static_cast<u64>(nonce),
                        mutable_words(out), moduli_ptr(moduli), static_cast<int>(moduli.size(0)), n,
                        static_cast<int>(eta)};
  B::sample(args, moduli);
  return out;
}

template <class B>
Tensor sample_ternary(const Tensor& moduli, int64_t n, at::IntArrayRef key, int64_t nonce,
                      int64_t hamming_weight) {
  const char* op = "sample_ternary";
  Tensor out = sample_output(moduli, n, op);
  FHE_CHECK(hamming_weight >= 0 && hamming_weight <= n, op, ": hamming_weight must be in [0, N], got ",
              hamming_weight);
  const ChaChaKey k = chacha_key(key, op);
  if (hamming_weight == 0) {  // i.i.d. uniform over {-1, 0, 1}
    const SampleArgs args{SampleKind::kTernaryUniform, k, static_cast<u64>(nonce), mutable_words(out),
                          moduli_ptr(moduli), static_cast<int>(moduli.size(0)), n, 0};
    B::sample(args, moduli);
    return out;
  }
  Tensor scratch = at::zeros({n}, moduli.options().dtype(at::kChar));
  const FixedWeightArgs args{k, static_cast<u64>(nonce), scratch.data_ptr<int8_t>(), mutable_words(out),
                             moduli_ptr(moduli), static_cast<int>(moduli.size(0)), n, hamming_weight};
  B::sample_fixed_weight(args, moduli);
  return out;
}

// ---- tables (host) ---------------------------------------------------------------------------

// NTT table [l, 4, N] (pairs: [l, 8, N], for CUDA) for primes with given primitive 2N-th roots psi (rows as
// in common/ntt.h).
Tensor ntt_table(const Tensor& moduli, const Tensor& roots, int64_t log_n, bool pairs) {
  const char* op = "ntt_table";
  check_words(moduli, op, "moduli");
  check_words(roots, op, "roots");
  FHE_CHECK(moduli.device().is_cpu() && roots.device().is_cpu(), op, ": tables are built on the CPU");
  FHE_CHECK(moduli.dim() == 2 && moduli.size(1) == 4, op, ": moduli must be [limbs, 4]");
  FHE_CHECK(roots.dim() == 1 && roots.size(0) == moduli.size(0), op, ": roots must be [limbs]");
  FHE_CHECK(log_n >= kMinLogN && log_n <= kMaxLogN, op, ": log_n must be in [", kMinLogN, ", ", kMaxLogN,
              "], got ", log_n);
  const int log = static_cast<int>(log_n);
  const int64_t n = int64_t{1} << log, limbs = moduli.size(0);
  const int64_t table_rows = pairs ? kNttTableRows : kNttTableRowsCpu;
  Tensor table = at::empty({limbs, table_rows, n}, moduli.options());
  const Modulus* mods = moduli_ptr(moduli);
  const u64* psi = words(roots);
  u64* out = mutable_words(table);
  for (int64_t l = 0; l < limbs; ++l) {
    const Modulus& m = mods[l];
    const u64 q = m.value;
    FHE_CHECK(pow_mod(psi[l], n, m) == q - 1, op, ": root ", psi[l], " is not a primitive 2N-th root mod ", q);
    const u64 psi_inv = pow_mod(psi[l], 2 * n - 1, m);
    u64* fwd = out + l * table_rows * n;
    u64* inv = fwd + kInv * n;
    u64 p = 1, pi = 1;
    for (int64_t k = 0; k < n; ++k) {  // psi^k and psi^-k, stored at slot brv(k)
      const u32 slot = bit_reverse(static_cast<u32>(k), log);
      fwd[slot] = p;
      inv[slot] = pi;
      p = mul_mod(p, psi[l], m);
      pi = mul_mod(pi, psi_inv, m);
    }
    const u64 n_inv = pow_mod(static_cast<u64>(n) % q, q - 2, m);
    inv[1] = mul_mod(inv[1], n_inv, m);  // index 1 is used only by the last stage: fold 1/N in
    inv[0] = n_inv;                      // index 0 is never a twiddle
    u64* fwd_shoup = fwd + kFwdShoup * n;
    u64* inv_shoup = fwd + kInvShoup * n;
    for (int64_t k = 0; k < n; ++k) {
      fwd_shoup[k] = shoup_precompute(fwd[k], q);
      inv_shoup[k] = shoup_precompute(inv[k], q);
    }
    if (!pairs) continue;
    u64* fwd_pairs = fwd + kFwdPairs * n;
    u64* inv_pairs = fwd + kInvPairs * n;
    u64* fwd_fp64 = fwd + kFwdFp64 * n;
    u64* inv_fp64 = fwd + kInvFp64 * n;
    for (int64_t k = 0; k < n; ++k) {
      fwd_pairs[2 * k] = fwd[k];
      fwd_pairs[2 * k + 1] = fwd_shoup[k];
      inv_pairs[2 * k] = inv[k];
      inv_pairs[2 * k + 1] = inv_shoup[k];
      store_fp64_pair(fwd_fp64 + 2 * k, fwd[k], q);
      store_fp64_pair(inv_fp64 + 2 * k, inv[k], q);
    }
  }
  return table;
}

// ---- fused ops of the bootstrapping circuit (kernels.h) ------------------------------------------

// The inner product of ks_inner_product_out with the digits read through sigma_galois, add (through
// sigma_add_galois) on the last add.size(0) rows of component 0, and (accumulate) the previous
// contents of out. out: [2, limbs, N] of two contiguous [limbs, N] blocks at any distance.
template <class B>
Tensor& ks_inner_product_fused_out(const Tensor& digits, const Tensor& key, int64_t q_count, int64_t p_row,
                                   const Tensor& moduli, int64_t galois, const std::optional<Tensor>& add,
                                   int64_t add_galois, bool accumulate, Tensor& out) {
  const char* op = "ks_inner_product_fused";
  const KsDigitShape d = check_ks_digits(digits, moduli, op);
  const int64_t dnum = d.dnum, limbs = d.limbs, n = d.n;
  const int log_n = log2_exact(n, op);
  const int64_t key_rows = check_ks_key(key, digits, d, op);
  check_ks_rows(q_count, p_row, limbs, key_rows, op);
  for (const int64_t k : {galois, add_galois})
    FHE_CHECK(k > 0 && k < 2 * n && k % 2 == 1, op, ": a Galois element must be odd in [1, ", 2 * n, "), got ", k);
  FHE_CHECK(out.scalar_type() == at::kLong && out.dim() == 3 && out.size(0) == 2 && out.size(1) == limbs &&
                out.size(2) == n && out.stride(2) == 1 && out.stride(1) == n && out.stride(0) >= limbs * n,
            op, ": out must be [2, ", limbs, ", ", n, "] with contiguous [limbs, N] blocks, got shape ", out.sizes(),
            " and strides ", out.strides());
  check_same_device(out, digits, op, "out");
  at::assert_no_overlap(out, digits);
  at::assert_no_overlap(out, key);
  KsInnerProductFusedArgs args{KsInnerProductArgs{words(digits), words(key), mutable_words(out), moduli_ptr(moduli),
                                                  static_cast<int>(dnum), static_cast<int>(limbs),
                                                  static_cast<int>(q_count), p_row, key_rows, n},
                               out.stride(0), static_cast<u64>(galois), nullptr, 0,
                               static_cast<u64>(add_galois), accumulate, log_n};
  if (add.has_value()) {
    check_words(*add, op, "add");
    check_same_device(*add, digits, op, "add");
    FHE_CHECK(add->dim() == 2 && add->size(0) <= limbs && add->size(1) == n, op, ": add must be [<= ", limbs,
              ", ", n, "], got ", add->sizes());
    at::assert_no_overlap(out, *add);
    args.add = words(*add);
    args.add_rows = static_cast<int>(add->size(0));
  }
  B::ks_inner_product_fused(args, digits);
  return out;
}

// out = sum_k weights[k] * terms[k] (+ constant on the first constant_components components); see kernels.h.
// terms[k]: [batch, rows_k >= limbs, N] with contiguous [rows_k, N] blocks (its first limbs rows are read).
template <class B>
Tensor& linear_combination_out(at::TensorList terms, const Tensor& weights, const Tensor& moduli,
                               const std::optional<Tensor>& constant, int64_t constant_components, Tensor& out) {
  const char* op = "linear_combination";
  const int64_t count = static_cast<int64_t>(terms.size());
  FHE_CHECK(count >= 1 && count <= kMaxCombinationTerms, op, ": 1 to ", kMaxCombinationTerms, " terms, got ", count);
  // out: [batch, limbs, N], contiguous or a batch of contiguous [limbs, N] blocks (a pair's ciphertext)
  FHE_CHECK(out.scalar_type() == at::kLong && out.dim() == 3 && out.stride(2) == 1 && out.stride(1) == out.size(2) &&
                (out.size(0) == 1 || out.stride(0) >= out.size(1) * out.size(2)),
            op, ": out must be an int64 [batch, limbs, N] of contiguous [limbs, N] blocks, got shape ", out.sizes(),
            " and strides ", out.strides());
  check_words(moduli, op, "moduli");
  check_same_device(moduli, out, op, "moduli");
  FHE_CHECK(moduli.dim() == 2 && moduli.size(1) == 4 && moduli.size(0) == out.size(1), op,
            ": moduli must be [", out.size(1), ", 4], got ", moduli.sizes());
  const int64_t batch = out.size(0), limbs = out.size(1), n = out.size(2);
  log2_exact(n, op);
  check_words(weights, op, "weights");
  check_same_device(weights, out, op, "weights");
  FHE_CHECK(weights.dim() == 3 && weights.size(0) == count && weights.size(1) == limbs && weights.size(2) == 2, op,
            ": weights must be [", count, ", ", limbs, ", 2], got ", weights.sizes());
  LinearCombinationArgs args{};
  for (int64_t k = 0; k < count; ++k) {
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
  args.count = static_cast<int>(count);
  args.weights = words(weights);
  if (constant.has_value()) {
    check_words(*constant, op, "constant");
    check_same_device(*constant, out, op, "constant");
    FHE_CHECK(constant->dim() == 2 && constant->size(0) == limbs && constant->size(1) == 2, op,
              ": constant must be [", limbs, ", 2], got ", constant->sizes());
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
  B::linear_combination(args, out);
  return out;
}

// The plaintext products of up to kMaxGiants giant steps in one pass over the baby stack (kernels.h), out
// [2, giants, limbs, N] (component-major: a slice of a [2, G, limbs, N] buffer):
// index[g * n_babies + j] is giant g's plaintext for baby position j, or -1; each giant's used
// plaintexts are 0 .. m_g - 1, each once.
template <class B>
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
  for (int64_t g = 0; g < giants; ++g) {
    const Tensor& p = pts[g];
    check_words(p, op, "a plaintext block");
    check_same_device(p, babies, op, "a plaintext block");
    FHE_CHECK(p.dim() == 3 && p.size(1) == limbs && p.size(2) == n && p.size(0) >= 1 && p.size(0) <= kMaxDigits,
              op, ": giant ", g, "'s plaintexts must be [1..", kMaxDigits, ", ", limbs, ", ", n, "], got ", p.sizes());
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
  B::giant_products(args, babies);
  return out;
}

// Two digit sets against one key, out [2 (component), 2 (set), limbs, N]: the relinearizations of a pair.
template <class B>
Tensor& ks_inner_product_pair_out(const Tensor& digits_a, const Tensor& digits_b, const Tensor& key, int64_t q_count,
                                  int64_t p_row, const Tensor& moduli, Tensor& out) {
  const char* op = "ks_inner_product_pair";
  const KsDigitShape d = check_ks_digits(digits_a, moduli, op);
  check_words(digits_b, op, "digits_b");
  check_same_device(digits_b, digits_a, op, "digits_b");
  FHE_CHECK(digits_b.sizes() == digits_a.sizes(), op, ": the two digit sets differ in shape: ", digits_a.sizes(),
            " and ", digits_b.sizes());
  const int64_t dnum = d.dnum, limbs = d.limbs, n = d.n;
  const int64_t key_rows = check_ks_key(key, digits_a, d, op);
  check_ks_rows(q_count, p_row, limbs, key_rows, op);
  const std::vector<int64_t> sizes{2, 2, limbs, n};
  check_out(out, digits_a, sizes, op);
  for (const Tensor* t : {&digits_a, &digits_b, &key}) at::assert_no_overlap(out, *t);
  const KsInnerProductPairArgs args{KsInnerProductArgs{words(digits_a), words(key), mutable_words(out),
                                                       moduli_ptr(moduli), static_cast<int>(dnum),
                                                       static_cast<int>(limbs), static_cast<int>(q_count), p_row,
                                                       key_rows, n},
                                    words(digits_b)};
  B::ks_inner_product_pair(args, digits_a);
  return out;
}

// The baby steps of a double-hoisted linear transform in one launch (kernels.h): baby b's key keys[b] and
// element galois[b], its result in out[positions[b]] ([n, 2, limbs, N], the baby-step stack), plus
// sigma_b(add) on the last add.size(0) rows of component 0.
template <class B>
Tensor& ks_inner_product_babies_out(const Tensor& digits, at::TensorList keys, at::IntArrayRef galois,
                                    at::IntArrayRef positions, int64_t q_count, int64_t p_row, const Tensor& moduli,
                                    const std::optional<Tensor>& add, Tensor& out) {
  const char* op = "ks_inner_product_babies";
  const KsDigitShape d = check_ks_digits(digits, moduli, op);
  const int64_t dnum = d.dnum, limbs = d.limbs, n = d.n;
  const int log_n = log2_exact(n, op);
  const int64_t count = static_cast<int64_t>(keys.size());
  FHE_CHECK(count >= 1 && count <= kMaxBabySteps && static_cast<int64_t>(galois.size()) == count &&
                static_cast<int64_t>(positions.size()) == count,
            op, ": 1 to ", kMaxBabySteps, " baby steps, with one Galois element and one position each; got ", count,
            " keys, ", galois.size(), " elements, ", positions.size(), " positions");
  check_words(out, op, "out");
  check_same_device(out, digits, op, "out");
  FHE_CHECK(out.dim() == 4 && out.size(1) == 2 && out.size(2) == limbs && out.size(3) == n, op,
            ": out must be [n, 2, ", limbs, ", ", n, "], got ", out.sizes());
  at::assert_no_overlap(out, digits);
  KsInnerProductBabiesArgs args{};
  int64_t key_rows = -1;
  for (int64_t b = 0; b < count; ++b) {
    const Tensor& key = keys[b];
    const int64_t rows = check_ks_key(key, digits, d, op);
    FHE_CHECK(key_rows < 0 || rows == key_rows, op, ": the keys must have one row count, got ", key_rows, " and ",
              rows);
    key_rows = rows;
    FHE_CHECK(galois[b] > 0 && galois[b] < 2 * n && galois[b] % 2 == 1, op, ": a Galois element must be odd in [1, ",
              2 * n, "), got ", galois[b]);
    FHE_CHECK(positions[b] >= 0 && positions[b] < out.size(0), op, ": position ", positions[b], " outside [0, ",
              out.size(0), ")");
    for (int64_t c = 0; c < b; ++c)
      FHE_CHECK(positions[c] != positions[b], op, ": two baby steps write position ", positions[b]);
    at::assert_no_overlap(out, key);
    args.keys[b] = words(key);
    args.outs[b] = mutable_words(out) + positions[b] * 2 * limbs * n;
    args.galois[b] = static_cast<u64>(galois[b]);
  }
  check_ks_rows(q_count, p_row, limbs, key_rows, op);
  args.base = KsInnerProductArgs{words(digits), nullptr, nullptr, moduli_ptr(moduli), static_cast<int>(dnum),
                                 static_cast<int>(limbs), static_cast<int>(q_count), p_row, key_rows, n};
  args.count = static_cast<int>(count);
  args.log_n = log_n;
  if (add.has_value()) {
    check_words(*add, op, "add");
    check_same_device(*add, digits, op, "add");
    FHE_CHECK(add->dim() == 2 && add->size(0) <= limbs && add->size(1) == n, op, ": add must be [<= ", limbs, ", ", n,
              "], got ", add->sizes());
    for (int64_t b = 0; b < count; ++b) at::assert_no_overlap(out[positions[b]], *add);
    args.add = words(*add);
    args.add_rows = static_cast<int>(add->size(0));
  }
  B::ks_inner_product_babies(args, digits);
  return out;
}

// ---- registration ----------------------------------------------------------------------------

template <class B>
void register_backend(torch::Library& m) {
  m.impl("ntt", &ntt<B, true>);
  m.impl("ntt.out", &ntt_out<B, true>);
  m.impl("intt", &ntt<B, false>);
  m.impl("intt.out", &ntt_out<B, false>);
  m.impl("mod_down_ntt", &mod_down_ntt<B>);
  m.impl("mod_down_ntt.out", &mod_down_ntt_out<B>);
  m.impl("intt_galois", &intt_galois<B>);
  m.impl("intt_product", &intt_product<B>);
  m.impl("add", &binary<B, ElementwiseOp::kAdd>);
  m.impl("add.out", &binary_out<B, ElementwiseOp::kAdd>);
  m.impl("sub", &binary<B, ElementwiseOp::kSub>);
  m.impl("sub.out", &binary_out<B, ElementwiseOp::kSub>);
  m.impl("mul", &binary<B, ElementwiseOp::kMul>);
  m.impl("mul.out", &binary_out<B, ElementwiseOp::kMul>);
  m.impl("neg", &neg<B>);
  m.impl("neg.out", &neg_out<B>);
  m.impl("mul_const", &mul_const<B>);
  m.impl("mul_const.out", &mul_const_out<B>);
  m.impl("sub_mul_const", &sub_mul_const<B>);
  m.impl("sub_mul_const.out", &sub_mul_const_out<B>);
  m.impl("mul_add", &mul_add<B>);
  m.impl("mul_add.out", &mul_add_out<B>);
  m.impl("tensor_product", &tensor_product<B>);
  m.impl("tensor_product.out", &tensor_product_out<B>);
  m.impl("bconv", &bconv<B>);
  m.impl("bconv.out", &bconv_out<B>);
  m.impl("ks_inner_product", &ks_inner_product<B>);
  m.impl("ks_inner_product.out", &ks_inner_product_out<B>);
  m.impl("ntt_inner_product", &ntt_inner_product<B>);
  m.impl("mod_up_conv", &mod_up_conv<B>);
  m.impl("mod_up_conv.out", &mod_up_conv_out<B>);
  m.impl("center_lift", &center_lift<B>);
  m.impl("center_lift.out", &center_lift_out<B>);
  m.impl("automorphism_ntt", &automorphism<B, true>);
  m.impl("automorphism_ntt.out", &automorphism_out<B, true>);
  m.impl("automorphism_coeff", &automorphism<B, false>);
  m.impl("automorphism_coeff.out", &automorphism_out<B, false>);
  m.impl("ks_inner_product_fused", &ks_inner_product_fused_out<B>);
  m.impl("linear_combination", &linear_combination_out<B>);
  m.impl("giant_products", &giant_products_out<B>);
  m.impl("ks_inner_product_pair", &ks_inner_product_pair_out<B>);
  m.impl("ks_inner_product_babies", &ks_inner_product_babies_out<B>);
  m.impl("sample_uniform", &sample_uniform<B>);
  m.impl("sample_cbd", &sample_cbd<B>);
  m.impl("sample_ternary", &sample_ternary<B>);
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
  m.def("cuda_built() -> bool", []() {
#ifdef FHE_CORE_WITH_CUDA
    return true;
#else
    return false;
#endif
  });
}

TORCH_LIBRARY_IMPL(fhe_core, CPU, m) {
  fhe::register_backend<fhe::CpuBackend>(m);
  m.impl("ntt_table", &fhe::ntt_table);
  m.impl("conv_mma_fragments", &fhe::conv_mma_fragments);
}

#ifdef FHE_CORE_WITH_CUDA
TORCH_LIBRARY_IMPL(fhe_core, CUDA, m) { fhe::register_backend<fhe::CudaBackend>(m); }
#endif

// An empty Python module: importing fhe_core._C runs the static registrations above.
extern "C" PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}
