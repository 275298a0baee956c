#pragma once
// Writing a GGUF file (version 3, llama.cpp's gguf_write_to_file layout): the header, string and
// i32 metadata, F32 tensors, each aligned to 32 bytes. What attn-cli cvector writes a control
// vector with; gguf.hpp reads it back.
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "attn/io/output.hpp"

namespace attn {

struct GgufKeyValue {
  std::string key;
  std::variant<std::string, std::int32_t> value;
};

struct GgufF32Tensor {
  std::string name;
  std::vector<std::int64_t> shape;  // row-major, outermost first (written as ggml's ne, reversed)
  std::span<const float> data;      // the product of shape
};

// The whole file into `out` (the caller commits it).
void write_gguf(OutputFile& out, std::span<const GgufKeyValue> kv,
                std::span<const GgufF32Tensor> tensors);

}  // namespace attn
