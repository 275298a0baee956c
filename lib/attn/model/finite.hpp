#pragma once
// NaN and Inf: refused once where values come in (weights, input), and caught where they first
// appear in a run (the residual stream after each layer), instead of spreading to every output.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "attn/matrix.hpp"

namespace attn {

// Index of the first NaN or Inf in p[0:n], or -1.
std::int64_t first_non_finite(const float* p, std::int64_t n);

// Throws InputError "source: tensor 'name': nan at index i (of n)" if p[0:n] holds one.
void check_finite(const float* p, std::int64_t n, const std::string& source,
                  const std::string& name);

// The same for a [rows, cols] matrix of any weight type (BF16 and F16 checked on their bits),
// dense or strided; the index named is the flat one in [rows, cols].
void check_finite(const Matrix& m, std::int64_t rows, std::int64_t cols, const std::string& source,
                  const std::string& name);

// A value that became NaN or Inf during the run: exit status 1, the trace so far kept.
struct NonFiniteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace attn
