#pragma once
// A counter-based generator: value i of stream s depends only on (seed, s, i), so tensors are
// the same whatever the thread count and can be filled in parallel.
#include <cmath>
#include <cstdint>

namespace attn {

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The key of stream `stream` under `seed`: a loop over one stream computes it once.
inline std::uint64_t stream_key(std::uint64_t seed, std::uint64_t stream) {
  return splitmix64(seed ^ splitmix64(stream));
}

// Value i of the stream with this key, uniform in [-1, 1).
inline float uniform_pm1_keyed(std::uint64_t key, std::uint64_t i) {
  const std::uint64_t bits = splitmix64(key + i);
  return float(double(bits >> 40) * (2.0 / double(1ull << 24)) - 1.0);
}

// Uniform in [-1, 1).
inline float uniform_pm1(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  return uniform_pm1_keyed(stream_key(seed, stream), i);
}

// Standard normal (Box-Muller on two uniforms).
inline float normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t i) {
  const std::uint64_t a = splitmix64(splitmix64(seed ^ splitmix64(stream)) + 2 * i);
  const std::uint64_t b = splitmix64(splitmix64(seed ^ splitmix64(stream)) + 2 * i + 1);
  const double u1 = (double(a >> 11) + 1.0) / double(1ull << 53);
  const double u2 = double(b >> 11) / double(1ull << 53);
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

}  // namespace attn
