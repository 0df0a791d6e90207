// The torch glue's shared checks and the dispatch to a backend (ops/*.cpp).
//
// Every op checks its tensors (caller errors raise through FHE_CHECK with the op's name), fills a kernel argument
// struct (kernels.h) and runs it on the backend of the tensors' device: FHE_RUN(kernel, args, tensor) calls
// cpu::kernel(args) or, in a CUDA build, cuda::kernel(args, the tensor's current stream). register.cpp registers
// each op for both dispatch keys.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <optional>

#include "../check.h"
#include "../kernels.h"

namespace fhe {

using at::Tensor;

constexpr int kMinLogN = 10;
constexpr int kMaxLogN = 17;

#ifdef FHE_CORE_WITH_CUDA
// The current PyTorch stream of the tensor's device, through c10's device-generic interface (no CUDA headers here,
// no link against torch's CUDA libraries).
inline cuda::Stream current_stream(const Tensor& t) {
  const c10::Stream s = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(t.device());
  return cuda::Stream{s.native_handle(), static_cast<int>(t.device().index())};
}
#define FHE_RUN(kernel, args, like)                                                                 \
  ((like).is_cuda() ? ::fhe::cuda::kernel((args), ::fhe::current_stream(like)) : ::fhe::cpu::kernel(args))
#else
#define FHE_RUN(kernel, args, like) ::fhe::cpu::kernel(args)
#endif

// int64 and contiguous.
void check_words(const Tensor& t, const char* op, const char* name);
void check_same_device(const Tensor& t, const Tensor& ref, const char* op, const char* name);
// check_words, on ref's device, with exactly these sizes ("<name> must be [sizes]").
void check_sized(const Tensor& t, const Tensor& ref, at::IntArrayRef sizes, const char* op, const char* name);
// A residue tensor [..., limbs, N] with limbs = moduli.size(0); returns rows = numel / N.
int64_t check_residues(const Tensor& a, const Tensor& moduli, const char* op, const char* name = "a");
// Moduli [rows, 4] (rows > 0) on ref's device.
void check_moduli(const Tensor& moduli, const Tensor& ref, const char* op, const char* name);
int log2_exact(int64_t n, const char* op);
void check_out(const Tensor& out, const Tensor& like, at::IntArrayRef sizes, const char* op);
// out: [d0, rows, N] (int64) with contiguous [rows, N] blocks at a stride >= rows * N (a view of a caller's buffer).
void check_blocks(const Tensor& out, const Tensor& ref, at::IntArrayRef sizes, const char* op, const char* name);
void check_galois(int64_t galois, int64_t n, const char* op, const char* what);
// The kernel plan's flag bits (plan.h) as the launchers read them.
KernelPlan checked_plan(int64_t flags, const char* op);
NttSkip checked_skip(at::OptionalIntArrayRef skip, int64_t limbs, const char* op);
// The table's rows per limb: 12 on CUDA, 4 or 12 on the CPU.
int check_ntt_table(const Tensor& table, const Tensor& a, const Tensor& moduli, const char* op);

inline const Modulus* moduli_ptr(const Tensor& moduli) {
  return reinterpret_cast<const Modulus*>(moduli.data_ptr<int64_t>());
}
inline const u64* words(const Tensor& t) { return reinterpret_cast<const u64*>(t.data_ptr<int64_t>()); }
inline const u64* words(const std::optional<Tensor>& t) { return t.has_value() ? words(*t) : nullptr; }
inline u64* mutable_words(Tensor& t) { return reinterpret_cast<u64*>(t.data_ptr<int64_t>()); }
inline Tensor fresh_like(const Tensor& a) { return at::empty_like(a, at::MemoryFormat::Contiguous); }

// An op other families compose (ops/elementwise.cpp).
Tensor& automorphism_ntt_out(const Tensor& a, const Tensor& moduli, int64_t galois, Tensor& out);

}  // namespace fhe
