// The whole token model (tok_embeddings, blocks, norm, output) against tests/golden/model, made by
// make_model.py's float64 reference of Meta's Transformer.forward(tokens, start_pos): every
// position's logits of a prefill, and 32 greedy steps token for token, Meta-named and Hugging
// Face-named checkpoints, F32 and BF16, tied and untied, on every kernel set and 1 or 2 threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "attn/io/safetensors.hpp"
#include "attn/model/config.hpp"
#include "attn/model/model.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;

struct Expected {
  attn::SafetensorsFile file;
  std::vector<std::int32_t> tokens, greedy;  // [B, T], [B, 32]
  std::vector<float> logits_storage, greedy_storage;
  const float* logits = nullptr;         // [B, T, vocab]
  const float* greedy_logits = nullptr;  // [B, 32, vocab]
};

Expected read_expected(const fs::path& path) {
  Expected e;
  e.file = attn::open_safetensors(path);
  e.tokens = test::i32_tensor(path, "tokens");
  e.greedy = test::i32_tensor(path, "greedy");
  e.logits = attn::tensor_as_f32(e.file, "logits", e.logits_storage);
  e.greedy_logits = attn::tensor_as_f32(e.file, "greedy_logits", e.greedy_storage);
  return e;
}

std::int32_t argmax(const float* v, std::int64_t n) {
  return std::int32_t(std::max_element(v, v + n) - v);  // ties: the lowest id, as the reference
}

void check_case(const nlohmann::json& c, const std::string& isa, int threads) {
  const fs::path dir = test::golden_dir() / "model" / c["name"].get<std::string>();
  const std::string name = c["name"];
  INFO(name << " on " << isa << ", " << threads << " threads");
  attn::ModelArgs args = attn::load_config(dir / c["config"].get<std::string>());
  const attn::ModelEnds ends{true, true};
  const std::int64_t B = c["batch"], T = c["prompt_len"], steps = c["greedy_steps"];
  args.max_batch_size = B;
  args.max_seq_len = std::max<std::int64_t>(args.max_seq_len, T + steps);
  const std::int64_t V = args.vocab_size;
  const test::Tolerance tol{c["tolerance"]["rtol"], c["tolerance"]["atol"]};
  const Expected e = read_expected(dir / "expected.safetensors");
  attn::Transformer m = attn::make_transformer(
      args, attn::load_weights(args, dir / c["weights"].get<std::string>(), {}, ends), B * T,
      attn::make_runtime(threads, attn::kParallelFlops, isa));
  std::vector<float> logits(std::size_t(B * T * V));
  attn::forward(m, e.tokens.data(), B, T, 0, logits.data(), /*all_positions=*/true);
  const test::Diff d = test::compare(logits.data(), e.logits, B * T * V, tol);
  CHECK_MESSAGE(d.failures == 0, "prefill logits: worst ratio " << d.worst_ratio);
  std::vector<std::int32_t> next(static_cast<std::size_t>(B));
  for (std::int64_t b = 0; b < B; ++b)
    next[std::size_t(b)] = argmax(&logits[std::size_t(((b + 1) * T - 1) * V)], V);
  std::vector<float> step(static_cast<std::size_t>(B * V));
  for (std::int64_t s = 0; s < steps; ++s) {
    for (std::int64_t b = 0; b < B; ++b) {
      INFO("step " << s << ", sequence " << b);
      REQUIRE(next[std::size_t(b)] == e.greedy[std::size_t(b * steps + s)]);
    }
    attn::forward(m, next.data(), B, 1, T + s, step.data());
    for (std::int64_t b = 0; b < B; ++b)
      next[std::size_t(b)] = argmax(&step[std::size_t(b * V)], V);
    if (s + 1 < steps) {
      // step s+1's logits are greedy_logits[:, s+1]: the reference's choice came from them
      std::vector<float> want(std::size_t(B * V));
      for (std::int64_t b = 0; b < B; ++b)
        std::copy_n(e.greedy_logits + (b * steps + s + 1) * V, V, want.begin() + b * V);
      const test::Diff ds = test::compare(step.data(), want.data(), B * V, tol);
      CHECK_MESSAGE(ds.failures == 0,
                    "step " << s + 1 << " logits: worst ratio " << ds.worst_ratio);
    }
  }
}

nlohmann::json cases() {
  std::ifstream in(test::golden_dir() / "model" / "cases.json");
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("token model: logits and 32 greedy steps match the float64 reference") {
  const nlohmann::json all = cases();
  REQUIRE(all.size() >= 4);
  for (const std::string& isa : test::kernel_names())
    for (const int threads : {1, 2})
      for (const auto& c : all) check_case(c, isa, threads);
}
