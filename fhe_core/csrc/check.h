// FHE_CHECK: TORCH_CHECK with a message built from std::string and std::to_string only.
//
// Why not TORCH_CHECK(cond, "x = ", x) directly: that streams the arguments through a
// std::ostringstream instantiated in this extension, and on some toolchains streaming an integer
// from extension code crashes the process (seen on the lent H200 image, torch 2.11 with g++ 13.3:
// a minimal load_inline extension crashes the same way). A single ready-made std::string goes
// through TORCH_CHECK without any stream.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>

#include <string>
#include <type_traits>

namespace fhe {

inline void append(std::string& s, const char* v) { s += v; }
inline void append(std::string& s, const std::string& v) { s += v; }
inline void append(std::string& s, const c10::Device& d) { s += d.str(); }
inline void append(std::string& s, c10::ScalarType t) { s += c10::toString(t); }
inline void append(std::string& s, c10::IntArrayRef v) {
  s += "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  s += "]";
}
template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
void append(std::string& s, T v) {
  s += std::to_string(v);
}

template <class... Args>
std::string message(const Args&... args) {
  std::string s;
  (append(s, args), ...);
  return s;
}

}  // namespace fhe

#define FHE_CHECK(cond, ...) TORCH_CHECK(cond, ::fhe::message(__VA_ARGS__))
