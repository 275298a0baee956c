#pragma once
// llama2.c checkpoints: the version-0 layout that run.c reads (karpathy/llama2.c): seven int32
// (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative vocab_size
// means the classifier is not the embedding table and follows the weights), then F32 arrays
// one after another: token_embedding_table [vocab, dim], rms_att_weight [n_layers, dim],
// wq [n_layers, dim, dim], wk and wv [n_layers, kv_dim, dim], wo [n_layers, dim, dim],
// rms_ffn_weight [n_layers, dim], w1 and w3 [n_layers, hidden_dim, dim], w2 [n_layers, dim,
// hidden_dim], rms_final_weight [dim], freq_cis_real and freq_cis_imag [seq_len, head_size/2]
// (unused), wcls [vocab, dim] when unshared. The file has no magic: it is recognised by seven
// plausible ints whose implied size is exactly the file's.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "attn/io/tensor_source.hpp"

namespace attn {

struct Llama2cHeader {
  std::int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0;
  std::int32_t vocab_size = 0;  // positive: the file's sign is shared_classifier
  std::int32_t seq_len = 0;
  bool shared_classifier = true;  // the output head is tok_embeddings.weight
};

// The header size: seven int32.
inline constexpr std::uint64_t kLlama2cHeaderBytes = 28;

// The header when `head` (the file's first bytes, at least 28) holds seven plausible ints and
// `file_size` is exactly the size they imply; none otherwise.
std::optional<Llama2cHeader> llama2c_header(std::span<const std::uint8_t> head,
                                            std::uint64_t file_size);

// What a file that starts like a llama2.c checkpoint (seven small ints) but is not one has
// wrong, for the "what is this file" step (format.hpp): "header dim is -5", "header implies 1200
// bytes, the file has 1000 (cut short)"; empty when the file does not start like one, or is one.
std::string llama2c_lookalike(std::span<const std::uint8_t> head, std::uint64_t file_size);

// The file's header, or an InputError naming the file and what is wrong (which value, or the
// size expected against the size found).
Llama2cHeader read_llama2c_header(const std::filesystem::path& path);
// The same from a file's first bytes read already (at least kLlama2cHeaderBytes, and its size).
struct FileHead;
Llama2cHeader llama2c_header_of(const FileHead& head);

// The checkpoint mapped (never copied) as a TensorSource under Meta's names (model.py):
// tok_embeddings.weight [vocab, dim], layers.{l}.attention_norm.weight [dim],
// layers.{l}.attention.wq/wk/wv/wo.weight, layers.{l}.ffn_norm.weight,
// layers.{l}.feed_forward.w1/w2/w3.weight, norm.weight, output.weight (only when unshared), all
// F32. Throws InputError naming the file.
std::unique_ptr<TensorSource> llama2c_tensor_source(const std::filesystem::path& path);
// The same on a file mapped already (model_file.hpp: the file opened once).
struct MappedFile;
std::unique_ptr<TensorSource> llama2c_tensor_source(std::shared_ptr<const MappedFile> mapping);

// The same source, its header at hand: what the model layer builds its config from.
struct Llama2cCheckpoint;
std::unique_ptr<Llama2cCheckpoint> open_llama2c(const std::filesystem::path& path);
std::unique_ptr<Llama2cCheckpoint> open_llama2c(std::shared_ptr<const MappedFile> mapping);
// The same checks on bytes that outlive the result (no mapping held); `source` names them in
// messages (fuzzing, tests).
std::unique_ptr<Llama2cCheckpoint> parse_llama2c(std::span<const std::uint8_t> bytes,
                                                 const std::string& source);

struct Llama2cCheckpoint : TensorSource {
  struct Entry {
    std::vector<std::int64_t> shape;
    std::uint64_t offset = 0;  // bytes from the file's start
    std::uint64_t size = 0;    // bytes
  };
  std::string path;  // escaped, for messages
  Llama2cHeader header;
  std::shared_ptr<const void> mapping;                 // keeps `bytes` alive
  std::span<const std::uint8_t> bytes;                 // the whole mapped file
  std::vector<std::pair<std::string, Entry>> entries;  // sorted by name

  const std::string& source() const override { return path; }
  bool contains(const std::string& name) const override;
  std::vector<std::string> names() const override;
  SourceTensor describe(const std::string& name) override;
  SourceTensor tensor(const std::string& name) override;
};

}  // namespace attn
