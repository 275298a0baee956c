// The architecture table (arch.hpp): its rows as the config readers read them, and a fused
// tensor's parts loaded as views of its rows.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "attn/error.hpp"
#include "attn/model/arch.hpp"
#include "attn/model/model.hpp"
#include "attn/model/weights.hpp"
#include "test_support.hpp"

namespace {

attn::ModelArgs hf_args(const nlohmann::json& extra) {
  nlohmann::json j = {{"hidden_size", 64},        {"num_hidden_layers", 2},
                      {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                      {"intermediate_size", 96},  {"hidden_act", "silu"}};
  if (!extra.is_null()) j.update(extra);
  return attn::parse_config(j.dump(), "config.json");
}

// qwen2's shape with head_dim 16: q/k/v biases, none on o; rows of whole Q8_0 blocks.
attn::ModelArgs fused_args() {
  attn::ModelArgs a = attn::seed_args();
  a.block = attn::Block::llama;
  a.rope = attn::Rope::half;
  a.dim = 64;
  a.n_heads = 4;
  a.n_kv_heads = 2;
  a.n_layers = 2;
  a.ffn_hidden_set = 96;
  a.attention_bias = true;
  a.attention_out_bias = false;
  a.max_seq_len = 8;
  a.max_batch_size = 1;
  return a;
}

// The bytes of a spec's tensor in drawn weights.
std::vector<std::uint8_t> bytes_of(const attn::TensorSpec& s) {
  const std::int64_t rows = s.shape[0], cols = s.shape.size() == 2 ? s.shape[1] : 1;
  const void* p = s.slot.matrix ? s.slot.matrix->data : *s.slot.vector;
  const attn::WeightType t = s.slot.matrix ? s.slot.matrix->type : attn::WeightType::f32;
  const std::size_t n = std::size_t(rows) * attn::weight_bytes(t, cols, s.name);
  const auto* b = static_cast<const std::uint8_t*>(p);
  return {b, b + n};
}

attn::WeightType type_of(const attn::TensorSpec& s) {
  return s.slot.matrix ? s.slot.matrix->type : attn::WeightType::f32;
}

// Hugging Face's name for a layer tensor of Meta's name `rest`, in layer l.
std::string hf_name(std::int64_t l, const std::string& rest) {
  for (const attn::TensorNames& n : attn::find_architecture("llama")->tensors->layer)
    if (rest == n.meta) return "model.layers." + std::to_string(l) + "." + n.hf;
  return rest;
}

constexpr const char* kQkv[] = {"attention.wq.weight", "attention.wk.weight",
                                "attention.wv.weight"};
constexpr const char* kQkvBias[] = {"attention.wq.bias", "attention.wk.bias", "attention.wv.bias"};
constexpr const char* kGateUp[] = {"feed_forward.w1.weight", "feed_forward.w3.weight"};
constexpr attn::FusedTensor kFused[] = {
    {{nullptr, "self_attn.qkv_proj.weight", "attn_qkv.weight"}, kQkv},
    {{nullptr, "self_attn.qkv_proj.bias", nullptr}, kQkvBias},
    {{nullptr, "mlp.gate_up_proj.weight", nullptr}, kGateUp}};

// llama's row with phi3's fused tensors beside its own names.
attn::Architecture fused_row(attn::TensorTable& table) {
  const attn::Architecture& llama = *attn::find_architecture("llama");
  table = *llama.tensors;
  table.fused = kFused;
  attn::Architecture row = llama;
  row.tensors = &table;
  return row;
}

// The drawn weights written under Hugging Face's names, each tensor on its own or (fused) the
// parts of kFused stacked.
std::unique_ptr<test::MemorySource> write_weights(const attn::ModelArgs& a,
                                                  attn::TransformerWeights& drawn, bool fused) {
  auto src = std::make_unique<test::MemorySource>();
  for (std::int64_t l = 0; l < a.n_layers; ++l) {
    attn::LayerWeights views = drawn.layers[std::size_t(l)];
    const std::vector<attn::TensorSpec> specs = attn::layer_tensor_specs(a, views, l);
    auto spec = [&](const std::string& rest) {
      return *std::find_if(specs.begin(), specs.end(), [&](const attn::TensorSpec& s) {
        return s.name == "layers." + std::to_string(l) + "." + rest;
      });
    };
    std::vector<std::string> stacked;
    if (fused)
      for (const attn::FusedTensor& f : kFused) {
        std::vector<std::uint8_t> bytes;
        std::vector<std::int64_t> shape = spec(f.parts[0]).shape;
        shape[0] = 0;
        for (const char* part : f.parts) {
          const std::vector<std::uint8_t> b = bytes_of(spec(part));
          bytes.insert(bytes.end(), b.begin(), b.end());
          shape[0] += spec(part).shape[0];
          stacked.push_back(part);
        }
        src->add("model.layers." + std::to_string(l) + "." + f.names.hf, type_of(spec(f.parts[0])),
                 shape, bytes.data(), bytes.size());
      }
    for (const attn::TensorSpec& s : specs) {
      const std::string rest = s.name.substr(s.name.find('.', 7) + 1);
      if (std::find(stacked.begin(), stacked.end(), rest) != stacked.end()) continue;
      const std::vector<std::uint8_t> b = bytes_of(s);
      src->add(hf_name(l, rest), type_of(s), s.shape, b.data(), b.size());
    }
  }
  return src;
}

// Every tensor of the config's layers reads the same bytes in both.
void check_same(const attn::ModelArgs& a, attn::TransformerWeights& x,
                attn::TransformerWeights& y) {
  for (std::int64_t l = 0; l < a.n_layers; ++l) {
    attn::LayerWeights vx = x.layers[std::size_t(l)], vy = y.layers[std::size_t(l)];
    const std::vector<attn::TensorSpec> sx = attn::layer_tensor_specs(a, vx, l),
                                        sy = attn::layer_tensor_specs(a, vy, l);
    REQUIRE(sx.size() == sy.size());
    for (std::size_t i = 0; i < sx.size(); ++i) {
      CAPTURE(sx[i].name);
      CHECK(type_of(sx[i]) == type_of(sy[i]));
      CHECK(bytes_of(sx[i]) == bytes_of(sy[i]));
    }
  }
}

}  // namespace

TEST_CASE("arch: llama, mistral and qwen2 are rows, and the tool's blocks are Meta's") {
  for (const char* name : {"llama", "mistral", "qwen2", "attention", "encoder"})
    CHECK(attn::find_architecture(name) != nullptr);
  CHECK(attn::find_architecture("gemma4") == nullptr);
  CHECK(attn::architecture_names([](const attn::Architecture& a) { return a.gguf; }) ==
        "llama, mistral, qwen2, qwen3, olmo2, gemma2, gemma3, phi3 or granite");
  CHECK(attn::architecture_names([](const attn::Architecture& a) { return a.meta_block; }) ==
        "llama, attention or encoder");
  // RoPE by file format: Meta's and llama.cpp's llama rows rotate pairs, Hugging Face's halves.
  const attn::Architecture& llama = *attn::find_architecture("llama");
  CHECK(llama.rope(attn::ConfigFormat::meta) == attn::Rope::interleaved);
  CHECK(llama.rope(attn::ConfigFormat::gguf) == attn::Rope::interleaved);
  CHECK(llama.rope(attn::ConfigFormat::hugging_face) == attn::Rope::half);
  CHECK(attn::find_architecture("qwen2")->rope(attn::ConfigFormat::gguf) == attn::Rope::half);

  // A config that names no architecture is its block's row.
  attn::ModelArgs a = attn::seed_args();
  CHECK(std::string(attn::architecture_of(a).name) == "attention");
  a.block = attn::Block::encoder;
  CHECK(std::string(attn::architecture_of(a).name) == "encoder");
  a.block = attn::Block::llama;
  CHECK(std::string(attn::architecture_of(a).name) == "llama");
}

TEST_CASE("arch: a config.json's row by model_type, else by its architectures' class") {
  const attn::ModelArgs q = hf_args({{"model_type", "qwen2"}});
  CHECK(q.arch == "qwen2");
  CHECK(q.attention_bias);
  CHECK_FALSE(q.attention_out_bias);
  CHECK(q.rope == attn::Rope::half);
  const attn::ModelArgs c = hf_args({{"architectures", {"Qwen2ForCausalLM"}}});
  CHECK(c.arch == "qwen2");
  CHECK(c.attention_bias);
  CHECK(hf_args({{"model_type", "mistral"}}).arch == "mistral");
  // model_type decides, as in transformers' AutoConfig.
  CHECK(hf_args({{"model_type", "llama"}, {"architectures", {"Qwen2ForCausalLM"}}}).arch ==
        "llama");
  // Neither, or one no row names: llama's, as before the table.
  CHECK(hf_args(nlohmann::json::object()).arch == "llama");
  CHECK_FALSE(hf_args({{"architectures", {"GPT2LMHeadModel"}}}).attention_bias);
  // Meta's keys choose among the Meta rows, listed from the table.
  try {
    attn::parse_config(R"({"dim": 16, "n_heads": 4, "block": "qwen2"})", "params.json");
    FAIL("accepted");
  } catch (const attn::InputError& e) {
    CHECK(std::string(e.what()) ==
          "params.json: key 'block': expected one of \"llama\", \"attention\", \"encoder\", got "
          "\"qwen2\"");
  }
}

TEST_CASE("tensor_rows: rows of a matrix are a view of its bytes in every weight type") {
  for (std::size_t i = 0; i < attn::kWeightTypeCount; ++i) {
    const attn::WeightType type = attn::kWeightTypeTraits[i].type;
    CAPTURE(attn::traits(type).name);
    const std::int64_t cols = 256, rows = 6;  // 256: whole blocks of every type
    const std::size_t row_bytes = attn::weight_bytes(type, cols, "test");
    std::vector<std::uint8_t> bytes(row_bytes * rows);
    for (std::size_t b = 0; b < bytes.size(); ++b) bytes[b] = std::uint8_t(b * 7 + 1);
    const attn::SourceTensor t{"X", type, {rows, cols}, bytes.data(), bytes.size(), "f"};
    const attn::SourceTensor part = attn::tensor_rows(t, "x", 2, 5);
    CHECK(part.shape == std::vector<std::int64_t>{3, cols});
    CHECK(part.size == 3 * row_bytes);
    CHECK(part.data == bytes.data() + 2 * row_bytes);
    CHECK(attn::Matrix(part.data, type).row(1, cols).data ==
          attn::Matrix(t.data, type).row(3, cols).data);
  }
  const std::vector<float> v(8, 1.0f);
  const attn::SourceTensor f32{"F32", attn::WeightType::f32, {8}, (const std::uint8_t*)v.data(), 32,
                               "f"};
  CHECK(attn::tensor_rows(f32, "v", 4, 8).data == f32.data + 16);
  CHECK_THROWS_AS(attn::tensor_rows(f32, "v", 4, 9), attn::InputError);
  std::vector<std::uint8_t> block(34);  // one Q8_0 block: 32 elements, no element's own bytes
  const attn::SourceTensor q{"Q8_0", attn::WeightType::q8_0, {32}, block.data(), 34, "f"};
  CHECK_THROWS_WITH_AS(attn::tensor_rows(q, "q", 0, 16), doctest::Contains("cut into rows"),
                       attn::InputError);
}

TEST_CASE("arch: a fused tensor's parts load as views of its rows, bit-identical") {
  const attn::ModelArgs a = fused_args();
  attn::TensorTable table;
  const attn::Architecture row = fused_row(table);
  for (const attn::WeightType type :
       {attn::WeightType::f32, attn::WeightType::bf16, attn::WeightType::q8_0}) {
    CAPTURE(attn::traits(type).name);
    attn::TransformerWeights drawn = attn::seeded_weights(a, 11, {}, type);
    attn::TransformerWeights plain = attn::load_weights(a, {write_weights(a, drawn, false), false});
    auto fused_source = write_weights(a, drawn, true);
    const test::MemorySource& held = *fused_source;
    CHECK(held.contains("model.layers.1.self_attn.qkv_proj.weight"));
    CHECK_FALSE(held.contains("model.layers.1.self_attn.k_proj.weight"));
    attn::TransformerWeights fused =
        attn::load_weights(a, {std::move(fused_source), false}, {}, row);
    check_same(a, plain, fused);
    // Views into the fused tensors: k starts after q's rows, up (w3) after gate's (w1).
    const std::size_t row_bytes = attn::weight_bytes(type, a.dim, "test");
    const auto& qkv = held.tensors.at("model.layers.1.self_attn.qkv_proj.weight").bytes;
    const auto& gate_up = held.tensors.at("model.layers.1.mlp.gate_up_proj.weight").bytes;
    CHECK(fused.layers[1].wk.data ==
          qkv.data() + std::size_t(a.n_heads * a.head_dim()) * row_bytes);
    CHECK(fused.layers[1].w3.data == gate_up.data() + std::size_t(a.ffn_hidden()) * row_bytes);
    CHECK(fused.bytes == plain.bytes);

    // The same forward, bit for bit.
    const std::int64_t T = 5;
    std::vector<float> x(std::size_t(T * a.dim)), out1(x.size()), out2(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 13) - 6) / 8.0f;
    attn::Transformer m1 = attn::make_transformer(a, std::move(plain), T);
    attn::Transformer m2 = attn::make_transformer(a, std::move(fused), T);
    attn::forward(m1, x.data(), 1, T, 0, out1.data());
    attn::forward(m2, x.data(), 1, T, 0, out2.data());
    CHECK(std::memcmp(out1.data(), out2.data(), out1.size() * sizeof(float)) == 0);
  }

  // A rank's slice of each part: rows of the part's rows.
  attn::TransformerWeights drawn = attn::seeded_weights(a, 12);
  const attn::Shard rank1{1, 2};
  attn::TransformerWeights plain =
      attn::load_weights(a, {write_weights(a, drawn, false), false}, rank1);
  attn::TransformerWeights fused =
      attn::load_weights(a, {write_weights(a, drawn, true), false}, rank1, row);
  for (std::size_t l = 0; l < 2; ++l) {
    const attn::LayerWeights &p = plain.layers[l], &f = fused.layers[l];
    const std::int64_t q = a.n_heads * a.head_dim() / 2, kv = a.n_kv_heads * a.head_dim() / 2;
    const std::int64_t h = a.ffn_hidden() / 2;
    for (const auto& [x, y, n] :
         {std::tuple{p.wq.data, f.wq.data, q * a.dim}, std::tuple{p.wk.data, f.wk.data, kv * a.dim},
          std::tuple{p.wv.data, f.wv.data, kv * a.dim}, std::tuple{p.w1.data, f.w1.data, h * a.dim},
          std::tuple{p.w3.data, f.w3.data, h * a.dim},
          std::tuple<const void*, const void*, std::int64_t>{p.bk, f.bk, kv}})
      CHECK(std::memcmp(x, y, std::size_t(n) * sizeof(float)) == 0);
  }

  // A fused tensor whose rows are not its parts' is refused naming it and them.
  auto bad = write_weights(a, drawn, true);
  bad->tensors.at("model.layers.0.self_attn.qkv_proj.weight").shape[0] -= 1;
  CHECK_THROWS_WITH_AS(
      attn::load_weights(a, {std::move(bad), false}, {}, row),
      doctest::Contains("'model.layers.0.self_attn.qkv_proj.weight': expected shape [128, 64] "
                        "(attention.wq.weight + attention.wk.weight + attention.wv.weight), got "
                        "[127, 64]"),
      attn::InputError);
}
