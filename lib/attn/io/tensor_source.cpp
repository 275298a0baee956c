#include "attn/io/tensor_source.hpp"

#include <cstdint>

#include "attn/checked_size.hpp"
#include "attn/error.hpp"
#include "attn/io/checkpoint.hpp"
#include "attn/io/files.hpp"
#include "attn/io/format.hpp"
#include "attn/io/gguf.hpp"
#include "attn/io/llama2c.hpp"

namespace attn {

std::unique_ptr<TensorSource> open_tensor_source(const std::filesystem::path& path) {
  // Chosen by the file's content, not its name; anything not recognised that may be a damaged
  // safetensors file is read as one, whose reader says what is wrong with it.
  const FileHead head = read_head(path, "weights", kFormatHeadBytes);
  const FileFormat format = detect_format(head.bytes, head.size);
  check_model_format(head, format);
  switch (format) {
    case FileFormat::gguf:
      return gguf_tensor_source(open_gguf(path));
    case FileFormat::llama2c_checkpoint:
      return llama2c_tensor_source(path);
    case FileFormat::safetensors_index:
      return std::make_unique<Checkpoint>(open_index(path));
    default:
      if (path.string().ends_with(".index.json"))
        return std::make_unique<Checkpoint>(open_checkpoint(path));
      expect_format(format, head.source, {FileFormat::safetensors, FileFormat::unknown},
                    "model weights (safetensors, GGUF or a llama2.c checkpoint)");
      return std::make_unique<Checkpoint>(open_checkpoint(path));
  }
}

std::int64_t SourceTensor::numel() const {
  const std::optional<std::uint64_t> n = size_product(shape);
  if (!n || *n > std::uint64_t(INT64_MAX))
    throw InputError(file + ": shape " + shape_text(shape) + " has more than 2^63 elements");
  return std::int64_t(*n);
}

SourceTensor tensor_rows(const SourceTensor& t, const std::string& name, std::int64_t row0,
                         std::int64_t row1) {
  const std::int64_t rows = t.shape.empty() ? 0 : t.shape[0];
  if (row0 < 0 || row0 > row1 || row1 > rows)
    throw InputError(t.file + ": tensor '" + name + "': rows [" + std::to_string(row0) + ", " +
                     std::to_string(row1) + ") of " + shape_text(t.shape));
  if (rows == 0) return t;
  // A quantized vector's elements are parts of blocks: no element starts on a byte of its own.
  if (t.size % std::uint64_t(rows) != 0)
    throw InputError(t.file + ": tensor '" + name + "': " + t.dtype + " " + shape_text(t.shape) +
                     " cannot be cut into rows");
  const std::uint64_t row_bytes = t.size / std::uint64_t(rows);
  SourceTensor part = t;
  part.shape[0] = row1 - row0;
  part.size = row_bytes * std::uint64_t(row1 - row0);
  if (t.data) part.data = t.data + row_bytes * std::uint64_t(row0);
  return part;
}

}  // namespace attn
