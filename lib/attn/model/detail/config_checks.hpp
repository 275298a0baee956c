#pragma once
// What config.cpp shares with the configs read from model files (config_gguf.cpp): the checks
// every config passes, and the cache's default size.
#include <cstdint>

#include "attn/model/config.hpp"

namespace attn {

// llama.cpp's default context: a file's context length (a hub config's max_position_embeddings,
// a GGUF's context_length: up to 131072) would make a cache of many GiB. max_seq_len sets it.
constexpr std::int64_t kDefaultSeqLen = 4096;

// The checks a config read from JSON passes, on one read otherwise: messages name args.source
// and the keys of args.format (config_key). Throws InputError.
void check_config(const ModelArgs& args);

// The end of reading a config from a model file (GGUF, llama2.c): the FFN size given whole, the
// batch taken from the run, the checks above, the whole checkpoint's layers. Throws InputError.
void finish_file_config(ModelArgs& args);

}  // namespace attn
