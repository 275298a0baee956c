#include "attn/io/tensor_source.hpp"

#include "attn/io/checkpoint.hpp"
#include "attn/io/format.hpp"
#include "attn/io/gguf.hpp"
#include "attn/io/llama2c.hpp"

namespace attn {

std::unique_ptr<TensorSource> open_tensor_source(const std::filesystem::path& path) {
  // Chosen by the file's content, not its name; anything not recognised is read as safetensors,
  // whose reader says what is wrong with it.
  switch (detect_format(path)) {
    case FileFormat::gguf:
      return gguf_tensor_source(open_gguf(path));
    case FileFormat::llama2c_checkpoint:
      return llama2c_tensor_source(path);
    case FileFormat::safetensors_index:
      return std::make_unique<Checkpoint>(open_index(path));
    default:
      if (path.string().ends_with(".index.json"))
        return std::make_unique<Checkpoint>(open_checkpoint(path));
      expect_format(path, {FileFormat::safetensors, FileFormat::unknown},
                    "model weights (safetensors, GGUF or a llama2.c checkpoint)");
      return std::make_unique<Checkpoint>(open_checkpoint(path));
  }
}

}  // namespace attn
