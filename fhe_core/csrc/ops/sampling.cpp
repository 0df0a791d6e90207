// The samplers: uniform residues, centred binomial errors and ternary secrets (i.i.d. or of fixed Hamming weight),
// from a ChaCha20 key and nonce.
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include "common.h"
#include "ops.h"

namespace fhe {

namespace {

ChaChaKey chacha_key(at::IntArrayRef key, const char* op) {
  FHE_CHECK(key.size() == 8, op, ": key must be 8 words of 32 bits, got ", key.size());
  ChaChaKey k{};
  for (int i = 0; i < 8; ++i) {
    FHE_CHECK(key[i] >= 0 && key[i] <= 0xffffffffLL, op, ": key word ", i, " is not a 32-bit value");
    k.w[i] = static_cast<u32>(key[i]);
  }
  return k;
}

Tensor sample_output(const Tensor& moduli, int64_t n, const char* op) {
  check_words(moduli, op, "moduli");
  FHE_CHECK(moduli.dim() == 2 && moduli.size(1) == 4 && moduli.size(0) > 0, op, ": moduli must be [limbs, 4], got ",
            moduli.sizes());
  log2_exact(n, op);
  return at::empty({moduli.size(0), n}, moduli.options());
}

Tensor sample(SampleKind kind, const Tensor& moduli, int64_t n, at::IntArrayRef key, int64_t nonce, int64_t eta,
              const char* op) {
  Tensor out = sample_output(moduli, n, op);
  const SampleArgs args{kind, chacha_key(key, op), static_cast<u64>(nonce), mutable_words(out), moduli_ptr(moduli),
                        static_cast<int>(moduli.size(0)), n, static_cast<int>(eta)};
  FHE_RUN(sample, args, moduli);
  return out;
}

}  // namespace

Tensor sample_uniform(const Tensor& moduli, int64_t n, at::IntArrayRef key, int64_t nonce) {
  return sample(SampleKind::kUniform, moduli, n, key, nonce, 0, "sample_uniform");
}

Tensor sample_cbd(const Tensor& moduli, int64_t n, at::IntArrayRef key, int64_t nonce, int64_t eta) {
  FHE_CHECK(eta >= 1 && eta <= 32, "sample_cbd: eta must be in [1, 32], got ", eta);
  return sample(SampleKind::kCenteredBinomial, moduli, n, key, nonce, eta, "sample_cbd");
}

// hamming_weight 0: i.i.d. uniform over {-1, 0, 1}; else exactly that many nonzero coefficients.
Tensor sample_ternary(const Tensor& moduli, int64_t n, at::IntArrayRef key, int64_t nonce, int64_t hamming_weight) {
  const char* op = "sample_ternary";
  if (hamming_weight == 0) return sample(SampleKind::kTernaryUniform, moduli, n, key, nonce, 0, op);
  Tensor out = sample_output(moduli, n, op);
  FHE_CHECK(hamming_weight >= 0 && hamming_weight <= n, op, ": hamming_weight must be in [0, N], got ",
            hamming_weight);
  Tensor scratch = at::zeros({n}, moduli.options().dtype(at::kChar));
  const FixedWeightArgs args{chacha_key(key, op), static_cast<u64>(nonce), scratch.data_ptr<int8_t>(),
                             mutable_words(out), moduli_ptr(moduli), static_cast<int>(moduli.size(0)), n,
                             hamming_weight};
  FHE_RUN(sample_fixed_weight, args, moduli);
  return out;
}

}  // namespace fhe
