// Scalar helpers of the portable CPU paths (every CPU; the IFMA paths are in ifma.h): sums of 64 x 64-bit products
// kept as the compiler's native 128-bit integers (one multiply and an add-with-carry per term), reduced once.
#pragma once

#include "../common/modarith.h"

namespace fhe::cpu {

using u128 = unsigned __int128;

// A sum of products below 2^128, canonical modulo m (common/modarith.h's Barrett reduction).
inline u64 reduce_sum(u128 sum, const Modulus& m) {
  return reduce128(U128{static_cast<u64>(sum), static_cast<u64>(sum >> 64)}, m);
}

}  // namespace fhe::cpu
