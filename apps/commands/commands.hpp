#pragma once
// Every command, from its flags (flags.hpp): one file each in commands/ (run.cpp: run, decode and
// heatmap, one loop printed and drawn three ways). The ones that run the model on every rank take
// the shard; the others run in one process.
#include "attn/engine/open.hpp"
#include "attn/model/generate.hpp"
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
int generate_command(const Options& f);
int tokenize_command(const Options& f);
// A conversation: a user turn per line of stdin, each reply streamed to stdout (chat.cpp).
int chat_command(const Options& f);
// A control vector from prompt pairs, written as llama-cvector-generator writes it (cvector.cpp).
int cvector_command(const Options& f);
// Hook sites' activations over a corpus into shards, resumable (capture.cpp).
int capture_command(const Options& f);

// generate's, shared with chat: the model generate opens, and its timing lines on stderr as
// llama.cpp prints them.
attn::ModelSpec generate_spec(const Options& f);
void print_timing(const attn::Generation& g, double total_seconds);

}  // namespace cli
