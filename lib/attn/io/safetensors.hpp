#pragma once
// Reading and writing the safetensors format, accepting exactly what Hugging Face's reference
// reader (safetensors/src/tensor.rs) accepts. The file is mapped, never read into memory whole.
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "attn/io/tensor_source.hpp"
#include "attn/matrix.hpp"  // bf16_to_f32, f16_to_f32

namespace attn {

enum class Dtype {
  BOOL,
  U8,
  I8,
  F8_E5M2,
  F8_E4M3,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  F64,
  I64,
  U64
};

const char* dtype_name(Dtype d);    // "F32", ...
std::uint64_t dtype_size(Dtype d);  // bytes per element

struct TensorInfo {
  Dtype dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte offsets into the data section, [begin, end)
  std::uint64_t end = 0;
  std::int64_t numel() const;
};

// The parsed and validated header. `data_start` is 8 + header length: the data section's offset
// in the file.
struct SafetensorsHeader {
  std::map<std::string, TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
  std::uint64_t data_start = 0;
};

// Validates a whole file image (header and data section sizes). `source` names the file in
// messages. Throws InputError.
SafetensorsHeader parse_safetensors(std::span<const std::uint8_t> file, const std::string& source);

// A tensor's header entry as a source describes it: data null, the file named `file`.
SourceTensor source_tensor(const TensorInfo& t, const std::string& file,
                           const std::uint8_t* data = nullptr);

// A read-only mapping of a safetensors file, and the file as a tensor source. Move-only; unmaps
// on destruction.
struct SafetensorsFile : TensorSource {
  std::string path;
  SafetensorsHeader header;
  const std::uint8_t* base = nullptr;  // the mapping, size bytes
  std::uint64_t size = 0;

  SafetensorsFile() = default;
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  // Raw bytes of a tensor; throws InputError naming the file and tensor if absent.
  const TensorInfo& info(const std::string& name) const;
  const std::uint8_t* bytes(const TensorInfo& t) const {
    return base + header.data_start + t.begin;
  }

  const std::string& source() const override { return path; }
  bool contains(const std::string& name) const override { return header.tensors.count(name) > 0; }
  std::vector<std::string> names() const override;
  SourceTensor describe(const std::string& name) override {
    return source_tensor(info(name), path);  // as any source describes: no bytes
  }
  SourceTensor tensor(const std::string& name) override { return entry(name); }
  // The tensor with its bytes; throws InputError naming the file and tensor if absent.
  SourceTensor entry(const std::string& name) const {
    return source_tensor(info(name), path, bytes(info(name)));
  }
};

// A file's header read with pread, the file not mapped: what the memory estimate reads before a
// run maps anything. `bytes` are the file's first bytes as read (the length and the JSON), so
// that open_safetensors can take `header` without parsing it again. Throws InputError.
struct InputFile;
struct SafetensorsHeaderRead {
  std::uint64_t size = 0;  // the file's size when read
  std::vector<std::uint8_t> bytes;
  SafetensorsHeader header;
  // The descriptor it was read from, kept so that open_safetensors maps the same file without
  // opening it again.
  std::shared_ptr<const InputFile> file;
};
SafetensorsHeaderRead read_safetensors_header(const std::filesystem::path& path);
SafetensorsHeaderRead read_safetensors_header(std::shared_ptr<const InputFile> file);

// Maps and validates. Throws InputError naming the file. With `read` (the same file's header
// read before), its header is moved out of `read` if the file has not changed since, and its
// descriptor is the one mapped.
SafetensorsFile open_safetensors(const std::filesystem::path& path,
                                 SafetensorsHeaderRead* read = nullptr);

// A tensor as f32 values, as tensor_as_f32 on the file's SourceTensor (tensor_source.hpp).
const float* tensor_as_f32(const SafetensorsFile& file, const std::string& name,
                           std::vector<float>& storage);

struct OutTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  const float* data;  // numel floats
};

class OutputFile;

// Writes F32 tensors into `out`, which the caller commits (output.hpp): nothing is visible at
// the target before then. Throws std::runtime_error.
void write_safetensors(OutputFile& out, const std::vector<OutTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// The same into a new OutputFile for `path`, committed at once.
void write_safetensors(const std::filesystem::path& path, const std::vector<OutTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace attn
