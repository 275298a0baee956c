#pragma once
// Matrix products, threaded one way only: OpenMP threads split the output features. Prefill
// (M > kBatchRows): each thread runs one single-threaded OpenBLAS sgemm on its half of the rows
// of w. Decode (M <= kBatchRows): own kernels over 64-row blocks that threads take as they free
// up, reading each weight once for all M rows. One thread pool means no hand-over between
// OpenBLAS's spinning threads and ours.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "attn/runtime.hpp"

namespace attn {

// One nn.Linear: out[M, n] (=|+=) x[M, K] · w[n, K]^T + bias[n]. Bias may be null. w's rows
// lie ldw floats apart (0: K), so a block of w's columns is a projection too.
struct Projection {
  float* out;
  const float* w;
  const float* bias;
  std::int64_t n;
  std::int64_t ldw = 0;
};

// Products with up to this many rows (a decode step of a batch) run the own kernels; more rows
// go to OpenBLAS sgemm. Measured on the 8B layer's shapes (bench/batch_rows.cpp, one thread,
// CPU time on a shared Zen 4): the batched kernel took 0.69x sgemm's time at 32 rows, 0.87x at
// 48, 0.93x at 64. The issue asks for 2..32 rows; beyond, the gain shrinks into the noise.
inline constexpr std::int64_t kBatchRows = 32;

// Floats of the scratch linear() packs x into for M rows of K (the batched kernel's layout).
std::int64_t pack_floats(std::int64_t M, std::int64_t K);

// All projections share the input x [M, K]; they run in one parallel region of rt.threads, each
// thread taking its slice of every weight matrix, so wq/wk/wv (or w1/w3) cost one barrier, not
// three. accumulate: out += product (the residual connection), else out = product.
// pack: pack_floats(M, K) floats of scratch (unused when M is 1 or above kBatchRows).
void linear(const Runtime& rt, std::span<const Projection> projections, const float* x,
            std::int64_t M, std::int64_t K, float* pack, bool accumulate = false);

// Which OpenBLAS kernels were loaded, e.g. "Haswell" (from openblas_get_corename).
std::string blas_core();

// The instruction sets of the own kernels this CPU can run ("avx512", "avx2", "generic"), best
// first, whatever the build's -march: a Runtime picks one.
std::vector<std::string> matmul_isas();

// How the products run, for reports: e.g. "OpenMP x single-threaded OpenBLAS sgemm/sgemv".
std::string matmul_path(const Runtime& rt);

}  // namespace attn
