#pragma once
// Activations at scale (issue 51): one or more hook sites over a corpus, streamed to sharded
// safetensors files, for training sparse autoencoders. The corpus (plain text, read line by
// line, or JSON Lines of {"text": ...}) becomes one stream of ids; each row is BOS then ctx-1 ids
// of it; rows run in batches and each hook's [positions, width] is kept in a shard buffer of a
// set size, written through the output rules (temporary file, rename) when full, then the
// manifest (manifest.json, the same way) that records every whole shard. A restart with the same
// settings reads the manifest and continues after its last whole shard. Memory: the shard buffer,
// one batch and one line of the corpus, whatever the corpus.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace attn {

struct Session;

struct CaptureSpec {
  std::vector<std::string> hooks;  // blocks.L.hook_resid_pre|resid_mid|resid_post|attn_out|mlp_out
  std::filesystem::path corpus;
  bool jsonl = false;         // JSON Lines of {"text": ...}; otherwise plain text
  std::filesystem::path out;  // a directory: shard-NNNNN.safetensors and manifest.json
  std::int64_t ctx = 128;     // positions per row, BOS first
  std::int64_t batch = 8;     // rows per forward call
  std::uint64_t shard_bytes = std::uint64_t{256} << 20;
  std::string model;  // what the manifest names as the model (a restart must name the same)
};

struct CaptureProgress {
  std::int64_t tokens = 0;     // positions run in this process
  std::int64_t written = 0;    // positions in whole shards, all runs
  double seconds = 0;          // since the start of this process
  double forward_seconds = 0;  // of which in the forward calls (with the copies out)
  double fraction = 0;         // of the corpus's bytes read
};

// Runs it; `progress` after every batch and once at the end. InputError (exit 2) naming the flag,
// hook, file, line or manifest key for what it refuses.
CaptureProgress capture(Session& e, const CaptureSpec& spec,
                        const std::function<void(const CaptureProgress&)>& progress);

// "256MB", "1GiB", "4096": bytes (K, M, G in powers of 1024, as llama.cpp's sizes).
std::uint64_t parse_size(const std::string& text, const char* what);

}  // namespace attn
