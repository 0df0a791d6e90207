// ChaCha20 counter-mode stream and the samplers built on it, shared by the CPU and CUDA builds.
//
// The stream is the ChaCha20 block function (RFC 8439, 20 rounds) with a 64-bit block counter in
// state words 12-13 and a 64-bit nonce in words 14-15. Word w of the stream is word (w mod 16)
// of block floor(w / 16). Every sampler reads fixed word positions, so a (key, nonce) pair
// determines its output on any device and with any launch shape. Callers must never use the
// same (key, nonce) for two different polynomials.
#pragma once

#include "modarith.h"

namespace fhe {

struct ChaChaKey {
  u32 w[8];  // the 32-byte key as little-endian words
};

FHE_HD u32 rotl32(u32 x, int r) { return (x << r) | (x >> (32 - r)); }

FHE_HD void chacha_quarter_round(u32& a, u32& b, u32& c, u32& d) {
  a += b; d ^= a; d = rotl32(d, 16);
  c += d; b ^= c; b = rotl32(b, 12);
  a += b; d ^= a; d = rotl32(d, 8);
  c += d; b ^= c; b = rotl32(b, 7);
}

// One 64-byte block: out[16] = ChaCha20(key, counter, nonce).
FHE_HD void chacha20_block(const ChaChaKey& key, u64 counter, u64 nonce, u32 out[16]) {
  u32 s[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u,
               key.w[0], key.w[1], key.w[2], key.w[3], key.w[4], key.w[5], key.w[6], key.w[7],
               static_cast<u32>(counter), static_cast<u32>(counter >> 32),
               static_cast<u32>(nonce), static_cast<u32>(nonce >> 32)};
  u32 x[16];
  for (int i = 0; i < 16; ++i) x[i] = s[i];
  for (int round = 0; round < 10; ++round) {
    chacha_quarter_round(x[0], x[4], x[8], x[12]);
    chacha_quarter_round(x[1], x[5], x[9], x[13]);
    chacha_quarter_round(x[2], x[6], x[10], x[14]);
    chacha_quarter_round(x[3], x[7], x[11], x[15]);
    chacha_quarter_round(x[0], x[5], x[10], x[15]);
    chacha_quarter_round(x[1], x[6], x[11], x[12]);
    chacha_quarter_round(x[2], x[7], x[8], x[13]);
    chacha_quarter_round(x[3], x[4], x[9], x[14]);
  }
  for (int i = 0; i < 16; ++i) out[i] = x[i] + s[i];
}

FHE_HD u64 join_words(u32 lo, u32 hi) { return static_cast<u64>(lo) | (static_cast<u64>(hi) << 32); }

FHE_HD int popcount64(u64 x) {
#if defined(__CUDA_ARCH__)
  return __popcll(x);
#else
  return __builtin_popcountll(x);
#endif
}

// ---- per-element samplers (parallel: element e reads fixed stream words) ---------------------

// Uniform residue from stream words 4e..4e+3: 128 random bits reduced mod q (bias < 2^-67).
constexpr int kUniformPerBlock = 4;
FHE_HD u64 uniform_from_words(const u32* w, const Modulus& m) {
  return reduce128(U128{join_words(w[0], w[1]), join_words(w[2], w[3])}, m);
}

// Centered binomial with parameter eta <= 32 from stream words 2e, 2e+1: variance eta / 2.
constexpr int kSmallPerBlock = 8;
FHE_HD int64_t cbd_from_words(u32 w0, u32 w1, int eta) {
  const u64 mask = (eta >= 32) ? 0xffffffffull : ((u64{1} << eta) - 1);
  return static_cast<int64_t>(popcount64(w0 & mask)) - popcount64(w1 & mask);
}

// Uniform ternary {-1, 0, 1} from stream words 2e, 2e+1 (bias < 2^-63).
FHE_HD int64_t ternary_from_words(u32 w0, u32 w1) {
  return static_cast<int64_t>(join_words(w0, w1) % 3) - 1;
}

// ---- sequential stream reader (for samplers that cannot run element-parallel) ----------------

struct ChaChaStream {
  ChaChaKey key;
  u64 nonce;
  u64 next_block;
  int pos;  // next word in buf; 16 = empty
  u32 buf[16];

  FHE_HD ChaChaStream(const ChaChaKey& k, u64 n) : key(k), nonce(n), next_block(0), pos(16) {}

  FHE_HD u64 next_u64() {
    if (pos >= 16) {
      chacha20_block(key, next_block++, nonce, buf);
      pos = 0;
    }
    const u64 v = join_words(buf[pos], buf[pos + 1]);
    pos += 2;
    return v;
  }

  // Uniform in [0, bound) by rejection (exact), bound >= 1.
  FHE_HD u64 below(u64 bound) {
    const u64 threshold = (0 - bound) % bound;  // 2^64 mod bound
    u64 x = next_u64();
    while (x < threshold) x = next_u64();
    return x % bound;
  }
};

// Ternary polynomial with exactly h nonzero coefficients (each +-1 with probability 1/2) by
// Floyd's subset sampling; `out` holds n zero bytes on entry. Sequential by nature: one thread.
FHE_HD void sample_fixed_weight_ternary(const ChaChaKey& key, u64 nonce, u32 n, u32 h,
                                        int8_t* out) {
  ChaChaStream stream(key, nonce);
  for (u32 j = n - h; j < n; ++j) {
    const u32 t = static_cast<u32>(stream.below(static_cast<u64>(j) + 1));
    const u32 pos = out[t] != 0 ? j : t;
    out[pos] = (stream.next_u64() & 1) ? int8_t{1} : int8_t{-1};
  }
}

}  // namespace fhe
