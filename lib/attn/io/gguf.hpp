#pragma once
// Reading GGUF files (llama.cpp's format, versions 2 and 3; docs/gguf.md in llama.cpp): a header,
// typed metadata (key -> value), tensor infos and an aligned data section. The file is mapped and
// never copied; every count, length, dimension, size and offset is checked before it is used
// (llama.cpp's GGUF security advisories are the checklist), so bad bytes give an InputError naming
// the file and the field, never a crash or an allocation as large as a count in the file.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attn/io/tensor_source.hpp"

namespace attn {

// gguf_type in ggml's gguf.h: the value types metadata may have.
enum class GgufValueType : std::uint32_t {
  u8 = 0,
  i8,
  u16,
  i16,
  u32,
  i32,
  f32,
  boolean,
  string,
  array,
  u64,
  i64,
  f64
};

// "u32", "string", "array", ...: as messages name a value's type.
const char* gguf_type_name(GgufValueType t);

// One metadata value where it lies in the file. A string is stored as its u64 length then its
// bytes; an array's elements follow each other (strings each with their length).
struct GgufValue {
  GgufValueType type;
  GgufValueType element = GgufValueType::u8;  // arrays: the elements' type
  std::uint64_t count = 0;                    // arrays: how many elements
  const std::uint8_t* data = nullptr;  // the value's bytes in the file (arrays: the first element)
};

struct GgufTensorInfo {
  std::string name;
  std::uint32_t ggml_type;          // enum ggml_type
  std::vector<std::int64_t> shape;  // row-major, outermost first: ggml's ne reversed
  std::uint64_t offset = 0;         // from the start of the file (data section start + info offset)
  std::uint64_t size = 0;           // bytes
};

struct GgufFile {
  std::string path;  // escaped, for messages
  std::uint32_t version = 3;
  std::uint64_t alignment = 32;  // GGUF_DEFAULT_ALIGNMENT unless general.alignment says
  std::span<const std::uint8_t> bytes;                // the whole (mapped) file
  std::vector<std::pair<std::string, GgufValue>> kv;  // in file order; keys unique (checked)
  std::vector<GgufTensorInfo> tensors;                // in file order; names unique (checked)
  std::uint64_t data_start = 0;  // where the data section starts (tensor offsets count from it)

  const GgufValue* find(std::string_view key) const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // Typed reads: nullopt/empty when the key is absent; InputError naming the file and the key
  // when present with another type or out of range.
  std::optional<std::int64_t> integer(std::string_view key) const;  // any integer type
  std::optional<double> number(std::string_view key) const;         // f32, f64 or any integer
  std::optional<bool> boolean(std::string_view key) const;
  std::optional<std::string> string(std::string_view key) const;      // raw bytes, not escaped
  std::vector<std::string_view> strings(std::string_view key) const;  // array of string
  std::vector<float> floats(std::string_view key) const;              // array of f32
  std::vector<std::int64_t> integers(std::string_view key) const;     // array of any integer type
  std::shared_ptr<void> mapping;  // keeps `bytes` alive (null when parse_gguf was given bytes)
};

// ggml's name of a tensor type ("F32", "Q8_0", "Q4_K"), or "ggml type N" for one it lacks.
std::string ggml_type_name(std::uint32_t ggml_type);

bool is_gguf(std::span<const std::uint8_t> head);  // the magic

// Maps the file and checks all of it (below). Throws InputError naming the file and the field.
std::shared_ptr<const GgufFile> open_gguf(const std::filesystem::path& path);
// The same on a file mapped already (model_file.hpp: the file opened once).
struct MappedFile;
std::shared_ptr<const GgufFile> open_gguf(std::shared_ptr<const MappedFile> mapping);
// The same checks on bytes that outlive the result; `source` names them in messages (fuzzing,
// tests).
GgufFile parse_gguf(std::span<const std::uint8_t> bytes, const std::string& source);

// The file's tensors as a TensorSource named by their GGUF names ("blk.0.attn_q.weight"), each
// SourceTensor's `type` from weight_type_of_ggml (none for a ggml type no row reads; its `dtype`
// is then the ggml type's name, "Q5_1", for the weights layer's message).
std::unique_ptr<TensorSource> gguf_tensor_source(std::shared_ptr<const GgufFile> file);

}  // namespace attn
