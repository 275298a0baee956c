#pragma once
// The workload the CLI runs: a prefill of P positions, then N decode steps of one position,
// reporting each as a trace event and keeping the outputs for the dump.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>

#include "attn/model/model.hpp"
#include "workloads/trace.hpp"

namespace attn {

struct RunOptions {
  std::int64_t batch = 1;
  std::int64_t prefill = 7;
  std::int64_t steps = 3;
};

// What a run looks at beyond its outputs: a ragged batch's padding mask, and whether to keep the
// attention probabilities (--attention-weights).
struct Inspect {
  std::vector<std::uint8_t> attention_mask;  // [B, P+N], 1 = real position; empty: all real
  bool attention_weights = false;
};

struct RunOutputs {
  std::vector<float> prefill_output;  // [B, P, dim]
  std::vector<float> decode_output;   // [N, B, dim]: step i's [B, 1, dim] at i-1
  double prefill_seconds = 0;
  std::vector<double> decode_seconds;  // [N]
  // With attention_weights: per layer [B, n_heads, P, P], and per step and layer
  // [B, n_heads, 1, P+i].
  std::vector<std::vector<float>> attn_prefill;
  std::vector<std::vector<std::vector<float>>> attn_decode;
};

// What --attention-weights stores may not exceed this: refused before any work.
inline constexpr std::int64_t kAttentionWeightsLimit = std::int64_t{1} << 30;

// Bytes of the probabilities a run keeps: n_layers * B * n_heads * (P*P + sum (P+i)) floats.
double attention_weights_bytes(const ModelArgs& args, const RunOptions& opts);

// Refuses (InputError) attention weights over kAttentionWeightsLimit, if they are asked for.
void check_attention_weights(const ModelArgs& args, const RunOptions& opts, const Inspect& inspect);

// Refuses (InputError) a batch or a number of positions the cache cannot hold, before any work.
void check_capacity(const ModelArgs& args, const RunOptions& opts);

// x: [B, T, dim], T >= P + N. Drawn from the seed when no input file is given.
std::vector<float> seeded_input(const ModelArgs& args, const RunOptions& opts, std::uint64_t seed);

// Reads tensor `x` (F32, [B, T, dim]) and checks it against the config and options.
std::vector<float> load_input(const std::filesystem::path& path, const ModelArgs& args,
                              RunOptions& opts, bool batch_given);

// The batch of tensor `x` in an input file, read from its header only (1 if the file has no
// [B, T, dim] x: load_input then says what is wrong). For the memory estimate before loading.
std::int64_t input_batch(const std::filesystem::path& path);

RunOutputs run(Transformer& m, const std::vector<float>& x, const RunOptions& opts,
               const std::function<void(const Event&)>& on_event, const Inspect& inspect = {});

// Writes the dump (CONTRACT §5) atomically, with attention_weights the attn.{l}.* probabilities
// too. Model parallel: every rank calls it, rank 0 gathers the caches and writes.
void write_dump(const std::filesystem::path& path, const Transformer& m,
                const std::vector<float>& x, const RunOptions& opts, const RunOutputs& out,
                bool attention_weights = false);

}  // namespace attn
