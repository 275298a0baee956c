#pragma once
// One expected tensor of a layer: its name, its shape, and where its view goes. The list of them
// (layer_tensor_specs, weights.hpp) is the one source that loading, seeding, model-parallel
// slicing, the memory estimate and the benchmark's shapes read.
#include <cstdint>
#include <string>
#include <vector>

#include "attn/matrix.hpp"

namespace attn {

// Where a tensor's view goes: a matrix keeps the file's type, a vector is read as F32.
struct Slot {
  const float** vector = nullptr;
  Matrix* matrix = nullptr;
  Slot(const float** v) : vector(v) {}
  Slot(Matrix* m) : matrix(m) {}
};

// One expected tensor: its name, shape, and where its view goes.
struct TensorSpec {
  std::string name;
  std::vector<std::int64_t> shape;
  Slot slot;
  // Model parallel: `shape` is this rank's block of the whole tensor `full` (empty: the whole
  // tensor), its rows from row0 (wq/wk/wv/w1/w3 and their biases) or its columns from col0
  // (wo, w2).
  std::vector<std::int64_t> full = {};
  std::int64_t row0 = 0, col0 = 0;
  // Decided per layer by the file (llama.cpp's TENSOR_NOT_REQUIRED): absent, the slot stays null
  // and the block runs without it (a GGUF's attention biases, which a layer may lack).
  bool optional = false;
};

}  // namespace attn
