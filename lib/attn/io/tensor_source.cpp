#include "attn/io/tensor_source.hpp"

#include "attn/io/checkpoint.hpp"
#include "attn/io/files.hpp"
#include "attn/io/gguf.hpp"

namespace attn {

std::unique_ptr<TensorSource> open_tensor_source(const std::filesystem::path& path) {
  // Chosen by the file's content, not its name.
  if (!path.string().ends_with(".index.json") && is_gguf(read_head(path, "weights", 4).bytes))
    return gguf_tensor_source(open_gguf(path));
  return std::make_unique<Checkpoint>(open_checkpoint(path));
}

}  // namespace attn
