#pragma once
// A rank's slice of the model's tensors (Meta's fairscale split): which rows or columns of each
// whole tensor it holds, and reading just those from a whole-model file.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "attn/io/tensor_source.hpp"
#include "attn/model/parallel.hpp"
#include "attn/model/tensors.hpp"

namespace attn {

// Marks each spec (already in its rank's shape) with the whole tensor's shape and where the
// rank's block starts: column-parallel wq/wk/wv/w1/w3 (and biases) by rows, row-parallel wo/w2
// by columns; norms and wo's bias are whole on every rank.
void shard_specs(std::vector<TensorSpec>& specs, const Shard& shard);

// A --weights path containing "{rank}" names one file per rank.
bool is_per_rank_path(const std::string& path);
std::string rank_path(const std::string& path, int rank);

// The spec's block of tensor `name` (t, whose shape is spec.full) as f32: rows of an aligned F32
// tensor in place from the mapping, anything else widened or repacked into `storage` (whole
// blocks: the load checked that the block's columns start and end on them).
const float* slice_as_f32(const SourceTensor& t, const std::string& name, const TensorSpec& spec,
                          std::vector<float>& storage);

// Element (i, j) of the spec's block is element index_in_full(spec, i, j) of the whole tensor.
inline std::int64_t index_in_full(const TensorSpec& s, std::int64_t i, std::int64_t j) {
  const std::int64_t cols = s.full.size() == 2 ? s.full[1] : 1;
  return (s.row0 + i) * cols + s.col0 + j;
}

}  // namespace attn
