#pragma once
// Matrix products, threaded one way only: the pool's threads split the output features, in blocks
// of weight rows claimed as they finish. Every output is summed in one canonical order (the
// gemv's chains, then one tree: vectors.hpp, kChains) by every kernel, whatever the number of
// rows computed together, the row's place among them or the thread: decode (M = 1) on the gemv,
// batches (M <= kBatchRows) on the batched kernel reading each weight once for all rows, prefill
// on the same batched kernel over x's rows in tiles of up to kBatchRows (docs/design.md, "One
// order per output").
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "attn/kernels/kernels.hpp"
#include "attn/kernels/runtime.hpp"
#include "attn/matrix.hpp"

namespace attn {

// One nn.Linear: out[M, n] (=|+=) x[M, K] · w[n, K]^T + bias[n]. Bias may be null. w's rows
// lie w.ld elements apart (0: K), so a block of a matrix's columns (Matrix::columns) is a
// projection too. w is any weight type (widened to F32 as it is read: the result has the bits
// of the F32-widened product; ggml's blocks a tile at a time, below).
struct Projection {
  float* out;
  Matrix w;
  const float* bias;
  std::int64_t n;
};

// Rows of x per batched product: a decode batch of up to this many rows is one; a prefill is
// tiles of up to this many rows.
inline constexpr std::int64_t kBatchRows = 32;

// Weight rows per item of a prefill (more than kBatchRows rows of x) of quantized blocks: the
// item's rows stay in L2 while x's tiles pass over them (docs/perf/batch-invariance.md). F32,
// BF16 and F16 weights go the other way: an item is one tile of x against kGemvRows rows, the
// tile staying in L2 while the rows stream (matmul.cpp, linear_tiles).
inline constexpr std::int64_t kPrefillRows = 16;

// Floats linear() packs x into for M rows of K: the batched kernel's layout, tile by tile, or for
// one row x deinterleaved for the BF16 gemv.
std::int64_t pack_floats(std::int64_t M, std::int64_t K);

// Floats of scratch linear() needs for any call of up to max_rows rows of up to k_max features
// on `threads` threads: the packed rows; with compute bf16, the BF16 GEMM's panels and x rounded
// to BF16 besides. The weight type and the kernel set do not change it: no weight is widened
// outside the kernels' registers and L1 buffers.
std::int64_t scratch_floats(std::int64_t max_rows, std::int64_t k_max, int threads,
                            Compute compute = Compute::f32);

// All projections share the input x [M, K]; they run in one parallel region of rt.threads, each
// thread taking its slice of every weight matrix, so wq/wk/wv (or w1/w3) cost one barrier, not
// three. accumulate: out += product (the residual connection), else out = product.
// scratch: scratch_floats(M, K, rt.threads, rt.compute) floats. BF16
// weights under rt.compute bf16 run the BF16 kernels (detail/bf16_dot.hpp); the rest exactly.
void linear(const Runtime& rt, std::span<const Projection> projections, const float* x,
            std::int64_t M, std::int64_t K, float* scratch, bool accumulate = false);

// Decode attention's two products for one KV head and one query position, on the calling thread
// with rt.kernels: every key and value row is read once for the group's n query heads.
// s[h * keys + j] = scale * (q[h] . k[j]), with q [n, hd] and k [keys, hd].
void group_scores(const Runtime& rt, const float* q, std::int64_t n, const float* k,
                  std::int64_t keys, std::int64_t hd, float scale, float* s);
// out[h * hd + :] = sum over j of p[h * keys + j] v[j], with p [n, keys] and v [keys, hd].
void group_mix(const Runtime& rt, const float* p, std::int64_t n, const float* v, std::int64_t keys,
               std::int64_t hd, float* out);

// out[rows, K] = w[rows, K] widened to F32 by rt.kernels, as the products widen it.
void widen_to_f32(const Runtime& rt, const Matrix& w, std::int64_t rows, std::int64_t K,
                  float* out);

// Which OpenBLAS kernels were loaded, e.g. "Haswell" (from openblas_get_corename); "not loaded"
// when nothing in this process has opened OpenBLAS. No product or attention runs on it (their
// sums would depend on the rows computed together: docs/design.md, "One order per output"); only
// `bench`'s sgemm probe (probe.hpp) opens it.
std::string blas_core();

// How the products run, for reports: the pool's threads, the kernel set, the paths by rows.
std::string matmul_path(const Runtime& rt);

}  // namespace attn
