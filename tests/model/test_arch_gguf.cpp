// The architectures as GGUF files hold them (config_gguf.cpp and the load): what each layer
// holds is decided per layer, a tensor no block reads is refused naming it, and each
// architecture's operations on small models written here (gguf_model.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "attn/engine/lens.hpp"
#include "attn/error.hpp"
#include "gguf_model.hpp"

namespace {

std::string refusal(const test::GgufModel& g) {
  try {
    test::config_of(g);
  } catch (const attn::InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

const std::vector<std::int32_t> kPrompt = {1, 7, 3, 12, 5};
const std::vector<std::int32_t> kDecoded = {9, 2};

}  // namespace

TEST_CASE("gguf: attention biases are decided per layer, as llama.cpp loads them") {
  // Biases in layer 1 only (llama.cpp: TENSOR_NOT_REQUIRED in each layer): layer 0 runs
  // without, exactly as with zero biases there; layer 1 with its own.
  test::GgufModel only1 = test::tiny_llama();
  for (const char* b : {"attn_q.bias", "attn_k.bias", "attn_v.bias"})
    only1.tensor(std::string("blk.1.") + b, {8}, 100 + std::strlen(b), 0.8f);
  test::GgufModel zeros0 = only1, none = test::tiny_llama();
  for (const char* b : {"attn_q.bias", "attn_k.bias", "attn_v.bias"})
    zeros0.tensor(std::string("blk.0.") + b, {8}, std::vector<float>(8, 0.0f));
  CHECK(test::config_of(only1).attention_bias);
  CHECK_FALSE(test::config_of(only1).attention_out_bias);
  const std::vector<float> a = test::gguf_logits(only1, "bias1.gguf", kPrompt, kDecoded);
  const std::vector<float> b = test::gguf_logits(zeros0, "bias01.gguf", kPrompt, kDecoded);
  const std::vector<float> c = test::gguf_logits(none, "bias_none.gguf", kPrompt, kDecoded);
  CHECK(same_bits(a, b));
  CHECK_FALSE(same_bits(a, c));  // layer 1's biases are read, not ignored

  // An output bias in the last layer only, and q's in the first only.
  test::GgufModel mixed = test::tiny_llama();
  mixed.tensor("blk.1.attn_output.bias", {8}, 300, 0.8f);
  mixed.tensor("blk.0.attn_q.bias", {8}, 301, 0.8f);
  test::GgufModel mixed_zeros = mixed;
  mixed_zeros.tensor("blk.0.attn_output.bias", {8}, std::vector<float>(8, 0.0f));
  mixed_zeros.tensor("blk.1.attn_q.bias", {8}, std::vector<float>(8, 0.0f));
  CHECK(test::config_of(mixed).attention_out_bias);
  CHECK(same_bits(test::gguf_logits(mixed, "mixed.gguf", kPrompt, kDecoded),
                  test::gguf_logits(mixed_zeros, "mixed0.gguf", kPrompt, kDecoded)));
}

TEST_CASE("gguf: a tensor no block reads is refused naming it, in any layer") {
  const auto refused = [](const std::string& name, std::vector<std::uint64_t> ne,
                          const std::string& why) {
    test::GgufModel g = test::tiny_llama();
    g.tensor(name, std::move(ne), 7);
    const std::string msg = refusal(g);
    CAPTURE(msg);
    CHECK(msg.find("m.gguf: tensor '" + name + "': " + why) == 0);
  };
  refused("blk.1.ffn_up.bias", {16}, "not supported (FFN biases");
  refused("blk.0.ffn_gate.bias", {16}, "not supported (FFN biases");
  refused("blk.1.ffn_gate_inp.weight", {8, 4}, "not supported (mixture-of-experts routing");
  refused("blk.1.attn_qkv.weight", {8, 24}, "not supported (q, k and v fused");
  refused("blk.1.attn_sinks.weight", {2}, "no llama block reads it");
  refused("cls.weight", {8}, "no llama block reads it");
  refused("blk.2.attn_q.weight", {8, 8}, "layer 2 is past llama.block_count 2");
  refused("blk.7.attn_q.bias", {8}, "layer 7 is past llama.block_count 2");
}

namespace {

// The logits of `a` (a config of g's file, perhaps changed) on g's weights, prefill then decode.
std::vector<float> logits_with(const attn::ModelArgs& args, const std::filesystem::path& p,
                               const std::vector<std::int32_t>& prompt, std::int32_t next) {
  attn::ModelArgs a = args;
  a.max_batch_size = 1;
  attn::Transformer m = attn::make_transformer(
      a, attn::load_weights(a, p, {}, attn::ModelEnds{true, true}), std::int64_t(prompt.size()));
  std::vector<float> out(std::size_t((std::int64_t(prompt.size()) + 1) * a.vocab_size));
  attn::forward(m, prompt.data(), 1, std::int64_t(prompt.size()), 0, out.data(), true);
  attn::forward(m, &next, 1, 1, std::int64_t(prompt.size()),
                out.data() + prompt.size() * std::size_t(a.vocab_size));
  return out;
}

}  // namespace

TEST_CASE("gguf: Llama 3.1's rope_freqs.weight divides each frequency by its factor") {
  // head_dim 4, theta 10000: frequencies 1 and 0.01, wavelengths 6.3 and 628. Llama 3's scaling
  // (factor 8, low 1, high 4, original context 32) keeps wavelengths under 8 and divides those
  // over 32 by 8: factors exactly 1 and 8, as llama.cpp's converter writes them. The file's
  // factors are then the same model as Hugging Face's rope_scaling llama3 (config_hf.cpp), bit
  // for bit, past the original 32 positions too.
  test::GgufModel g = test::tiny_llama();
  g.tensor("rope_freqs.weight", {2}, std::vector<float>{1.0f, 8.0f});
  const std::filesystem::path p = g.save("rope_freqs.gguf");
  const attn::ModelArgs a = attn::load_config(p);
  CHECK(a.rope_freq_factors == std::vector<float>{1.0f, 8.0f});
  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back((i * 7 + 3) % 16);
  attn::ModelArgs hf = a;
  hf.rope_freq_factors.clear();
  hf.rope_scaling = attn::RopeScaling{8, 1, 4, 32};
  const std::vector<float> file = logits_with(a, p, prompt, 5);
  CHECK(same_bits(file, logits_with(hf, p, prompt, 5)));
  hf.rope_scaling.reset();
  CHECK_FALSE(same_bits(file, logits_with(hf, p, prompt, 5)));  // the factors are used

  test::GgufModel bad = test::tiny_llama();
  bad.tensor("rope_freqs.weight", {4}, 3);
  CHECK(refusal(bad).find("m.gguf: tensor 'rope_freqs.weight': expected shape [2]") == 0);
  bad.tensor("rope_freqs.weight", {2}, std::vector<float>{1.0f, -2.0f});
  CHECK(refusal(bad).find("m.gguf: tensor 'rope_freqs.weight': factor 1 is -2") == 0);
}

TEST_CASE("gguf: qwen3 RMSNorms each head of q and k before RoPE, key_length its own") {
  // head_dim 8 from key_length (dim 8 / 2 heads would be 4): q is [2 heads x 8], o reads 16.
  test::GgufModel g = test::tiny_llama("qwen3", 1);
  g.u32("qwen3.attention.key_length", 8).u32("qwen3.attention.value_length", 8);
  g.tensor("blk.0.attn_q.weight", {8, 16}, 40, 0.6f);
  g.tensor("blk.0.attn_k.weight", {8, 16}, 41, 0.6f);
  g.tensor("blk.0.attn_v.weight", {8, 16}, 42, 0.6f);
  g.tensor("blk.0.attn_output.weight", {16, 8}, 43, 0.6f);
  const std::vector<float> qn = {1.5f, 0.5f, 1.0f, 2.0f, 0.25f, 1.25f, 0.75f, 1.0f};
  const std::vector<float> kn = {0.5f, 1.0f, 1.5f, 1.0f, 2.0f, 0.5f, 1.0f, 0.75f};
  g.tensor("blk.0.attn_q_norm.weight", {8}, qn);
  g.tensor("blk.0.attn_k_norm.weight", {8}, kn);
  const std::filesystem::path p = g.save("qwen3.gguf");
  attn::ModelArgs a = attn::load_config(p);
  REQUIRE(a.arch == "qwen3");
  CHECK(a.head_dim() == 8);
  CHECK(a.rope == attn::Rope::half);
  a.max_batch_size = 1;
  attn::Transformer m =
      attn::make_transformer(a, attn::load_weights(a, p, {}, attn::ModelEnds{true, true}), 5);
  std::map<attn::Site, std::vector<float>> seen;
  attn::Observer o;
  for (attn::Site s : {attn::Site::q_in, attn::Site::k_in, attn::Site::q, attn::Site::k})
    o.sites |= attn::site_bit(s);
  o.on_tensor = [&](const attn::Observation& ob) {
    std::int64_t n = 1;
    for (int i = 0; i < ob.ndim; ++i) n *= ob.shape[i];
    seen[ob.site].assign(ob.data, ob.data + n);
  };
  attn::observe(m, &o);
  std::vector<float> logits(std::size_t(5 * a.vocab_size));
  attn::forward(m, kPrompt.data(), 1, 5, 0, logits.data(), true);
  // Hugging Face's Qwen3Attention: q_norm(q_proj(x).view(heads, head_dim)), then rotate_half,
  // here in double from the reported projections.
  for (const auto& [in, out, w] : {std::tuple{attn::Site::q_in, attn::Site::q, &qn},
                                   std::tuple{attn::Site::k_in, attn::Site::k, &kn}}) {
    const std::vector<float>&x = seen.at(in), &y = seen.at(out);
    REQUIRE(x.size() == 5 * 2 * 8);
    for (std::size_t t = 0; t < 5; ++t)
      for (std::size_t h = 0; h < 2; ++h) {
        const float* v = x.data() + (t * 2 + h) * 8;
        double ss = 0, n[8];
        for (int i = 0; i < 8; ++i) ss += double(v[i]) * v[i];
        for (int i = 0; i < 8; ++i) n[i] = v[i] / std::sqrt(ss / 8 + 1e-5) * (*w)[std::size_t(i)];
        for (int i = 0; i < 4; ++i) {
          const double angle = double(t) * std::pow(10000.0, -2.0 * i / 8);
          const double e0 = n[i] * std::cos(angle) - n[i + 4] * std::sin(angle);
          const double e1 = n[i] * std::sin(angle) + n[i + 4] * std::cos(angle);
          CHECK(y[(t * 2 + h) * 8 + std::size_t(i)] == doctest::Approx(e0).epsilon(1e-5));
          CHECK(y[(t * 2 + h) * 8 + std::size_t(i) + 4] == doctest::Approx(e1).epsilon(1e-5));
        }
      }
  }
  // A llama file holding q/k norms is refused: its blocks have none.
  test::GgufModel llama = test::tiny_llama();
  llama.tensor("blk.0.attn_q_norm.weight", {4}, 5);
  CHECK(refusal(llama).find("m.gguf: tensor 'blk.0.attn_q_norm.weight': no llama block") == 0);
}

TEST_CASE("hf: a qwen3 config.json is the qwen3 row, its q_norm and k_norm read per layer") {
  const attn::ModelArgs a = attn::parse_config(
      R"({"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
          "intermediate_size": 96, "hidden_act": "silu", "attention_bias": false})",
      "config.json");
  CHECK(a.arch == "qwen3");
  CHECK(a.qk_norm == attn::QkNorm::per_head);
  CHECK(a.head_dim() == 32);
  attn::LayerWeights w;
  const std::vector<attn::TensorSpec> specs = attn::layer_tensor_specs(a, w, 1);
  const auto has = [&](const std::string& name, std::int64_t n) {
    return std::any_of(specs.begin(), specs.end(), [&](const attn::TensorSpec& s) {
      return s.name == name && s.shape == std::vector<std::int64_t>{n};
    });
  };
  CHECK(has("layers.1.attention.q_norm.weight", 32));
  CHECK(has("layers.1.attention.k_norm.weight", 32));
}

TEST_CASE("gguf: granite's four multipliers, each where llama.cpp applies it") {
  // Powers of two keep every product exact: granite with embedding_scale 2, residual_scale 0.5,
  // attention.scale 0.5 (= 1/sqrt(head_dim 4), so scores as llama's) and logit_scale 2 is llama
  // with the embeddings doubled and wo, ffn_down and the head halved, bit for bit.
  test::GgufModel llama = test::tiny_llama();
  test::GgufModel granite = test::tiny_llama("granite");
  granite.tensors = llama.tensors;
  granite.f32("granite.embedding_scale", 2.0f)
      .f32("granite.residual_scale", 0.5f)
      .f32("granite.attention.scale", 0.5f)
      .f32("granite.logit_scale", 2.0f);
  const auto times = [&](const std::string& name, float s) {
    for (float& v : llama.tensors.at(name).values) v *= s;
  };
  times("token_embd.weight", 2.0f);
  times("output.weight", 0.5f);
  for (const char* t : {"blk.0.attn_output.weight", "blk.1.attn_output.weight",
                        "blk.0.ffn_down.weight", "blk.1.ffn_down.weight"})
    times(t, 0.5f);
  const attn::ModelArgs a = test::config_of(granite);
  CHECK(a.embedding_scale == 2.0);
  CHECK(a.residual_scale == 0.5);
  CHECK(a.attention_scale == 0.5);
  CHECK(a.logit_scale == 2.0);
  CHECK(a.rope == attn::Rope::interleaved);
  CHECK(same_bits(test::gguf_logits(granite, "granite.gguf", kPrompt, kDecoded),
                  test::gguf_logits(llama, "granite_llama.gguf", kPrompt, kDecoded)));
  test::GgufModel bad = test::tiny_llama("granite");
  bad.f32("granite.logit_scale", -1.0f);
  CHECK(refusal(bad).find("key 'granite.logit_scale': must be finite and positive") !=
        std::string::npos);
  granite.tensor("blk.1.attn_output.bias", {8}, 9);
  CHECK(refusal(granite).find("tensor 'blk.{l}.attn_output.bias': not supported beside "
                              "granite.residual_scale") != std::string::npos);
}

namespace {

// tiny_llama's weights as `arch` stores them; phi3: q, k and v stacked into attn_qkv and gate
// then up into ffn_up, as llama.cpp's converter writes Phi-3's qkv_proj and gate_up_proj.
test::GgufModel tiny_fused(const std::string& arch) {
  test::GgufModel g = test::tiny_llama(arch);
  if (arch != "phi3") return g;
  const auto stack = [&](const std::string& into, std::initializer_list<std::string> parts) {
    std::vector<float> v;
    for (const std::string& part : parts) {
      const std::vector<float>& p = g.tensors.at(part).values;
      v.insert(v.end(), p.begin(), p.end());
      g.tensors.erase(part);
    }
    const std::uint64_t rows = v.size() / 8;
    g.tensor(into, {8, rows}, std::move(v));
  };
  for (int l = 0; l < 2; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    stack(p + "attn_qkv.weight", {p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"});
    stack(p + "ffn_up.weight", {p + "ffn_gate.weight", p + "ffn_up.weight"});
  }
  return g;
}

}  // namespace

TEST_CASE("gguf: phi3's fused attn_qkv and gate/up ffn_up run as their parts, as views") {
  // qwen2's row rotates halves as phi3's does and has no biases here: the same model.
  const test::GgufModel phi3 = tiny_fused("phi3"), qwen2 = tiny_fused("qwen2");
  CHECK(same_bits(test::gguf_logits(phi3, "phi3_fused.gguf", kPrompt, kDecoded),
                  test::gguf_logits(qwen2, "phi3_parts.gguf", kPrompt, kDecoded)));
  const std::filesystem::path p = phi3.save("phi3_views.gguf");
  const attn::ModelArgs a = attn::load_config(p);
  const attn::TransformerWeights w = attn::load_weights(a, p);
  // Views into the fused tensor: k right after q's rows, up right after gate's, nothing owned.
  const auto at = [](const attn::Matrix& m) { return static_cast<const char*>(m.data); };
  CHECK(at(w.layers[0].wk) == at(w.layers[0].wq) + 8 * 8 * 4);
  CHECK(at(w.layers[0].wv) == at(w.layers[0].wk) + 8 * 8 * 4);
  CHECK(at(w.layers[0].w3) == at(w.layers[0].w1) + 16 * 8 * 4);
  CHECK(w.owned.empty());
}

TEST_CASE("gguf: phi3's LongRoPE factors by context, magnitude, partial rotary") {
  test::GgufModel g = tiny_fused("phi3");
  g.u32("phi3.rope.dimension_count", 2)  // of the head's 4
      .u32("phi3.rope.scaling.original_context_length", 256)
      .f32("phi3.rope.scaling.attn_factor", 1.25f)
      .string("phi3.rope.scaling.type", "longrope")
      .tensor("rope_factors_short.weight", {1}, std::vector<float>{2.0f})
      .tensor("rope_factors_long.weight", {1}, std::vector<float>{8.0f});
  attn::ModelArgs a = test::config_of(g);
  CHECK(a.rotary_dims() == 2);
  CHECK(a.rope_attn_factor == doctest::Approx(1.25));
  // llama.cpp's choice: long when n_ctx, padded to a multiple of 256, exceeds the original.
  a.max_seq_len = 256;
  CHECK(attn::rope_factors(a)[0] == 2.0f);
  a.max_seq_len = 257;
  CHECK(attn::rope_factors(a)[0] == 8.0f);

  // Only one of the pair, and factors not one per rotated pair, are refused naming them.
  test::GgufModel one = g;
  one.tensors.erase("rope_factors_long.weight");
  CHECK(refusal(one).find("m.gguf: tensor 'rope_factors_long.weight' is missing") == 0);
  test::GgufModel wide = g;
  wide.tensor("rope_factors_long.weight", {2}, std::vector<float>{1.0f, 1.0f});
  CHECK(refusal(wide).find("m.gguf: tensor 'rope_factors_long.weight': expected shape [1]") == 0);
  test::GgufModel odd = tiny_fused("phi3");
  odd.u32("phi3.rope.dimension_count", 3);
  CHECK(refusal(odd).find("m.gguf: key 'phi3.rope.dimension_count': 3: RoPE rotates an even") == 0);
}

TEST_CASE("gguf: gemma2 and gemma3 keys as llama.cpp reads them, with its defaults") {
  // Gemma 2: soft-caps 50 and 30, window 4096 on every other layer from layer 0, its global
  // base on the sliding layers; embeddings times sqrtf(dim); GeGLU; norms before and after.
  const attn::ModelArgs g2 = test::config_of(test::tiny_llama("gemma2", 3));
  CHECK(g2.geglu);
  CHECK(g2.pre_norms);
  CHECK(g2.post_norms);
  CHECK(g2.rope == attn::Rope::half);
  CHECK(g2.embedding_scale == double(std::sqrt(8.0f)));
  CHECK(g2.attention_scale == 0);  // the kernel's 1/sqrt(key_length): not a 27B model
  // The 27B model (46 layers): 1/sqrt(n_embd / n_head) as llama.cpp, whatever key_length is.
  test::GgufModel big = test::tiny_llama("gemma2", 46);
  big.u32("gemma2.attention.key_length", 8).u32("gemma2.attention.value_length", 8);
  CHECK(test::config_of(big).attention_scale == double(1.0f / std::sqrt(4.0f)));
  CHECK(g2.attn_softcap == 50);
  CHECK(g2.final_softcap == 30);
  CHECK(g2.sliding_window == 4096);
  CHECK(g2.sliding_layers == std::vector<std::uint8_t>{1, 0, 1});
  CHECK(g2.rope_theta_swa == g2.rope_theta);
  CHECK(g2.norm_weight_offset == 0);  // as stored: the converter added Gemma's 1
  test::GgufModel caps = test::tiny_llama("gemma2", 3);
  caps.f32("gemma2.attn_logit_softcapping", 3).f32("gemma2.final_logit_softcapping", 0);
  caps.u32("gemma2.attention.sliding_window", 2).u32("gemma2.attention.sliding_window_pattern", 3);
  const attn::ModelArgs c = test::config_of(caps);
  CHECK(c.attn_softcap == 3);
  CHECK(c.final_softcap == 0);
  CHECK(c.sliding_window == 2);
  CHECK(c.sliding_layers == std::vector<std::uint8_t>{1, 1, 0});
  test::GgufModel bad = test::tiny_llama("gemma2", 1);
  bad.f32("gemma2.final_logit_softcapping", -1);
  CHECK(refusal(bad).find("m.gguf: key 'gemma2.final_logit_softcapping': must be finite and not "
                          "negative") == 0);
  // Gemma 3: no window without the key; with it, five layers in six slide, on base 10000
  // unscaled while the global layers take rope.freq_base and the linear factor.
  const attn::ModelArgs g3 = test::config_of(test::tiny_llama("gemma3", 6));
  CHECK(g3.sliding_layers.empty());
  CHECK(g3.attn_softcap == 0);
  CHECK(g3.final_softcap == 0);
  test::GgufModel swa = test::tiny_llama("gemma3", 7);
  swa.u32("gemma3.attention.sliding_window", 4).f32("gemma3.rope.freq_base", 1e6f);
  swa.string("gemma3.rope.scaling.type", "linear").f32("gemma3.rope.scaling.factor", 8);
  const attn::ModelArgs s = test::config_of(swa);
  CHECK(s.sliding_layers == std::vector<std::uint8_t>{1, 1, 1, 1, 1, 0, 1});
  CHECK(s.rope_theta_swa == 10000);
  CHECK(s.rope_freq_scale == 0.125);
  CHECK(s.rope_freq_scale_swa == 1);
  CHECK(s.sliding_window == 4);
  // A window shorter than the cache is Gemma's mask, not Mistral's refusal.
  CHECK(s.max_seq_len > s.sliding_window);
}

TEST_CASE("hf: gemma2 and gemma3_text config.json: Gemma's keys, norm weights as 1 + w") {
  const attn::ModelArgs a = attn::parse_config(
      R"({"model_type": "gemma3_text", "hidden_size": 64, "num_hidden_layers": 3,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
          "intermediate_size": 96, "hidden_activation": "gelu_pytorch_tanh",
          "query_pre_attn_scalar": 16, "sliding_window": 5, "rope_theta": 1000000.0,
          "rope_local_base_freq": 10000.0, "final_logit_softcapping": null,
          "rope_scaling": {"rope_type": "linear", "factor": 4.0},
          "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]})",
      "config.json");
  CHECK(a.arch == "gemma3");
  CHECK(a.qk_norm == attn::QkNorm::per_head);
  CHECK(a.norm_weight_offset == 1);
  CHECK(a.tie_word_embeddings);
  CHECK(a.geglu);
  CHECK(a.attention_scale == 0.25);
  CHECK(a.final_softcap == 0);
  CHECK(a.sliding_layers == std::vector<std::uint8_t>{1, 0, 1});
  CHECK(a.rope_freq_scale == 0.25);
  CHECK(a.rope_freq_scale_swa == 1);
  CHECK(a.rope_theta_swa == 10000);
  const attn::ModelArgs g2 = attn::parse_config(
      R"({"model_type": "gemma2", "hidden_size": 64, "num_hidden_layers": 4,
          "num_attention_heads": 4, "head_dim": 16, "intermediate_size": 96,
          "query_pre_attn_scalar": 16})",
      "config.json");
  CHECK(g2.attn_softcap == 50);
  CHECK(g2.final_softcap == 30);
  CHECK(g2.attention_scale == 0);
  CHECK(g2.sliding_layers == std::vector<std::uint8_t>{1, 0, 1, 0});
  attn::LayerWeights w;
  const std::vector<attn::TensorSpec> specs = attn::layer_tensor_specs(g2, w, 0);
  for (const char* name : {"attention_norm", "post_attention_norm", "ffn_norm", "post_ffn_norm"})
    CHECK(std::any_of(specs.begin(), specs.end(), [&](const attn::TensorSpec& s) {
      return s.name == std::string("layers.0.") + name + ".weight";
    }));
  try {
    attn::parse_config(R"({"model_type": "gemma2", "hidden_size": 64, "num_hidden_layers": 2,
                           "num_attention_heads": 4, "intermediate_size": 96,
                           "hidden_activation": "gelu"})",
                       "config.json");
    FAIL("accepted");
  } catch (const attn::InputError& e) {
    CHECK(std::string(e.what()).find("config.json: key 'hidden_activation'") == 0);
  }
}

TEST_CASE("gguf: gemma2's final soft-cap bounds the logits, and the logit lens applies it too") {
  test::GgufModel base = test::tiny_llama("gemma2", 2);
  std::uint64_t seed = 500;
  for (const char* l : {"blk.0.", "blk.1."})
    for (const char* n : {"post_attention_norm.weight", "post_ffw_norm.weight"})
      base.tensor(std::string(l) + n, {8}, seed++, 0.2f, 1.0f);
  test::GgufModel capped = base, uncapped = base;
  capped.f32("gemma2.final_logit_softcapping", 0.5f);
  uncapped.f32("gemma2.final_logit_softcapping", 0);
  const auto run = [](const test::GgufModel& g, const char* file, bool lens) {
    const std::filesystem::path p = g.save(file);
    attn::ModelArgs a = attn::load_config(p);
    a.max_batch_size = 1;
    attn::Transformer m =
        attn::make_transformer(a, attn::load_weights(a, p, {}, attn::ModelEnds{true, true}), 5);
    attn::LensRecorder rec(m, 5, /*keep_logits=*/true);
    if (lens) attn::observe(m, &rec.observer());
    std::vector<float> logits(std::size_t(5 * a.vocab_size));
    attn::forward(m, kPrompt.data(), 1, 5, 0, logits.data(), true);
    if (lens)  // the last block's lens: the logits' bits, soft-capped as they are
      CHECK(std::memcmp(attn::lens_logits(rec.lens(), a.n_layers - 1), logits.data(),
                        logits.size() * sizeof(float)) == 0);
    return logits;
  };
  const std::vector<float> c = run(capped, "gemma2_capped.gguf", true);
  const std::vector<float> u = run(uncapped, "gemma2_uncapped.gguf", false);
  REQUIRE(c.size() == u.size());
  float widest = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    widest = std::max(widest, std::fabs(u[i]));
    CHECK(std::fabs(c[i]) < 0.5f);
    CHECK(c[i] == doctest::Approx(0.5 * std::tanh(double(u[i]) / 0.5)).epsilon(1e-5));
  }
  CHECK(widest > 1.0f);  // the cap bites
}
