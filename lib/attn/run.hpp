#pragma once
// The workload the CLI runs: a prefill of P positions, then N decode steps of one position,
// reporting each as a trace event and keeping the outputs for the dump.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>

#include "attn/model.hpp"
#include "attn/trace.hpp"

namespace attn {

struct RunOptions {
  std::int64_t batch = 1;
  std::int64_t prefill = 7;
  std::int64_t steps = 3;
};

struct RunOutputs {
  std::vector<float> prefill_output;  // [B, P, dim]
  std::vector<float> decode_output;   // [N, B, dim]: step i's [B, 1, dim] at i-1
  double prefill_seconds = 0;
  std::vector<double> decode_seconds;  // [N]
};

// Refuses (InputError) a batch or a number of positions the cache cannot hold, before any work.
void check_capacity(const ModelArgs& args, const RunOptions& opts);

// x: [B, T, dim], T >= P + N. Drawn from the seed when no input file is given.
std::vector<float> seeded_input(const ModelArgs& args, const RunOptions& opts, std::uint64_t seed);

// Reads tensor `x` (F32, [B, T, dim]) and checks it against the config and options.
std::vector<float> load_input(const std::filesystem::path& path, const ModelArgs& args,
                              RunOptions& opts, bool batch_given);

RunOutputs run(Transformer& m, const std::vector<float>& x, const RunOptions& opts,
               const std::function<void(const Event&)>& on_event);

// Writes the dump (CONTRACT §5) atomically. Model parallel: every rank calls it, rank 0 gathers
// the caches and writes.
void write_dump(const std::filesystem::path& path, const Transformer& m,
                const std::vector<float>& x, const RunOptions& opts, const RunOutputs& out);

}  // namespace attn
