#pragma once
// The vocabulary every layer shares (io, kernels, model, and the apps): what a block's ops are
// told to do, and a view of one layer's KV cache. Plain enums and structs; nothing here depends
// on any other header of the engine.
#include <cstdint>

namespace attn {

enum class Rope { interleaved, half, none };
enum class Mask { causal, none };
enum class Activation { relu, gelu };

// Llama 3.1's "llama3" RoPE scaling (Hugging Face's rope_scaling): low frequencies are divided
// by `factor`, high ones kept, the band between interpolated.
struct RopeScaling {
  double factor = 8, low_freq_factor = 1, high_freq_factor = 4;
  double original_max_position_embeddings = 8192;
};

// One layer's keys and values as attention reads them, in the notebooks' layout
// [max_batch_size, n_kv_heads, max_seq_len, head_dim]: each head's keys are contiguous rows.
struct KVView {
  const float* k = nullptr;
  const float* v = nullptr;
  std::int64_t n_kv_heads = 0, max_seq_len = 0, head_dim = 0;

  std::int64_t offset(std::int64_t b, std::int64_t h) const {
    return (b * n_kv_heads + h) * max_seq_len * head_dim;
  }
};

}  // namespace attn
