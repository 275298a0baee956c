#pragma once
// Matrix products, threaded one way only: OpenMP threads split the output features. Prefill
// (M > kBatchRows): each thread takes its half of the rows of w, on the own AVX-512 GEMM
// (gemm.hpp) where the CPU has it, else on single-threaded OpenBLAS sgemm. Decode (M <=
// kBatchRows): own kernels over 64-row blocks that threads take as they free up, reading each
// weight once for all M rows. One thread pool means no hand-over between OpenBLAS's spinning
// threads and ours.
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

// Products with up to this many rows (a decode step of a batch) run the own kernels; more rows
// go to the prefill GEMM: up to here the batched kernel is the faster (bench_batch_rows;
// docs/perf/kernels.md).
inline constexpr std::int64_t kBatchRows = 32;

// Without AVX-512, prefill widens BF16 and F16 weights into a buffer per thread (sgemm takes F32
// only), a block of widen_rows(K) rows (this many floats, or 16 rows if more) at a time: 4 MB, as
// fast as larger blocks (docs/perf/kernels.md). F32 goes in the same blocks (see prefill_product).
inline constexpr std::int64_t kWidenFloats = std::int64_t(1) << 20;
std::int64_t widen_rows(std::int64_t K);

// A quantized matrix (ggml's blocks) is read in place. Decode multiplies the blocks themselves
// (gemv, batched, lanes kernels); prefill on the own GEMM widens tile_rows(K) of its rows at a
// time (whole 48-feature panels, up to a 192-feature block, in kWidenFloats) into a tile of the
// calling thread, exactly as traits' to_f32 does, and runs the GEMM on it, whose bits do not
// depend on how the rows are split: the bits of the F32 product over the dequantized matrix.
std::int64_t tile_rows(std::int64_t K);
// A thread's tile: at least tile_rows(K) * K floats, growing with K.
std::int64_t tile_floats(std::int64_t K);

// Floats linear() packs x into for M rows of K: the batched kernel's layout (or, from
// kLanesFrom rows, the larger of it and x's rows in lanes), or for one row x deinterleaved for
// the BF16 gemv.
std::int64_t pack_floats(std::int64_t M, std::int64_t K);

// Floats of scratch linear() needs for any call of up to max_rows rows of up to k_max features
// on `threads` threads with `kernels`: the packed rows, and
// the GEMM's panels or, without it and with weights other than F32 (halves), the widening
// buffers; with compute bf16, x rounded to BF16 besides; with quantized weights (blocks), each
// thread's tile after all of it.
std::int64_t scratch_floats(std::int64_t max_rows, std::int64_t k_max, int threads, bool halves,
                            bool blocks, const Kernels& kernels, Compute compute = Compute::f32);

// All projections share the input x [M, K]; they run in one parallel region of rt.threads, each
// thread taking its slice of every weight matrix, so wq/wk/wv (or w1/w3) cost one barrier, not
// three. accumulate: out += product (the residual connection), else out = product.
// scratch: scratch_floats(M, K, rt.threads, halves, blocks, *rt.kernels, rt.compute) floats. BF16
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
// when no product of this process has needed OpenBLAS, which is opened on first use.
std::string blas_core();

// OpenBLAS is opened on the first product that needs it, once per process (docs/perf/startup.md).
// A caller that times a forward pass over `positions` positions of `batch` sequences from
// start_pos calls this first, so the opening is not timed as part of it: attention over 2 or more
// rows is an sgemm past a size (attention_on_blas), and so are the products of more than
// kBatchRows rows without the own GEMM.
void open_blas_for(const Runtime& rt, std::int64_t batch, std::int64_t positions,
                   std::int64_t start_pos, std::int64_t head_dim);

// How the products run, for reports: e.g. "OpenMP x single-threaded OpenBLAS sgemm/sgemv".
std::string matmul_path(const Runtime& rt);

}  // namespace attn
