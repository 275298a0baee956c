#pragma once
// What the machine can do, measured in the same run as the workload (`attn-cli bench`): the
// streaming read of the weights' bytes a decode step cannot beat, OpenBLAS sgemm with its own
// threads on the prefill's shapes, and the FMA peak.
#include <cstdint>
#include <span>
#include <string>

#include "attn/kernels/runtime.hpp"

namespace attn {

// A weight matrix's bytes as n rows of k floats: the streaming read's view of it, whatever its
// type (a BF16 row of 4096 weights is read as 2048 floats).
struct StreamMatrix {
  const float* w;
  std::int64_t n, k;  // [n, k]
};

// How a streaming read walks the weights: each thread a contiguous share of every matrix
// (interleave 0), or blocks of 64 rows taken dynamically as the decode kernels take them,
// `interleave` rows at a time (kPrefetchedRows: 8, asking ahead as the gemv does).
struct ReadPattern {
  const char* name;
  int interleave;
};
inline constexpr int kPrefetchedRows = 9;
std::span<const ReadPattern> read_patterns();

// Reads every weight once with rt.kernels' loops, as items of rt's pool (the decode steps'
// threads); GB/s.
double stream_read_gbs(const Runtime& rt, std::span<const StreamMatrix> mats,
                       const ReadPattern& pattern);

// OpenBLAS sgemm with its own `threads` on x [P, k] times each matrix, best of two passes.
double sgemm_seconds(std::span<const StreamMatrix> mats, std::int64_t P, int threads);

// The F32 FMA peak on `threads` threads, GFLOP/s: the best of every kernel set this CPU runs
// (`set`: its name), each the best of a few rounds.
double fma_peak_gflops(int threads, std::string& set);

// The CPU as /proc/cpuinfo names it, with its family and model numbers ("AMD EPYC (family 26,
// model 2)"), for the benchmarks' reports; "unknown CPU" if it cannot be read.
std::string cpu_name();

}  // namespace attn
