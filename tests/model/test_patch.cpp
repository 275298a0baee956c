// Patching in the forward (Observer::patch, model/hooks.hpp): an identity edit at any site
// leaves the outputs' bits (or their rounding, where the patched path sums apart), a replaced
// site is what the rest of the pass reads (the residual, the cache, the heads' outputs), and
// what is refused. The values against PyTorch's hooks: tests/python/test_hooks.py with
// tests/golden/make_patch.py's fixtures.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>

#include "attn/error.hpp"
#include "attn/model/hooks.hpp"
#include "attn/model/input.hpp"
#include "attn/model/model.hpp"
#include "attn/model/parallel.hpp"
#include "test_support.hpp"

namespace {

constexpr std::int64_t B = 2, P = 5, kSteps = 2;

struct Run {
  std::vector<float> out;                          // prefill's [B, P, dim], then each step's
  std::map<std::string, std::vector<float>> kept;  // "{call}.{hook name}"
  std::vector<float> cache_k;                      // layer 0's, filled
};

// Prefill of P then kSteps decode steps of x drawn from seed 7, on weights drawn from seed 3
// (ffn_rows: rows per FFN pass), with `setup` adding keeps and patches to each
// call's Hooks. Every site of every layer is kept too, after the patches.
template <class Setup>
Run run(const attn::ModelArgs& a, std::int64_t ffn_rows, Setup setup) {
  const attn::RunOptions o{B, P, kSteps};
  const std::vector<float> x = attn::seeded_input(a, o, 7);
  attn::Transformer m =
      attn::make_transformer(a, attn::seeded_weights(a, 3), B * P, attn::make_runtime(2, 0));
  m.act.ffn_rows = ffn_rows;
  Run r;
  const std::int64_t dim = a.dim, T = P + kSteps;
  r.out.resize(std::size_t(B * T * dim));
  std::vector<float> in(std::size_t(B * P * dim));
  for (std::int64_t call = 0; call <= kSteps; ++call) {
    const std::int64_t seqlen = call == 0 ? P : 1, start = call == 0 ? 0 : P + call - 1;
    for (std::int64_t b = 0; b < B; ++b)
      std::memcpy(&in[std::size_t(b * seqlen * dim)], &x[std::size_t((b * T + start) * dim)],
                  std::size_t(seqlen * dim) * sizeof(float));
    attn::Hooks hooks(a.n_layers);
    const attn::HookCall c{B, seqlen, start};
    std::vector<std::vector<float>> bufs;
    bufs.reserve(64);
    const std::string name = call == 0 ? "prefill" : "decode." + std::to_string(call);
    std::vector<std::string> names;
    for (const attn::HookPoint& p : attn::hook_points(a, m.ends)) {
      const auto shape = attn::hook_shape(a, p.site, c);
      std::int64_t n = 1;
      for (std::int64_t d : shape) n *= d;
      bufs.emplace_back(std::size_t(n), std::nanf(""));
      hooks.keep(p, bufs.back().data());
      names.push_back(name + "." + attn::hook_name(p.site, p.layer));
    }
    setup(hooks, c, call);
    attn::observe(m, &hooks.observer());
    attn::forward(m, in.data(), B, seqlen, start,
                  r.out.data() + (call == 0 ? 0 : B * P + (call - 1) * B) * dim);
    attn::observe(m, nullptr);
    for (std::size_t i = 0; i < names.size(); ++i) r.kept[names[i]] = bufs[i];
  }
  r.cache_k = attn::filled_k(m.cache, 0, B, P + kSteps);
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("patch: an identity edit at any site gives the unpatched outputs") {
  for (attn::Block block : {attn::Block::llama, attn::Block::encoder, attn::Block::attention})
    for (std::int64_t ffn_rows : {attn::kFfnRows, std::int64_t(3)}) {
      CAPTURE(attn::block_name(block));
      CAPTURE(ffn_rows);
      const attn::ModelArgs a = test::small_llama_args(block);
      const Run plain = run(a, ffn_rows, [](attn::Hooks&, const attn::HookCall&, std::int64_t) {});
      for (std::size_t s = 0; s < attn::kSiteCount; ++s) {
        const attn::Site site = attn::Site(s);
        // forward(tokens) only (test_hooks.py), or read only (test_hook_points.py)
        if (attn::model_site(site) || !attn::patchable(site)) continue;
        if (block == attn::Block::attention &&
            (site == attn::Site::resid_mid || site == attn::Site::mlp_out))
          continue;
        CAPTURE(attn::site_name(site));
        std::int64_t edits = 0;
        std::vector<float> probs(std::size_t(B * a.n_heads * P * (P + kSteps)));
        const Run patched =
            run(a, ffn_rows, [&](attn::Hooks& h, const attn::HookCall&, std::int64_t) {
              for (std::int64_t l = 0; l < a.n_layers; ++l)
                h.patch(
                    {site, l},
                    [&](const attn::Observation& o) {
                      CHECK(o.edit == o.data);
                      ++edits;
                    },
                    probs.data());
            });
        CHECK(edits == a.n_layers * (1 + kSteps));
        // Summed apart then added (attn_out, mlp_out), or mixed anew (attn_probs): rounding.
        const bool apart = site == attn::Site::attn_out || site == attn::Site::mlp_out ||
                           site == attn::Site::attn_probs;
        if (apart)
          CHECK(test::compare(patched.out.data(), plain.out.data(), std::int64_t(plain.out.size()),
                              {1e-5, 1e-5})
                    .failures == 0);
        else
          CHECK(same_bits(patched.out, plain.out));
      }
    }
}

TEST_CASE("patch: what the rest of the pass reads is the edited tensor") {
  const attn::ModelArgs a = test::small_llama_args(attn::Block::llama);
  const std::int64_t dim = a.dim, hd = a.head_dim();
  auto zero = [](const attn::Observation& o) {
    std::int64_t n = 1;
    for (int i = 0; i < o.ndim; ++i) n *= o.shape[i];
    std::fill(o.edit, o.edit + n, 0.0f);
  };
  auto patch_all = [&](attn::Site s, attn::Hooks::Edit edit, std::vector<float>* probs = nullptr) {
    return [=](attn::Hooks& h, const attn::HookCall&, std::int64_t) {
      for (std::int64_t l = 0; l < a.n_layers; ++l)
        h.patch({s, l}, edit, probs ? probs->data() : nullptr);
    };
  };
  SUBCASE("resid_post zeroed: the next block's input is zero") {
    const Run r = run(a, attn::kFfnRows, patch_all(attn::Site::resid_post, zero));
    for (float v : r.kept.at("prefill.blocks.1.hook_resid_pre")) CHECK(v == 0.0f);
    for (float v : r.kept.at("decode.2.blocks.0.hook_resid_post")) CHECK(v == 0.0f);
  }
  SUBCASE("attn_out and mlp_out zeroed: the residual passes through unchanged") {
    const Run r = run(a, 10, [&](attn::Hooks& h, const attn::HookCall& c, std::int64_t call) {
      patch_all(attn::Site::attn_out, zero)(h, c, call);
      patch_all(attn::Site::mlp_out, zero)(h, c, call);
    });
    for (const char* call : {"prefill", "decode.1"})
      for (int l = 0; l < 2; ++l) {
        const std::string p = std::string(call) + ".blocks." + std::to_string(l) + ".";
        CHECK(same_bits(r.kept.at(p + "hook_resid_mid"), r.kept.at(p + "hook_resid_pre")));
        CHECK(same_bits(r.kept.at(p + "hook_resid_post"), r.kept.at(p + "hook_resid_pre")));
      }
  }
  SUBCASE("k replaced in prefill: the cache holds it, and decode steps read it") {
    const Run plain =
        run(a, attn::kFfnRows, [](attn::Hooks&, const attn::HookCall&, std::int64_t) {});
    const Run r =
        run(a, attn::kFfnRows, [&](attn::Hooks& h, const attn::HookCall&, std::int64_t call) {
          if (call == 0)
            h.patch({attn::Site::k, 0}, [](const attn::Observation& o) {
              std::int64_t n = 1;
              for (int i = 0; i < o.ndim; ++i) n *= o.shape[i];
              for (std::int64_t i = 0; i < n; ++i) o.edit[i] = float(i % 7) - 3.0f;
            });
        });
    // The cache [B, n_kv_heads, filled, hd] against the edit [B, P, n_kv_heads, hd].
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t g = 0; g < a.n_kv_heads; ++g)
        for (std::int64_t t = 0; t < P; ++t)
          for (std::int64_t d = 0; d < hd; ++d) {
            const std::int64_t i = ((b * P + t) * a.n_kv_heads + g) * hd + d;
            CHECK(r.cache_k[std::size_t(((b * a.n_kv_heads + g) * (P + kSteps) + t) * hd + d)] ==
                  float(i % 7) - 3.0f);
          }
    CHECK(!same_bits(r.kept.at("decode.1.blocks.0.hook_attn_out"),
                     plain.kept.at("decode.1.blocks.0.hook_attn_out")));
  }
  SUBCASE("attn_probs one-hot on key 0: every head's output is its KV head's first value") {
    std::vector<float> probs(std::size_t(B * a.n_heads * P * (P + kSteps)));
    const Run r =
        run(a, attn::kFfnRows, [&](attn::Hooks& h, const attn::HookCall& c, std::int64_t) {
          h.patch(
              {attn::Site::attn_probs, 0},
              [c](const attn::Observation& o) {
                const std::int64_t keys = c.start_pos + c.seqlen,
                                   rows = o.shape[0] * o.shape[1] * o.shape[2];
                for (std::int64_t r = 0; r < rows; ++r)
                  for (std::int64_t j = 0; j < keys; ++j)
                    o.edit[r * keys + j] = j == 0 ? 1.0f : 0.0f;
              },
              probs.data());
        });
    // attn_out = wo(z), z [rows, n_heads * hd] = per head the KV head's value at position 0: the
    // same for every position of a sequence, so attn_out's rows agree within each sequence.
    for (const char* call : {"prefill", "decode.1", "decode.2"}) {
      const std::vector<float>& out = r.kept.at(std::string(call) + ".blocks.0.hook_attn_out");
      const std::int64_t seqlen = std::string(call) == "prefill" ? P : 1;
      for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t t = 1; t < seqlen; ++t)
          CHECK(std::memcmp(&out[std::size_t((b * seqlen + t) * dim)],
                            &out[std::size_t(b * seqlen * dim)], std::size_t(dim) * 4) == 0);
      CHECK(r.kept.at(std::string(call) + ".blocks.0.attn.hook_pattern")[0] == 1.0f);
    }
    // The decode steps read position 0's values from the cache the prefill filled: their
    // attn_out is the prefill's (to the rounding of a product of other rows).
    const std::vector<float>& pre = r.kept.at("prefill.blocks.0.hook_attn_out");
    for (const char* call : {"decode.1", "decode.2"}) {
      const std::vector<float>& step = r.kept.at(std::string(call) + ".blocks.0.hook_attn_out");
      for (std::int64_t b = 0; b < B; ++b)
        CHECK(test::compare(&step[std::size_t(b * dim)], &pre[std::size_t(b * P * dim)], dim, {})
                  .failures == 0);
    }
  }
}

TEST_CASE("patch: attn_probs need a buffer, and model parallel refuses patching") {
  const attn::ModelArgs a = test::small_llama_args(attn::Block::llama);
  attn::Transformer m = attn::make_transformer(a, attn::seeded_weights(a, 3), 8);
  attn::Hooks hooks(a.n_layers);
  hooks.patch({attn::Site::attn_probs, 1}, [](const attn::Observation&) {});  // no buffer
  attn::observe(m, &hooks.observer());
  const attn::RunOptions o{1, 4, 0};
  const std::vector<float> x = attn::seeded_input(a, o, 1);
  std::vector<float> out(x.size());
  CHECK_THROWS_AS(attn::forward(m, x.data(), 1, 4, 0, out.data()), attn::InputError);

  // A rank of two: refused before any work (the comm is never called).
  struct NoComm final : attn::Comm {
    int rank() const override { return 0; }
    int size() const override { return 2; }
    void allreduce_sum(float*, std::int64_t) const override { throw std::logic_error("used"); }
    int allreduce_max(int) const override { throw std::logic_error("used"); }
    int allreduce_min(int) const override { throw std::logic_error("used"); }
    void gather(const float*, std::int64_t, float*) const override {
      throw std::logic_error("used");
    }
    void gather(const double*, std::int64_t, double*) const override {
      throw std::logic_error("used");
    }
    void barrier() const override {}
    [[noreturn]] void abort(int) const override { std::abort(); }
  } comm;
  attn::ModelArgs mp = a;
  mp.model_parallel_size = 2;
  const attn::Shard shard{0, 2, &comm};
  attn::Transformer r = attn::make_transformer(mp, attn::seeded_weights(mp, 3, shard), 8,
                                               attn::make_runtime(1), shard);
  attn::Hooks resid(a.n_layers);
  resid.patch({attn::Site::resid_pre, 0}, [](const attn::Observation&) {});
  attn::observe(r, &resid.observer());
  try {
    attn::forward(r, x.data(), 1, 4, 0, out.data());
    FAIL("not refused");
  } catch (const attn::InputError& e) {
    CHECK(e.setting == "model_parallel_size");
  }
}

TEST_CASE("hooks: the points each model has, their shapes and bytes, and the bound") {
  attn::ModelArgs a = test::small_llama_args(attn::Block::attention);
  // 9 of issue 38, attn_scores, z and result (no MLP, no pre-norm scales)
  CHECK(attn::hook_points(a, {}).size() == std::size_t(12 * a.n_layers));
  CHECK_THROWS_AS(attn::model_hook_point(a, {}, "blocks.0.hook_mlp_out"), attn::InputError);
  CHECK_THROWS_AS(attn::model_hook_point(a, {}, "ln_final.hook_normalized"), attn::InputError);
  a = test::small_llama_args(attn::Block::llama);
  const attn::ModelEnds head{false, true};
  const std::vector<attn::HookPoint> all = attn::hook_points(a, head);
  REQUIRE(all.size() == std::size_t(18 * a.n_layers + 2));  // ln_final's scale and normalized
  CHECK(all.front() == attn::HookPoint{attn::Site::resid_pre, 0});
  CHECK(all.back() == attn::HookPoint{attn::Site::final_norm, -1});
  CHECK(attn::model_hook_point(a, head, "blocks.1.hook_mlp_out") ==
        attn::HookPoint{attn::Site::mlp_out, 1});
  const attn::HookCall c{2, 3, 4};
  CHECK(attn::hook_shape(a, attn::Site::attn_probs, c) == std::vector<std::int64_t>{2, 4, 3, 7});
  CHECK(attn::hook_shape(a, attn::Site::k_in, c) == std::vector<std::int64_t>{2, 3, 2, 4});
  CHECK(attn::hook_shape(a, attn::Site::q, c) == std::vector<std::int64_t>{2, 3, 4, 4});
  CHECK(attn::hook_shape(a, attn::Site::final_norm, c) == std::vector<std::int64_t>{2, 3, 16});
  CHECK(attn::hook_shape(a, attn::Site::attn_scores, c) == std::vector<std::int64_t>{2, 4, 3, 7});
  CHECK(attn::hook_shape(a, attn::Site::z, c) == std::vector<std::int64_t>{2, 3, 4, 4});
  CHECK(attn::hook_shape(a, attn::Site::result, c) == std::vector<std::int64_t>{2, 3, 4, 16});
  CHECK(attn::hook_shape(a, attn::Site::mlp_pre, c) ==
        std::vector<std::int64_t>{2, 3, a.ffn_hidden()});
  CHECK(attn::hook_shape(a, attn::Site::ln2_scale, c) == std::vector<std::int64_t>{2, 3, 1});
  CHECK(attn::hook_bytes(a, {{attn::Site::attn_probs, 0}, {attn::Site::v, 1}}, c, "names") ==
        4 * (2 * 4 * 3 * 7 + 2 * 3 * 2 * 4));
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max() / 2;
  CHECK_THROWS_AS(attn::hook_bytes(a, all, {huge, huge, 0}, "names"), attn::InputError);
  CHECK_NOTHROW(attn::check_hook_bytes(100, 100, "max_bytes", "names"));
  try {
    attn::check_hook_bytes(101, 100, "max_bytes", "names");
    FAIL("not refused");
  } catch (const attn::MemoryLimitError& e) {
    CHECK(e.setting == "names");
    CHECK(std::string(e.what()).find("101 bytes") != std::string::npos);
  }
}
