#pragma once
// A model's file opened once, as llama.cpp's llama_model_loader opens its GGUF with one
// gguf_init_from_file: what it is, told from the first bytes of the one descriptor; a GGUF or a
// llama2.c checkpoint mapped (mapping reads nothing) and a GGUF parsed there, so that its config,
// its tokenizer and its tensors all read that one mapping; a safetensors file or an index keeps
// the descriptor for the weights' reader, which maps the file from it.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "attn/io/files.hpp"
#include "attn/io/format.hpp"
#include "attn/io/tensor_source.hpp"

namespace attn {

struct GgufFile;

struct ModelFile {
  std::filesystem::path path;
  std::string source;  // the path, escaped for messages
  FileFormat format = FileFormat::unknown;
  FileHead head;  // the first kFormatHeadBytes and the size, as the format was told from
  std::shared_ptr<const InputFile> file;      // the descriptor (all but a GGUF or llama2.c)
  std::shared_ptr<const MappedFile> mapping;  // a GGUF or a llama2.c checkpoint, whole
  std::shared_ptr<const GgufFile> gguf;       // a GGUF, parsed and checked once
};

// Opens `path` (a regular file only, as open_regular) and reads what it is; a GGUF is mapped and
// checked whole, a llama2.c checkpoint mapped. `what` names its role in messages. Throws
// InputError naming the file.
ModelFile open_model_file(const std::filesystem::path& path, const char* what);

// The file's tensors, by its format as open_tensor_source(path) chooses, read through the
// descriptor or mapping the file holds (nothing opened again).
std::unique_ptr<TensorSource> open_tensor_source(const ModelFile& f);

}  // namespace attn
