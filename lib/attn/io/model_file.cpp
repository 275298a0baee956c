#include "attn/io/model_file.hpp"

#include "attn/io/checkpoint.hpp"
#include "attn/io/gguf.hpp"
#include "attn/io/llama2c.hpp"

namespace attn {

ModelFile open_model_file(const std::filesystem::path& path, const char* what) {
  ModelFile f;
  f.path = path;
  auto in = std::make_shared<const InputFile>(open_regular(path, what));
  f.source = in->source;
  f.head = read_head(*in, what, kFormatHeadBytes);
  f.format = detect_format(f.head.bytes, f.head.size);
  check_model_format(f.head, f.format);  // before any reader: "not a model file: ..."
  if (f.format == FileFormat::gguf) {
    f.mapping = map_file(*in, "GGUF");
    f.gguf = open_gguf(f.mapping);
  } else if (f.format == FileFormat::llama2c_checkpoint) {
    f.mapping = map_file(*in, "llama2.c checkpoint");
  } else {
    f.file = std::move(in);
  }
  return f;
}

std::unique_ptr<TensorSource> open_tensor_source(const ModelFile& f) {
  // Chosen by the file's content, not its name, as open_tensor_source(path) does.
  switch (f.format) {
    case FileFormat::gguf:
      return gguf_tensor_source(f.gguf);
    case FileFormat::llama2c_checkpoint:
      return llama2c_tensor_source(f.mapping);
    case FileFormat::safetensors_index:
      return std::make_unique<Checkpoint>(open_index(f.path, *f.file));
    default:
      if (f.path.string().ends_with(".index.json"))
        return std::make_unique<Checkpoint>(open_index(f.path, *f.file));
      expect_format(f.format, f.source, {FileFormat::safetensors, FileFormat::unknown},
                    "model weights (safetensors, GGUF or a llama2.c checkpoint)");
      return std::make_unique<Checkpoint>(open_checkpoint(f.path, f.file));
  }
}

}  // namespace attn
