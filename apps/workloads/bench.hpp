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
  double stream_spread = 0;    // that pattern's reads: (p90 - p10) / p90 over the rounds
  double sgemm_gflops = 0;     // OpenBLAS sgemm (its own threads) on the prefill's weight shapes
  double sgemm_seconds = 0;    // for all of them once
  double fma_gflops = 0;       // f32 FMA peak, register-only loop, all threads: the best probe
  std::string fma_isa;         // "avx512", "avx2" or "generic"
  // The FMA peak probed before and after the timed work (each the best of its rounds): a busy
  // moment shows as a spread, (best - worst) / best.
  std::vector<double> fma_samples;
  double fma_spread() const;
};

// Probes the FMA peak on `threads` threads into l (fma_samples gains one; fma_gflops is the
// best so far): bench runs it before the workload and again after.
void probe_fma_peak(int threads, MachineLimits& l);

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
  std::optional<ComputeError> compute_error;  // the types --compute bf16 or q8 changes
  // The prefill's limit in FMA peaks: 2 for BF16 weights under --compute bf16, whose vdpbf16ps
  // makes two products a lane for one FMA's issue slot; 4 for Q8_0, Q4_K and Q6_K under
  // --compute q8 (vpmaddubsw and vpdpbusd: four 8-bit products a 32-bit lane).
  int peak_factor = 1;
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

// What a bench run will do, settled before any work, and what it is expected to cost (said
// before the weights are drawn).
struct BenchPlan {
  BenchShape shape;
  std::vector<std::int64_t> batches;      // the decode's batch sizes (1 first)
  std::vector<std::string> weight_types;  // drawn weights: each type's model, held at once
};

// --quick: a 64-position prefill and 16 steps, batches up to 4, the first weight type only;
// under 30 s on a 2-core machine for the default layer (one Llama-3-8B layer).
BenchPlan quick_plan(BenchPlan full);

// The expected cost of a plan on a layer of `args` (drawn weights; a file: one type): seconds
// at `gflops` for products and `gbs` for reading weights, and the bytes held at the peak.
struct BenchCost {
  double seconds = 0;
  std::uint64_t bytes = 0;
};
BenchCost expected_cost(const BenchPlan& plan, const attn::ModelArgs& args, double gflops,
                        double gbs);

// OpenBLAS sgemm on the prefill's shapes and the FMA peak, into l.
void measure_limits(const attn::Transformer& m, std::int64_t P, MachineLimits& l);

// The prefill of x's first P positions with m's compute (bf16) and with F32 compute, compared.
ComputeError compute_error(attn::Transformer& m, const std::vector<float>& x, std::int64_t P);

long peak_rss_kb();

}  // namespace cli
