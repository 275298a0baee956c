#pragma once
// What run and bench both do before any work: the config with the flags' overrides, the
// weights file's headers, quiet ranks.
#include <optional>

#include "attn/model/config.hpp"
#include "attn/model/memory.hpp"
#include "attn/model/parallel.hpp"
#include "attn/model/weights.hpp"

namespace cli {

struct Options;

// The config file (or `fallback`, the built-in default), with the command line's overrides.
attn::ModelArgs model_args(const Options& f, attn::ModelArgs (*fallback)(),
                           const attn::Shard& shard);

// The --weights file with its headers read and nothing mapped; none for drawn weights.
std::optional<attn::WeightsSource> open_weights(const Options& f, const attn::ModelArgs& args,
                                                const attn::Shard& shard, attn::RunShape& shape);

// Model parallel: rank 0 logs, prints the trace and writes the dump; the others stay quiet.
void quiet_other_ranks(const attn::Shard& shard);

}  // namespace cli
