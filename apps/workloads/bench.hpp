#pragma once
// The benchmark behind `attn-cli bench`: the workload (prefill, then decode steps) and, in the
// same run, the machine's limits it is measured against.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "attn/kernels/pool.hpp"
#include "attn/model/model.hpp"

namespace cli {

struct MachineLimits {
  double stream_gbs = 0;       // streaming read of the weights' bytes, all threads: the best
                               // read pattern's 90th percentile, reads taken after the steps
  std::string stream_pattern;  // the read pattern that gave stream_gbs
  double sgemm_gflops = 0;     // OpenBLAS sgemm (its own threads) on the prefill's weight shapes
  double sgemm_seconds = 0;    // for all of them once
  double fma_gflops = 0;       // f32 FMA peak, register-only loop, all threads
  std::string fma_isa;         // "avx512", "avx2" or "generic"
};

// Decode steps of `batch` sequences at once (one row each), timed in the same rounds as batch 1.
struct BatchedDecode {
  std::int64_t batch = 0;
  std::vector<double> step_ms;  // sorted
};

// The batch sizes `attn-cli bench` decodes at, like llama.cpp's batched-bench.
inline const std::vector<std::int64_t> kBenchBatches = {1, 2, 4, 8, 16};

// --compute bf16 against the exact path: one prefill's output both ways on the same model.
struct ComputeError {
  double max_abs = 0;  // the largest |bf16 - exact|
  double max_rel = 0;  // that over the largest |exact|
  double rms_rel = 0;  // RMS of the differences over the RMS of the exact output
};

struct BenchResult {
  std::string weight_type;  // of the matrices: "F32", "BF16" or "F16"
  std::int64_t prefill = 0, steps = 0;
  std::int64_t depth = 0;  // the position of the first decode step
  double prefill_seconds = 0;
  double prefill_gflop = 0;         // matrix products + attention, causal half only
  double prefill_matmul_gflop = 0;  // the weight products alone
  std::vector<double> step_ms;      // sorted
  double weight_bytes = 0;          // read once per decode step
  double kv_cache_bytes = 0;        // the whole preallocated cache
  std::vector<BatchedDecode> batched;
  long peak_rss_kb = 0;
  MachineLimits limits;
  // Model parallel: time in the allreduces (this rank), in the prefill and over all steps.
  double prefill_allreduce_seconds = 0, decode_allreduce_seconds = 0;
  std::optional<ComputeError> compute_error;  // BF16 weights under --compute bf16
  // What each of the Runtime's threads ran (its pool's items and their flops): over the prefill
  // passes, and over the decode steps of batch 1; empty with one thread.
  std::vector<attn::SlotWork> prefill_work, decode_work;
};

double prefill_flops(const attn::ModelArgs& a, std::int64_t bsz, std::int64_t P, bool matmul_only);

// The bench's workload: a prefill of P positions, then N decode steps from position `depth`
// (>= P; P: right after the prefill).
struct BenchShape {
  std::int64_t prefill = 0, steps = 0, depth = 0;
};

// For each model (the same layer with its matrices in different types) in turn: a warm-up and
// the prefill of x [1, P+N, dim]. With depth > P, every model's cache is then filled to `depth`
// positions for every sequence, untimed (fill_depth). Then N decode rounds; in each, every
// model takes one step, a streaming read of its own weights' bytes (limits.stream_gbs, each
// read pattern in turn) and one step at each of `batches` (the caches must hold the largest),
// so that the models and batch sizes are compared in the same moments.
// progress(phase, done, total) is called as the work goes: "warm-up" per model, "prefill" per
// pass and model, "depth" per chunk, "decode" per round.
using BenchProgress = std::function<void(const char* phase, std::int64_t done, std::int64_t total)>;
std::vector<BenchResult> bench_workload(std::span<attn::Transformer* const> models,
                                        const std::vector<float>& x, BenchShape shape,
                                        const std::vector<std::int64_t>& batches = {},
                                        const BenchProgress& progress = {});

// Fills m's cache to `depth` positions for every sequence it holds: prefills of x's first P
// positions at positions 0, P, 2P, .. (the last one shorter), then sequence 0's rows copied into
// the others, as llama-batched-bench -pps shares one prompt. done(chunk, chunks) after each.
void fill_depth(attn::Transformer& m, const std::vector<float>& x, std::int64_t P,
                std::int64_t depth,
                const std::function<void(std::int64_t, std::int64_t)>& done = {});

// OpenBLAS sgemm on the prefill's shapes and the FMA peak, into l.
void measure_limits(const attn::Transformer& m, std::int64_t P, MachineLimits& l);

// The prefill of x's first P positions with m's compute (bf16) and with F32 compute, compared.
ComputeError compute_error(attn::Transformer& m, const std::vector<float>& x, std::int64_t P);

long peak_rss_kb();

}  // namespace cli
