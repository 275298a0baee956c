#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/gguf.hpp"
#include "attn/io/tensor_source.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kStoriesGguf = "/work/shared/models/stories260K.gguf";

}  // namespace

TEST_CASE("gguf: stories260K.gguf, as ggml-org publishes it") {
  if (!fs::exists(kStoriesGguf)) {
    MESSAGE("skipped: " << kStoriesGguf << " is absent");
    return;
  }
  const auto f = attn::open_gguf(kStoriesGguf);
  CHECK(f->version == 3);
  CHECK(f->alignment == 32);
  CHECK(f->tensors.size() == 48);
  CHECK(f->string("general.architecture") == "llama");
  CHECK(f->integer("llama.embedding_length") == 64);
  CHECK(f->integer("llama.block_count") == 5);
  CHECK(f->integer("llama.attention.head_count") == 8);
  CHECK(f->integer("llama.attention.head_count_kv") == 4);
  CHECK(f->strings("tokenizer.ggml.tokens").size() == 512);
  CHECK(f->floats("tokenizer.ggml.scores").size() == 512);
  CHECK(f->integers("tokenizer.ggml.token_type").size() == 512);
  const attn::GgufTensorInfo* emb = f->find_tensor("token_embd.weight");
  REQUIRE(emb != nullptr);
  CHECK(emb->shape == std::vector<std::int64_t>{512, 64});
  CHECK(emb->offset == 14176);
  CHECK(emb->size == 512 * 64 * 4);
  CHECK_THROWS_WITH_AS(f->integer("general.architecture"),
                       doctest::Contains("key 'general.architecture': expected an integer"),
                       attn::InputError);
  const auto source = attn::open_tensor_source(kStoriesGguf);
  CHECK(source->names().size() == 48);
  const attn::SourceTensor t = source->tensor("blk.0.attn_q.weight");
  CHECK(t.dtype == "F32");
  CHECK(t.type == attn::WeightType::f32);
  CHECK(t.shape == std::vector<std::int64_t>{64, 64});
  CHECK(t.data != nullptr);
}
