// A decode step allocates nothing: every buffer is made when the model is.
#include <doctest/doctest.h>

#include "count_allocations.hpp"
#include "test_support.hpp"

#include "attn/engine/run.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/model/hooks.hpp"
#include "attn/model/model.hpp"

#if !defined(__SANITIZE_ADDRESS__)
TEST_CASE("forward: a decode step and a prefill allocate nothing") {
  attn::ModelArgs a = test::small_llama_args(attn::Block::llama, 1);
  a.rope = attn::Rope::half;
  a.dim = 64;
  a.n_heads = 8;
  a.attention_bias = true;
  a.max_seq_len = 32;
  // Prefill of 2 x 5 rows runs the batched kernel; of 2 x 20, the same in two tiles (> kBatchRows).
  for (std::int64_t P : {5, 20})
    for (int threads : {1, 2}) {
      // Every parallel path, even on this small model.
      const attn::Runtime rt = attn::make_runtime(threads, 0);
      const attn::RunOptions opts{2, P, 3};
      const std::vector<float> x = attn::seeded_input(a, opts, 1);
      std::vector<float> out(x.size());
      // A first model starts the thread pool: once per process.
      attn::Transformer warm = attn::make_transformer(a, attn::seeded_weights(a, 1), 2 * P, rt);
      attn::forward(warm, x.data(), 2, P, 0, out.data());
      attn::Transformer m = attn::make_transformer(a, attn::seeded_weights(a, 1), 2 * P, rt);
      const long before = g_allocations.load();
      attn::forward(m, x.data(), 2, P, 0, out.data());
      for (std::int64_t pos = P; pos < P + 3; ++pos)
        attn::forward(m, x.data(), 2, 1, pos, out.data());
      const long allocations = g_allocations.load() - before;
      CAPTURE(P);
      CAPTURE(threads);
      CHECK(allocations == 0);
    }
}

TEST_CASE("forward: mask none with a padding mask and the encoder block allocate nothing") {
  attn::ModelArgs a = attn::seed_args();
  a.block = attn::Block::encoder;
  a.dim = 64;
  a.n_heads = 8;
  a.n_kv_heads = 2;
  a.attention_bias = true;
  a.mask = attn::Mask::none;
  a.ffn_hidden_set = 96;
  const attn::Runtime rt = attn::make_runtime(2, 0);
  const attn::RunOptions opts{2, 5, 3};
  const std::vector<float> x = attn::seeded_input(a, opts, 1);
  std::vector<float> out(x.size());
  std::vector<std::uint8_t> keep(16, 1);
  keep[3] = keep[8] = keep[9] = 0;
  attn::Transformer warm = attn::make_transformer(a, attn::seeded_weights(a, 1), 2 * 5, rt);
  attn::forward(warm, x.data(), 2, 5, 0, out.data());
  attn::Transformer m = attn::make_transformer(a, attn::seeded_weights(a, 1), 2 * 5, rt);
  m.mask.keep = keep.data();
  m.mask.ld = 8;
  const long before = g_allocations.load();
  attn::forward(m, x.data(), 2, 5, 0, out.data());
  for (std::int64_t pos = 5; pos < 8; ++pos) attn::forward(m, x.data(), 2, 1, pos, out.data());
  const long allocations = g_allocations.load() - before;
  CHECK(allocations == 0);
}

// The observer's and the patches' model: one llama layer of dim 64 with 8 heads.
attn::ModelArgs observed_args() {
  attn::ModelArgs a = test::small_llama_args(attn::Block::llama, 1);
  a.dim = 64;
  a.n_heads = 8;
  a.max_seq_len = 32;
  return a;
}

TEST_CASE("observer: an observer asking nothing, or every site, allocates nothing in forward") {
  const attn::ModelArgs a = observed_args();
  const attn::Runtime rt = attn::make_runtime(2, 0);
  const attn::RunOptions opts{2, 5, 3};
  const std::vector<float> x = attn::seeded_input(a, opts, 1);
  std::vector<float> out(x.size());
  attn::Transformer warm = attn::make_transformer(a, attn::seeded_weights(a, 1), 2 * 5, rt);
  attn::forward(warm, x.data(), 2, 5, 0, out.data());
  // [n_layers] buffers of [2, n_heads, 5, 8] at most: the probabilities of every call below.
  std::vector<std::vector<float>> probs(std::size_t(a.n_layers),
                                        std::vector<float>(std::size_t(2 * 8 * 5 * 8)));
  double sum = 0;
  long reported = 0;
  attn::Observer nothing;
  nothing.on_tensor = [&](const attn::Observation&) { ++reported; };
  attn::Observer every;
  every.sites = attn::kAllSites;
  every.probs = [&](std::int64_t layer, std::int64_t, std::int64_t, std::int64_t, std::int64_t) {
    return probs[std::size_t(layer)].data();
  };
  every.on_tensor = [&](const attn::Observation& o) {
    sum += double(o.data[0]);
    ++reported;
  };
  // The sites computed apart (attn_scores, result, mlp_pre/post, the scales: observer.hpp) have
  // scratch grown by the first call that asks for them: every site allocates nothing from the
  // second round of the same calls on.
  const std::int64_t block_points = std::int64_t(attn::hook_points(a, {}).size());
  for (const attn::Observer* observer : {&nothing, &every}) {
    attn::Transformer m = attn::make_transformer(a, attn::seeded_weights(a, 1), 2 * 5, rt);
    attn::observe(m, observer);
    for (int round = 0; round < 2; ++round) {
      CAPTURE(round);
      reported = 0;
      const long before = g_allocations.load();
      attn::forward(m, x.data(), 2, 5, 0, out.data());
      for (std::int64_t pos = 5; pos < 8; ++pos) attn::forward(m, x.data(), 2, 1, pos, out.data());
      const long allocations = g_allocations.load() - before;
      if (round == 1 || observer == &nothing) CHECK(allocations == 0);
      CHECK(reported == (observer == &every ? 4 * block_points : 0));
    }
  }
}
TEST_CASE("patch: a forward patching every site allocates nothing") {
  const attn::ModelArgs a = observed_args();
  const attn::Runtime rt = attn::make_runtime(2, 0);
  const attn::RunOptions opts{2, 5, 3};
  const std::vector<float> x = attn::seeded_input(a, opts, 1);
  std::vector<float> out(x.size());
  attn::Transformer warm = attn::make_transformer(a, attn::seeded_weights(a, 1), 2 * 5, rt);
  attn::forward(warm, x.data(), 2, 5, 0, out.data());
  std::vector<float> probs(std::size_t(2 * 8 * 5 * 8));  // [2, n_heads, 5, 8] at most
  long edits = 0;
  attn::Hooks hooks(a.n_layers);
  for (std::int64_t l = 0; l < a.n_layers; ++l)
    for (std::size_t s = 0; s < attn::kSiteCount; ++s)
      if (!attn::model_site(attn::Site(s)) && attn::patchable(attn::Site(s)))
        hooks.patch(
            {attn::Site(s), l},
            [&](const attn::Observation& o) {
              o.edit[0] *= 0.5f;
              ++edits;
            },
            probs.data());
  attn::Transformer m = attn::make_transformer(a, attn::seeded_weights(a, 1), 2 * 5, rt);
  attn::observe(m, &hooks.observer());
  const long before = g_allocations.load();
  attn::forward(m, x.data(), 2, 5, 0, out.data());
  for (std::int64_t pos = 5; pos < 8; ++pos) attn::forward(m, x.data(), 2, 1, pos, out.data());
  CHECK(g_allocations.load() - before == 0);
  CHECK(edits == 4 * 12 * a.n_layers);  // the 11 sites of issue 38 and hook_z
}
#endif
