#pragma once
// A small GGUF model written in memory for the architecture tests: the metadata keys and F32
// tensors a test gives, laid out as llama.cpp's gguf writer lays them out (version 3, alignment
// 32), saved to a temporary file and opened as a run opens it (gguf_config, load_weights).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "attn/io/gguf.hpp"
#include "attn/model/config.hpp"
#include "attn/model/model.hpp"
#include "attn/model/weights.hpp"
#include "test_support.hpp"

namespace test {

struct GgufModel {
  struct Tensor {
    std::vector<std::uint64_t> ne;  // ggml's order, innermost first
    std::vector<float> values;
  };
  std::string kv;  // the keys as written
  std::uint64_t keys = 0;
  std::map<std::string, Tensor> tensors;  // written in name order

  template <typename T>
  void put(T v) {
    kv.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void str(const std::string& s) {
    put<std::uint64_t>(s.size());
    kv += s;
  }
  void key(const std::string& k, std::uint32_t type) {
    str(k);
    put(type);
    ++keys;
  }
  GgufModel& u32(const std::string& k, std::uint32_t v) {
    key(k, 4);
    put(v);
    return *this;
  }
  GgufModel& f32(const std::string& k, float v) {
    key(k, 6);
    put(v);
    return *this;
  }
  GgufModel& string(const std::string& k, const std::string& v) {
    key(k, 8);
    str(v);
    return *this;
  }
  // A tensor of values drawn from `seed` in [-scale, scale) (a norm: 1 + that), or given.
  GgufModel& tensor(const std::string& name, std::vector<std::uint64_t> ne, std::uint64_t seed,
                    float scale = 0.5f, float offset = 0) {
    std::uint64_t n = 1;
    for (std::uint64_t d : ne) n *= d;
    std::vector<float> v(n);
    std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (float& f : v) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      f = offset + scale * (float(x >> 40) / float(1 << 23) - 1.0f);
    }
    tensors[name] = {std::move(ne), std::move(v)};
    return *this;
  }
  GgufModel& tensor(const std::string& name, std::vector<std::uint64_t> ne,
                    std::vector<float> values) {
    tensors[name] = {std::move(ne), std::move(values)};
    return *this;
  }

  std::vector<std::uint8_t> bytes() const {
    std::string out = "GGUF";
    auto put_raw = [&](auto v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put_raw(std::uint32_t(3));
    put_raw(std::uint64_t(tensors.size()));
    put_raw(keys);
    out += kv;
    std::uint64_t offset = 0;
    for (const auto& [name, t] : tensors) {
      put_raw(std::uint64_t(name.size()));
      out += name;
      put_raw(std::uint32_t(t.ne.size()));
      for (std::uint64_t d : t.ne) put_raw(d);
      put_raw(std::uint32_t(0));  // F32
      put_raw(offset);
      offset += (t.values.size() * 4 + 31) / 32 * 32;
    }
    out.resize((out.size() + 31) / 32 * 32, '\0');
    for (const auto& [name, t] : tensors) {
      out.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * 4);
      out.resize((out.size() + 31) / 32 * 32, '\0');
    }
    return {out.begin(), out.end()};
  }

  std::filesystem::path save(const std::string& name) const {
    const std::filesystem::path p = temp_path(name);
    const std::vector<std::uint8_t> b = bytes();
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
    return p;
  }
};

// A llama-shaped model under `arch`'s keys: dim 8, 2 heads of 4, 2 KV heads, FFN 16, vocab 16,
// `layers` layers with the llama tensors of each (drawn), an untied head.
inline GgufModel tiny_llama(const std::string& arch = "llama", std::uint32_t layers = 2) {
  GgufModel g;
  g.string("general.architecture", arch);
  g.u32(arch + ".context_length", 64)
      .u32(arch + ".embedding_length", 8)
      .u32(arch + ".block_count", layers)
      .u32(arch + ".feed_forward_length", 16)
      .u32(arch + ".attention.head_count", 2)
      .u32(arch + ".attention.head_count_kv", 2)
      .u32(arch + ".vocab_size", 16)
      .f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  std::uint64_t seed = 1;
  g.tensor("token_embd.weight", {8, 16}, seed++, 1.0f);
  g.tensor("output_norm.weight", {8}, seed++, 0.2f, 1.0f);
  g.tensor("output.weight", {8, 16}, seed++, 1.0f);
  for (std::uint32_t l = 0; l < layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    g.tensor(p + "attn_norm.weight", {8}, seed++, 0.2f, 1.0f);
    g.tensor(p + "ffn_norm.weight", {8}, seed++, 0.2f, 1.0f);
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_output"})
      g.tensor(p + m + ".weight", {8, 8}, seed++, 0.6f);
    g.tensor(p + "ffn_gate.weight", {8, 16}, seed++, 0.6f);
    g.tensor(p + "ffn_up.weight", {8, 16}, seed++, 0.6f);
    g.tensor(p + "ffn_down.weight", {16, 8}, seed++, 0.4f);
  }
  return g;
}

inline attn::ModelArgs config_of(const GgufModel& g) {
  const std::vector<std::uint8_t> b = g.bytes();
  return attn::gguf_config(attn::parse_gguf(b, "m.gguf"));
}

// The logits of every position of `tokens` in one prefill, then of each further token decoded
// one at a time: rows of vocab_size.
inline std::vector<float> gguf_logits(const GgufModel& g, const std::string& name,
                                      const std::vector<std::int32_t>& prompt,
                                      const std::vector<std::int32_t>& decoded = {}) {
  const std::filesystem::path p = g.save(name);
  attn::ModelArgs a = attn::load_config(p);
  a.max_batch_size = 1;
  const std::int64_t n = std::int64_t(prompt.size() + decoded.size());
  attn::Transformer m = attn::make_transformer(
      a, attn::load_weights(a, p, {}, attn::ModelEnds{true, true}), std::int64_t(prompt.size()));
  std::vector<float> out(std::size_t(n * a.vocab_size));
  attn::forward(m, prompt.data(), 1, std::int64_t(prompt.size()), 0, out.data(), true);
  for (std::size_t i = 0; i < decoded.size(); ++i)
    attn::forward(m, &decoded[i], 1, 1, std::int64_t(prompt.size() + i),
                  out.data() + (prompt.size() + i) * std::size_t(a.vocab_size));
  return out;
}

}  // namespace test
