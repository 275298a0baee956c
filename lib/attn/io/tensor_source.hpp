#pragma once
// A weights file's tensors by name, whatever its format: what the weights layer reads and the
// one seam a new format implements. A safetensors file (safetensors.hpp) and a checkpoint of
// one file or a Hugging Face index over shards (checkpoint.hpp) are sources. A tensor's type is
// named as the file names it and as the weight type that reads it (weight_type.hpp), so that the
// weights layer never asks which format it reads.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attn/weight_type.hpp"

namespace attn {

// A shape as messages and traces print it: "[1, 2, 8, 3]".
std::string shape_text(const std::vector<std::int64_t>& shape);

// One tensor as its source stores it: row-major, its bytes little-endian, rows whole blocks of
// its type.
struct SourceTensor {
  std::string dtype;               // the format's name for its type, for messages ("I32")
  std::optional<WeightType> type;  // the weight type that reads it; none: no type does
  std::vector<std::int64_t> shape;
  const std::uint8_t* data = nullptr;  // its bytes; null when only described
  std::uint64_t size = 0;              // bytes
  std::string file;                    // the file holding it, escaped for messages

  // Readers checked the shape's product; one made by hand that wraps is refused here.
  std::int64_t numel() const;
};

class TensorSource {
 public:
  virtual ~TensorSource() = default;

  // What the user named (the file, or the index), escaped for messages.
  virtual const std::string& source() const = 0;
  virtual bool contains(const std::string& name) const = 0;
  // Every tensor's name, sorted.
  virtual std::vector<std::string> names() const = 0;
  // The tensor's type and shape from the file's header only, nothing mapped (data null): what
  // the memory estimate reads before a run maps anything. Throws InputError.
  virtual SourceTensor describe(const std::string& name) = 0;
  // The tensor with its bytes, mapping its file if not yet mapped; the bytes live as long as the
  // source. Throws InputError naming the source and the tensor if absent.
  virtual SourceTensor tensor(const std::string& name) = 0;
};

// The source a weights path names, chosen by the file's content (format.hpp): a GGUF file
// (gguf.hpp, mapped at once: mapping reads nothing), a llama2.c checkpoint (llama2c.hpp, the
// same), a Hugging Face index (by content or a name ending in ".index.json") or one safetensors
// file (nothing mapped yet). A tokenizer or JSON file is refused naming what it is. Throws
// InputError naming the file.
std::unique_ptr<TensorSource> open_tensor_source(const std::filesystem::path& path);

// Rows [row0, row1) of t (its first dimension; a vector's elements) as a tensor of their own: in
// row-major storage they are contiguous bytes, whole blocks of a quantized type, so the result
// points into t's bytes (a fused tensor's part, read as a view). `name` names t in messages.
// Throws InputError when the range is outside t or its rows are not whole bytes.
SourceTensor tensor_rows(const SourceTensor& t, const std::string& name, std::int64_t row0,
                         std::int64_t row1);

// A tensor as F32 values: its bytes themselves when F32 and 4-byte aligned, otherwise widened
// (traits' to_f32) or copied (misaligned F32) into `storage`. A dtype no weight type reads
// throws InputError naming t.file and `name`.
const float* tensor_as_f32(const SourceTensor& t, const std::string& name,
                           std::vector<float>& storage);

}  // namespace attn
