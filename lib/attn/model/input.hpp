#pragma once
// A run's input: x [B, T, dim] drawn from a seed or read from a safetensors file, with the
// optional padding mask of a ragged batch (Hugging Face's attention_mask [B, T]) beside it.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "attn/model/config.hpp"

namespace attn {

// A run's shape: a prefill of P positions, then N decode steps of one position, for B sequences.
struct RunOptions {
  std::int64_t batch = 1;
  std::int64_t prefill = 7;
  std::int64_t steps = 3;
};

// One value of a padding mask [batch, seqlen] at [b, t]: 1 a real position (true), 0 padding
// (false); anything else: InputError naming `what`.
bool padding_value(double v, const std::string& what, std::int64_t b, std::int64_t t);

// Refuses (InputError, naming the setting max_batch_size or max_seq_len) a call of `batch`
// sequences at positions start_pos..start_pos+seqlen-1 that the cache cannot hold; `what` names
// the input in the message. The one capacity check of every front.
void check_fits(const ModelArgs& a, std::int64_t batch, std::int64_t start_pos, std::int64_t seqlen,
                const std::string& what);

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

// Reads the optional tensor `attention_mask` [B, T] beside x [B, T, dim] in the input file (F32,
// I64, I32, U8 or BOOL; every value 0 or 1) and keeps its first P+N columns, as 0/1 bytes.
// Empty if the file has none. Throws InputError naming the file, the tensor and the first bad
// index.
std::vector<std::uint8_t> load_attention_mask(const std::filesystem::path& path,
                                              const RunOptions& opts);

}  // namespace attn
