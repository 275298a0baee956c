#pragma once
// The one place a size read from a file (or from the user) is multiplied or added: every reader
// (GGUF, safetensors, llama2.c, sessions, the dumps diff reads) and the memory count compute
// their byte sizes, element counts and offsets here, so a product that wraps past 2^64 is
// impossible by construction; each caller says, in its own message, which tensor or key it was.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>

namespace attn {

// a * b + c, or nothing when it does not fit 64 bits.
constexpr std::optional<std::uint64_t> mul_add(std::uint64_t a, std::uint64_t b,
                                               std::uint64_t c = 0) {
  std::uint64_t p = 0;
  if (__builtin_mul_overflow(a, b, &p) || __builtin_add_overflow(p, c, &p)) return std::nullopt;
  return p;
}

// a + b, or nothing when it does not fit 64 bits.
constexpr std::optional<std::uint64_t> add_size(std::uint64_t a, std::uint64_t b) {
  return mul_add(a, 1, b);
}

// The product of sizes, folded left to right (so [2^40, 2^40, 0] wraps although its product is
// 0, as safetensors' reference reader counts), or nothing on a wrap or a negative factor.
constexpr std::optional<std::uint64_t> size_product(std::span<const std::int64_t> factors) {
  std::optional<std::uint64_t> n = 1;
  for (const std::int64_t f : factors) {
    if (f < 0) return std::nullopt;
    n = mul_add(*n, std::uint64_t(f));
    if (!n) return std::nullopt;
  }
  return n;
}
constexpr std::optional<std::uint64_t> size_product(std::initializer_list<std::int64_t> factors) {
  return size_product(std::span<const std::int64_t>(factors.begin(), factors.size()));
}

// A sum of products that stays wrapped once it has wrapped: for sizes made of many terms (a
// llama2.c checkpoint's, from its header).
class SizeSum {
 public:
  // Adds the product of `factors`.
  constexpr void add(std::initializer_list<std::int64_t> factors) {
    const std::optional<std::uint64_t> p = size_product(factors);
    const std::optional<std::uint64_t> s = p ? add_size(n_, *p) : std::nullopt;
    wrapped_ |= !s;
    n_ = s.value_or(0);
  }
  // The sum, or nothing when any term or the sum wrapped.
  constexpr std::optional<std::uint64_t> value() const {
    return wrapped_ ? std::nullopt : std::optional<std::uint64_t>(n_);
  }

 private:
  std::uint64_t n_ = 0;
  bool wrapped_ = false;
};

}  // namespace attn
