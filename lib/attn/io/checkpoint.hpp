#pragma once
// A checkpoint's tensors by name: one safetensors file, or a Hugging Face index
// (model.safetensors.index.json) whose weight_map spreads them over files in its directory.
// Each file is mapped when a tensor in it is first asked for, and never copied; its header may be
// read before that (describe), for the memory estimate, and is then not parsed again.
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "attn/io/safetensors.hpp"
#include "attn/io/tensor_source.hpp"

namespace attn {

struct Checkpoint : TensorSource {
  std::string path;                               // what the user named, escaped for messages
  std::map<std::string, std::string> weight_map;  // tensor name -> file name in `dir`
  std::filesystem::path dir;
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files;  // mapped so far, by file name
  std::map<std::string, SafetensorsHeaderRead> headers;  // read but not mapped yet, by file name

  const std::string& source() const override { return path; }
  bool contains(const std::string& name) const override { return weight_map.count(name) > 0; }
  std::vector<std::string> names() const override;
  SourceTensor describe(const std::string& name) override;
  SourceTensor tensor(const std::string& name) override;

  // `name`'s header entry, reading its file's header (not mapping the file) if needed; valid
  // until file_of maps that file. Throws InputError.
  const TensorInfo& info(const std::string& name);
  // The mapped file holding `name` (mapping it now if needed). Throws InputError.
  const SafetensorsFile& file_of(const std::string& name);
};

// A path ending in ".index.json" is read as Hugging Face's index; anything else is one
// safetensors file. Throws InputError naming the file.
Checkpoint open_checkpoint(const std::filesystem::path& path);

// Hugging Face's index at `path`, whatever its name. Throws InputError naming the file.
Checkpoint open_index(const std::filesystem::path& path);

// The same two on a file open already (model_file.hpp): one safetensors file whose header is
// read from `file` and which is later mapped from it, or an index read from it.
struct InputFile;
Checkpoint open_checkpoint(const std::filesystem::path& path, std::shared_ptr<const InputFile> file);
Checkpoint open_index(const std::filesystem::path& path, const InputFile& file);

// The index's text as read from `path` (whose directory holds the shard files), checked for
// depth, duplicate keys and size before it is parsed. Throws InputError.
Checkpoint parse_index(const std::string& text, const std::filesystem::path& path);

}  // namespace attn
