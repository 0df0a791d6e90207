// CPU samplers: the same ChaCha20 block-to-element mapping as the CUDA kernels, so both builds
// produce identical polynomials for the same (key, nonce).
#include <ATen/Parallel.h>

#include "../kernels.h"
#include "parallel.h"

namespace fhe::cpu {

void sample(const SampleArgs& a) {
  if (a.kind == SampleKind::kUniform) {
    const int64_t total = a.limbs * a.n;  // N >= 4, so blocks never straddle limbs
    at::parallel_for(0, total / kUniformPerBlock, parallel_grain(kUniformPerBlock), [&](int64_t begin, int64_t end) {
      u32 w[16];
      for (int64_t blk = begin; blk < end; ++blk) {
        chacha20_block(a.key, static_cast<u64>(blk), a.nonce, w);
        const int64_t e0 = blk * kUniformPerBlock;
        const Modulus& m = a.moduli[e0 / a.n];
        for (int k = 0; k < kUniformPerBlock; ++k) a.out[e0 + k] = uniform_from_words(w + 4 * k, m);
      }
    });
    return;
  }
  at::parallel_for(0, a.n / kSmallPerBlock, parallel_grain(kSmallPerBlock * a.limbs), [&](int64_t begin, int64_t end) {
    u32 w[16];
    for (int64_t blk = begin; blk < end; ++blk) {
      chacha20_block(a.key, static_cast<u64>(blk), a.nonce, w);
      for (int k = 0; k < kSmallPerBlock; ++k) {
        const int64_t v = a.kind == SampleKind::kCenteredBinomial
                              ? cbd_from_words(w[2 * k], w[2 * k + 1], a.eta)
                              : ternary_from_words(w[2 * k], w[2 * k + 1]);
        const int64_t i = blk * kSmallPerBlock + k;
        for (int l = 0; l < a.limbs; ++l) a.out[l * a.n + i] = from_signed(v, a.moduli[l].value);
      }
    }
  });
}

void sample_fixed_weight(const FixedWeightArgs& a) {
  sample_fixed_weight_ternary(a.key, a.nonce, static_cast<u32>(a.n), static_cast<u32>(a.hamming_weight),
                              a.scratch);
  at::parallel_for(0, a.limbs, parallel_grain(a.n), [&](int64_t begin, int64_t end) {
    for (int64_t l = begin; l < end; ++l) {
      const u64 q = a.moduli[l].value;
      for (int64_t i = 0; i < a.n; ++i) a.out[l * a.n + i] = from_signed(a.scratch[i], q);
    }
  });
}

}  // namespace fhe::cpu
