#pragma once
// The padding mask of a ragged batch: Hugging Face's attention_mask [B, T], read from the input.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "workloads/run.hpp"

namespace attn {

// Reads the optional tensor `attention_mask` [B, T] beside x [B, T, dim] in the input file (F32,
// I64, I32, U8 or BOOL; every value 0 or 1) and keeps its first P+N columns, as 0/1 bytes.
// Empty if the file has none. Throws InputError naming the file, the tensor and the first bad
// index.
std::vector<std::uint8_t> load_attention_mask(const std::filesystem::path& path,
                                              const RunOptions& opts);

}  // namespace attn
