#pragma once
// The commands that run the model on every rank: run, decode and heatmap (one loop, printed and
// drawn three ways) and bench. generate and tokenize are workloads/generate.hpp's.
#include "attn/model/parallel.hpp"
#include "flags.hpp"

namespace cli {

// c: run, decode (the notebook's cache line per step) or heatmap (also draws the PNG).
int run_command(const Options& f, Command c, const attn::Shard& shard);

int bench_command(const Options& f, const attn::Shard& shard);

// One process: the attention of a run or a generation as one HTML page (workloads/view.hpp).
int view_command(const Options& f);
// Compares two dumps; 0 equal within the tolerance, 1 different.
int diff_command(const Options& f);

}  // namespace cli
