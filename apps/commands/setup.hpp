#pragma once
// What run and bench both do before any work: the model the flags name, as the engine opens it
// (attn/engine/open.hpp), and quiet ranks.
#include "attn/engine/open.hpp"
#include "attn/engine/run.hpp"
#include "attn/model/parallel.hpp"

namespace cli {

struct Options;

// The engine's spec of what the flags name: files, overrides (--layers A:B parsed), mask, seed,
// threads, compute, this rank.
attn::ModelSpec model_spec(const Options& f, const attn::Shard& shard);

// r.opts, r.batch_given and r.input from the flags, after r.tokens: a token run's batch is its
// sequences (a --batch that differs is refused) and its prefill all but the steps unless --prefill
// says.
void set_run_shape(const Options& f, attn::RunRequest& r);

// --control-vector, --control-vector-scaled and --control-vector-layer-range, as llama.cpp reads
// them, made the session's steering (engine/control_vector.hpp); nothing when none is given.
void apply_control_vectors(const Options& f, attn::Session& e);

// Model parallel: rank 0 logs, prints the trace and writes the dump; the others stay quiet.
void quiet_other_ranks(const attn::Shard& shard);

}  // namespace cli
