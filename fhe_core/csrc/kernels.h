// The kernel interface between the torch glue (ops/) and the two backends (cpu/, cuda/), one section per op family.
//
// Argument structs hold raw pointers and sizes only, so the backends never include torch's tensor headers (the CPU
// backend uses only ATen/Parallel.h for its thread pool, and the CUDA sources compile with nvcc alone). The glue
// validates every tensor before filling a struct; the backends may assume shapes, dtypes and devices are consistent.
// Residue pointers address contiguous limb-major data: element (r, i) of a [rows, N] view is at r * N + i, and the
// limb of row r is r % limbs. Each backend implements every feature of a struct (the CPU by composing its kernels).
#pragma once

#include <cstdint>

#include "common/modarith.h"
#include "common/sampling.h"
#include "plan.h"

namespace fhe {

namespace cuda {
// The launchers enqueue on the given stream of the given device and throw std::runtime_error on a CUDA error.
struct Stream {
  void* handle;  // cudaStream_t
  int device;
};
}  // namespace cuda

// A kernel of both backends: cpu::name(args) and cuda::name(args, stream).
#define FHE_KERNEL(name, Args)                \
  namespace cpu {                             \
  void name(const Args& args);                \
  }                                           \
  namespace cuda {                            \
  void name(const Args& args, Stream stream); \
  }

// ---- NTT (cpu/ntt.cpp, cuda/ntt.cu) --------------------------------------------------------------------

// Rows an NTT leaves alone (their output is not written): in batch b (row / limbs), the rows r (row % limbs) with
// begin + b * stride <= r < begin + b * stride + length. ModUp transforms every extended digit but its own rows.
struct NttSkip {
  int begin = 0;
  int stride = 0;
  int length = 0;  // 0: transform every row
};

FHE_HD bool ntt_row_skipped(const NttSkip& skip, int64_t row, int limbs) {
  const int64_t rel = row % limbs - skip.begin - (row / limbs) * skip.stride;
  return rel >= 0 && rel < skip.length;
}

// ModDown's last step in a forward NTT's store: out = (sub_from - NTT(in)) * consts per limb (Shoup), sub_from row
// (b, i) at b * batch_stride + i * N, plus sigma_add_galois(add[b]) for the first add_batches batches.
struct NttEpilogue {
  const u64* sub_from = nullptr;  // nullptr: plain NTT
  int64_t batch_stride = 0;
  const u64* consts = nullptr;        // [limbs]
  const u64* consts_shoup = nullptr;  // [limbs]
  const u64* add = nullptr;           // [add_batches, limbs, N] or nullptr
  int64_t add_batches = 0;
  u64 add_galois = 1;  // (NTT domain: slot i reads galois_ntt_source(i))
};

struct NttArgs {
  const u64* in;
  u64* out;               // may equal in
  const Modulus* moduli;  // [limbs]
  const u64* table;       // [limbs, table_rows, N], rows as in common/ntt.h
  int64_t rows;           // batch * limbs
  int limbs;
  int log_n;
  NttSkip skip = {};
  NttEpilogue epilogue = {};    // forward only
  int64_t in_batch_stride = 0;  // words between batches of `in` (0: contiguous, batch * limbs * N)
  int table_rows = 8;           // rows per limb of `table`: 12 (CUDA tables), 4 or 12 (CPU)
  // Inverse only, galois != 1: transform sigma_k(in) and store sigma_k(in) to `permuted` ([rows, N]). A rotation's
  // ModUp. store_permuted false: the caller does not need it (the tuned kernel then skips the store).
  u64 galois = 1;
  u64* permuted = nullptr;
  bool store_permuted = true;
  // Inverse only, times != nullptr (galois = 1): transform in * times and store the products to `permuted`. HMult's
  // ModUp of d2 = a1 b1.
  const u64* times = nullptr;
  KernelPlan plan = {};  // which kernels run (CUDA)
};

// Where row r of an NTT's input starts (in words from `in`).
FHE_HD int64_t ntt_in_offset(const NttArgs& a, int64_t row) {
  const int64_t n = int64_t{1} << a.log_n;
  return a.in_batch_stride == 0 ? row * n : (row / a.limbs) * a.in_batch_stride + (row % a.limbs) * n;
}

FHE_KERNEL(ntt_forward, NttArgs)
FHE_KERNEL(ntt_inverse, NttArgs)

// ---- element-wise ops, the tensor product, automorphisms (cpu/elementwise.cpp, cuda/elementwise.cu) -------------

// kSubMulConst: (a - b) * c_i, the shape of ModDown's and rescale's last step.
enum class ElementwiseOp : int { kAdd, kSub, kNeg, kMul, kMulConst, kMulAdd, kSubMulConst };

struct ElementwiseArgs {
  ElementwiseOp op;
  const u64* a;             // [rows, N]
  const u64* b;             // [b_rows, N], b_rows divides rows (broadcast over leading dims)
  const u64* c;             // [rows, N] (kMulAdd only)
  const u64* consts;        // [limbs] (kMulConst, kSubMulConst)
  const u64* consts_shoup;  // [limbs] (kMulConst, kSubMulConst)
  u64* out;                 // [rows, N]
  const Modulus* moduli;    // [limbs]
  int64_t rows;
  int64_t b_rows;
  int limbs;
  int64_t n;
};

// The tensor product of two degree-1 ciphertexts: out = (a0 b0, a0 b1 + a1 b0, a1 b1) mod q_i.
struct TensorProductArgs {
  const u64* a;           // [2, limbs, N]
  const u64* b;           // [2, limbs, N]
  u64* out;               // [3, limbs, N]
  const Modulus* moduli;  // [limbs]
  int limbs;
  int64_t n;
};

struct AutomorphismArgs {
  const u64* in;          // [rows, N]
  u64* out;               // [rows, N], never aliasing in
  const Modulus* moduli;  // [limbs] (coefficient domain needs q for negation)
  int64_t rows;
  int limbs;
  int log_n;
  u64 galois;             // odd k in [1, 2N)
};

FHE_KERNEL(elementwise, ElementwiseArgs)
FHE_KERNEL(tensor_product, TensorProductArgs)
FHE_KERNEL(automorphism_ntt, AutomorphismArgs)
FHE_KERNEL(automorphism_coeff, AutomorphismArgs)

// ---- basis conversion (cpu/conv.cpp, cuda/conv.cu) --------------------------------------------------------

// Fast basis conversion (HK20 / BEHZ "Conv") of one or several digits at once. The input's q_count limbs form dnum
// digits of alpha limbs (the last may be shorter); digit j is converted to every destination prime:
//   out[b][j][r] = sum_k [x_k * qhat_inv_k]_{q_k} * qhat_mod_p[j][k - j*alpha][r]  mod p_r,
// with qhat_inv_k = (Q_j/q_k)^-1 mod q_k and qhat_mod_p = (Q_j/q_k) mod p_r (zero past the last digit's primes).
// One digit of all the limbs is the plain Conv; dnum digits extended to QP_l is ModUp. The result is x + u*Q_j
// (0 <= u < alpha), exact on the digit's own primes. With neg_q_mod_p (one digit only) the conversion is exact and
// centred: v = round(sum_k y_k / q_k) in double precision (conv_rounded_overflow) and v * (-Q) added, so the result
// is the centred representative of x (Halevi-Polyakov-Shoup). ModDown needs it: the fast version's u is never
// negative, and its mean (alpha - 1) / 2 becomes a bias that the CKKS slots near X = 1 amplify ~N times.
struct ConvArgs {
  const u64* in;              // [batch, q_count, N]
  u64* out;                   // [batch, dnum, rows, N]
  const Modulus* src;         // [q_count]
  const Modulus* dst;         // [rows]
  const u64* qhat_inv;        // [q_count]
  const u64* qhat_inv_shoup;  // [q_count]
  const u64* qhat_mod_p;      // [dnum, alpha, rows]
  int64_t batch;
  int q_count;
  int alpha;
  int dnum;
  int rows;
  int64_t n;
  const u64* neg_q_mod_p = nullptr;  // [rows] (-Q) mod p_r: exact centred conversion (dnum == 1); nullptr: fast
  // ModUp (batch 1): digit j's own rows own_begin + j * alpha + k (k < its length) are copied from
  // own[(j * alpha + k) * N + i] (the NTT-domain input, exact on those primes) instead of converted; own_copy false:
  // neither converted nor written (ops.ntt_inner_product reads them from the input itself).
  const u64* own = nullptr;
  int own_begin = 0;
  bool own_copy = true;
  // The caller only needs outputs in [0, 3 p_r) (a forward NTT follows): a kernel may skip its final corrections.
  bool lazy_out = false;
  // The tensor-core kernel's B fragments, precomputed (ops.conv_mma_fragments): [dnum][rows][KT][32][2] words.
  const u32* mma_fragments = nullptr;
  KernelPlan plan = {};  // which kernel runs (CUDA)
};

// k >= 0 when output row r of digit j is the digit's own prime k (see ConvArgs::own), else -1.
FHE_HD int conv_own_index(const ConvArgs& a, int j, int r) {
  if (a.own == nullptr) return -1;
  const int k = r - a.own_begin - j * a.alpha;
  const int count = a.q_count - j * a.alpha < a.alpha ? a.q_count - j * a.alpha : a.alpha;
  return k >= 0 && k < count ? k : -1;
}

// round(sum_k y_k / q_k) over the count scaled residues y_k = [x_k (Q/q_k)^-1]_{q_k} (at y[k * stride]): u for
// x < Q/2 and u + 1 above, so x + (u - v) Q is the centred representative of x. Each quotient and sum is correctly
// rounded in double on both targets (explicit _rn intrinsics on the device, which nvcc cannot contract into FMAs):
// the builds agree bit for bit. The sum is within count * 2^-52 of the exact rational, so v can differ from the
// exact rounding only for x that close to Q/2, where either representative is a correct rounding.
FHE_HD u64 conv_rounded_overflow(const u64* y, int64_t stride, const Modulus* src, int count) {
  double sum = 0.5;
  for (int k = 0; k < count; ++k) {
#if defined(__CUDA_ARCH__)
    sum = __dadd_rn(sum, __ddiv_rn(__ull2double_rn(y[k * stride]), __ull2double_rn(src[k].value)));
#else
    sum += static_cast<double>(y[k * stride]) / static_cast<double>(src[k].value);
#endif
  }
  return static_cast<u64>(sum);  // sum > 0: truncation is the floor of (exact sum + 1/2)
}

// Centred lift of one limb into other primes: out[b][i] = (x if x <= q/2 else x - q) mod p_i for x = in[b]
// canonical mod q. The exact rounding step of rescaling (and of any division by q).
struct CenterLiftArgs {
  const u64* in;          // [batch, N] residues mod q
  u64* out;               // [batch, l_out, N]
  Modulus src;            // q
  const Modulus* dst;     // [l_out]
  int64_t batch;
  int l_out;
  int64_t n;
};

FHE_HD u64 center_lift_one(u64 x, const Modulus& src, const Modulus& dst) {
  const u64 r = reduce128(U128{x, 0}, dst);
  return x <= src.value / 2 ? r : sub_mod(r, reduce128(U128{src.value, 0}, dst), dst.value);
}

FHE_KERNEL(conv, ConvArgs)
FHE_KERNEL(center_lift, CenterLiftArgs)

// ---- key switching (cpu/keyswitch.cpp, cuda/keyswitch.cu) ----------------------------------------------------

// The key-switching inner product (HK20): out[c][i] = sum_j digits[j][i] * key[j][c][row(i)] mod q_i for c = 0, 1,
// accumulated in 128 bits and reduced once. The digits live over Q_l u P (q_count limbs of Q, then the special
// primes), the key over Q_L u P: row(i) = i for i < q_count and p_row + (i - q_count) for the special primes.
struct KsInnerProductArgs {
  const u64* digits;  // [dnum_used, limbs, N]
  const u64* key;     // [dnum_key, 2, key_rows, N]
  u64* out;           // [2, limbs, N]
  const Modulus* moduli;  // [limbs]
  int dnum;           // digits used (<= dnum_key)
  int limbs;
  int q_count;
  int64_t p_row;
  int64_t key_rows;
  int64_t n;
};

FHE_HD int64_t ks_key_row(int limb, int q_count, int64_t p_row) {
  return limb < q_count ? limb : p_row + (limb - q_count);
}

// ModUp's forward NTT and the inner product as one op: out = ks_inner_product(NTT(digits)), ntt.skip the digits'
// own rows (already in the NTT domain). ntt.in == ntt.out == ip.digits, which is scratch afterwards. On CUDA (the
// tuned plan) one kernel runs the rows' last stages and multiplies into the keys: the transformed digits never go to
// memory.
struct NttInnerProductArgs {
  NttArgs ntt;            // rows = dnum * limbs, in place
  KsInnerProductArgs ip;  // ip.digits == ntt.out; ip.out: [2, limbs, N]
  // nullptr: the skipped rows are read from the digits; else limb i's from own row i - ntt.skip.begin (ModUp's input
  // d), through sigma_own_galois when own_galois != 1. Only where cuda::ntt_inner_product_fuses.
  const u64* own = nullptr;
  u64 own_galois = 1;
  // Only where cuda::ntt_inner_product_takes_tensor: HMult's operands a, b ([2, limbs - skip.begin, N], NTT domain
  // over Q_l) and p_mod_q ([limbs - skip.begin]: P mod q_i). Component c of out gets (P mod q_i) * t_c on its Q rows
  // (t_0 = a0 b0, t_1 = a0 b1 + a1 b0): ModDown of out then leaves its plain result + t_c, the tensor terms of
  // relinearize(tensor(a, b)) without a pass of their own.
  const u64* tensor_a = nullptr;
  const u64* tensor_b = nullptr;
  const u64* p_mod_q = nullptr;
};

FHE_KERNEL(ks_inner_product, KsInnerProductArgs)
FHE_KERNEL(ntt_inner_product, NttInnerProductArgs)  // (the CPU: own and tensor_a never set)
namespace cuda {
bool ntt_inner_product_fuses(const NttInnerProductArgs& args);         // the fused kernel runs (reads `own`)
bool ntt_inner_product_takes_tensor(const NttInnerProductArgs& args);  // the digit-group kernel runs (adds terms)
}  // namespace cuda

// ---- fused passes of the bootstrapping circuit (cpu/fused.cpp, cuda/fused.cu) ---------------------------------

// The key-switching inner product with its neighbours in the same pass:
//   out[c][i][x] = [accumulate] out[c][i][x] + sum_j digits[j][i][g(x)] * key[j][c][row(i)][x]
//                  + [c == 0 and i >= limbs - add_rows] add[i - (limbs - add_rows)][h(x)]   mod q_i,
// with g, h the NTT-domain automorphisms of `galois` and `add_galois` (1: the identity). A double-hoisted baby step
// is the permuted digits' product plus P sigma(c_0) on the Q rows; a giant step adds sigma(acc_0) over QP_l.
struct KsInnerProductFusedArgs {
  KsInnerProductArgs base;  // base.out: component 0
  int64_t out_stride;       // words from output component 0 to component 1
  u64 galois;
  const u64* add;           // [add_rows, N] or nullptr
  int add_rows;
  u64 add_galois;
  bool accumulate;
  int log_n;
};

// out[b][i][x] = sum_k weights[k][i][x >= N/2] * terms[k][b][i][x] (+ constant[i][x >= N/2] for the components
// b < constant_components) mod q_i, accumulated in 128 bits and reduced once. The weights are the NTT-domain values
// of constants re + im X^(N/2) (two per limb: the two halves of the NTT slots). Term k's component b, row i is at
// terms[k] + b * term_stride[k] + i * N: a ciphertext at a higher level is read in place.
constexpr int kMaxCombinationTerms = 16;
struct LinearCombinationArgs {
  const u64* terms[kMaxCombinationTerms];
  int64_t term_stride[kMaxCombinationTerms];
  int count;
  const u64* weights;       // [count, limbs, 2], canonical
  const u64* constant;      // [limbs, 2] canonical, or nullptr
  int constant_components;
  u64* out;                 // component b at out + b * out_stride
  const Modulus* moduli;    // [limbs]
  int64_t batch;
  int limbs;
  int64_t n;
  int64_t out_stride;
};

// The plaintext products of up to kMaxGiants giant steps of a BSGS linear transform in one pass over the baby steps:
// out[c][g][i][x] = sum_j pts[g][index[g][j]][i][x] * babies[j][c][i][x] mod q_i over the baby positions j with
// index[g][j] >= 0, each baby word read once for every giant of the launch.
constexpr int kMaxGiants = 4;
constexpr int kMaxBabies = 32;
struct GiantProductsArgs {
  const u64* babies;                        // [n_babies, 2, limbs, N]
  const u64* pts[kMaxGiants];               // giant g: [m_g, limbs, N]
  int8_t index[kMaxGiants][kMaxBabies];     // plaintext of giant g for baby position j, or -1
  int giants;
  int n_babies;
  u64* out;                                 // component c of giant g at out + c * out_stride + g * limbs * N
  int64_t out_stride;
  const Modulus* moduli;                    // [limbs]
  int limbs;
  int64_t n;
};

// Two digit sets against one key (the relinearizations of a batched pair), each key word read once for both.
// base.digits: set 0; base.out: [2 (component), 2 (set), limbs, N].
struct KsInnerProductPairArgs {
  KsInnerProductArgs base;
  const u64* digits_b;  // set 1, base.digits' shape
};

// The double-hoisted baby steps of a linear transform in one launch: out_b = the ks_inner_product_fused of the
// shared digits read through sigma_b with keys[b], plus sigma_b(add) on the last add_rows rows of component 0. One
// thread walks the babies in turn, so the digit rows of its limb come from L2 after the first baby.
constexpr int kMaxBabySteps = 16;
struct KsInnerProductBabiesArgs {
  KsInnerProductArgs base;                // digits, moduli and sizes (base.key, base.out: unused)
  const u64* keys[kMaxBabySteps];         // [>= dnum, 2, key_rows, N] each
  u64* outs[kMaxBabySteps];               // [2, limbs, N] each (contiguous)
  u64 galois[kMaxBabySteps];
  int count;
  const u64* add;                         // [add_rows, N] or nullptr
  int add_rows;
  int log_n;
};

FHE_KERNEL(ks_inner_product_fused, KsInnerProductFusedArgs)
FHE_KERNEL(linear_combination, LinearCombinationArgs)
FHE_KERNEL(giant_products, GiantProductsArgs)
FHE_KERNEL(ks_inner_product_pair, KsInnerProductPairArgs)
FHE_KERNEL(ks_inner_product_babies, KsInnerProductBabiesArgs)

// ---- sampling (cpu/sampling.cpp, cuda/sampling.cu) -----------------------------------------------------------

enum class SampleKind : int { kUniform, kCenteredBinomial, kTernaryUniform };

struct SampleArgs {
  SampleKind kind;
  ChaChaKey key;
  u64 nonce;
  u64* out;               // [limbs, N]
  const Modulus* moduli;  // [limbs]
  int limbs;
  int64_t n;
  int eta;                // kCenteredBinomial only
};

struct FixedWeightArgs {
  ChaChaKey key;
  u64 nonce;
  int8_t* scratch;        // [N] zeros on entry, the signed coefficients on exit
  u64* out;               // [limbs, N]
  const Modulus* moduli;  // [limbs]
  int limbs;
  int64_t n;
  int64_t hamming_weight;
};

FHE_KERNEL(sample, SampleArgs)
FHE_KERNEL(sample_fixed_weight, FixedWeightArgs)

}  // namespace fhe
