// llama.cpp's penalties in the sampler (llama_sampler_penalties_apply, first in
// common/sampling.cpp's default chain), checked on hand-computed logits: for a token seen
// `count` times in the last repeat_last_n of the context, logit / repeat_penalty (logit *
// repeat_penalty when not positive), minus count * frequency_penalty + presence_penalty.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/model/generate.hpp"
#include "test_support.hpp"

namespace {

// Logits 2, -1, 0.5, 3 and a context whose last 4 tokens are 1, 1, 3, 2 (token 0 before them).
// With repeat_penalty 2, frequency 0.5, presence 0.25 and repeat_last_n 4, by hand:
//   id 0:  2.0                         (not in the window)
//   id 1: -1.0 * 2 - (2 * 0.5 + 0.25) = -3.25
//   id 2:  0.5 / 2 - (1 * 0.5 + 0.25) = -0.5
//   id 3:  3.0 / 2 - (1 * 0.5 + 0.25) =  0.75
const std::vector<float> kLogits = {2.0f, -1.0f, 0.5f, 3.0f};
const std::vector<std::int32_t> kContext = {0, 1, 1, 3, 2};

attn::Sampling penalized(std::int64_t last_n) {
  attn::Sampling s;
  s.repeat_penalty = 2;
  s.frequency_penalty = 0.5;
  s.presence_penalty = 0.25;
  s.repeat_last_n = last_n;
  return s;
}

std::int32_t pick(const attn::Sampling& s, std::uint64_t draw = 0) {
  std::vector<attn::SampleCandidate> scratch;
  return attn::sample(kLogits, s, draw, scratch, kContext);
}

}  // namespace

TEST_CASE("sampling: greedy takes the argmax after llama.cpp's penalties") {
  CHECK(pick(attn::Sampling{}) == 3);  // no penalties: 3.0
  CHECK(pick(penalized(4)) == 0);      // 2.0 over 0.75
  // -1: the whole context, token 0 too: 2.0 / 2 - 0.75 = 0.25 under 0.75.
  CHECK(pick(penalized(-1)) == 3);
  CHECK(pick(penalized(0)) == 3);  // 0: no window
  // The last token only (2): 3.0 stays the highest.
  CHECK(pick(penalized(1)) == 3);
  attn::Sampling repeat_only;  // 3.0 / 4 = 0.75 under 2.0
  repeat_only.repeat_penalty = 4;
  repeat_only.repeat_last_n = 2;
  CHECK(pick(repeat_only) == 0);
}

TEST_CASE("sampling: the penalties come before top-k, and the draw follows their softmax") {
  attn::Sampling s = penalized(4);
  s.temp = 1;
  s.top_k = 1;  // the penalized top: 0 (unpenalized: 3)
  for (std::uint64_t draw = 0; draw < 20; ++draw) CHECK(pick(s, draw) == 0);
  // The whole vocabulary: frequencies near softmax(2, -3.25, -0.5, 0.75).
  s.top_k = 0;
  s.top_p = 1;
  s.min_p = 0;
  const double logits[4] = {2.0, -3.25, -0.5, 0.75};
  double sum = 0;
  for (double l : logits) sum += std::exp(l);
  int counts[4] = {};
  const int n = 20000;
  for (int draw = 0; draw < n; ++draw) ++counts[pick(s, std::uint64_t(draw))];
  for (int i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(std::fabs(double(counts[i]) / n - std::exp(logits[i]) / sum) < 0.02);
  }
}

TEST_CASE("sampling: check_sampling refuses penalties out of range, naming the setting") {
  const auto setting = [](auto change) {
    attn::Sampling s;
    change(s);
    return test::setting_of([&] { attn::check_sampling(s); });
  };
  CHECK(setting([](attn::Sampling& s) { s.repeat_penalty = 0; }) == "repeat_penalty");
  CHECK(setting([](attn::Sampling& s) { s.repeat_penalty = NAN; }) == "repeat_penalty");
  CHECK(setting([](attn::Sampling& s) { s.repeat_last_n = -2; }) == "repeat_last_n");
  CHECK(setting([](attn::Sampling& s) { s.presence_penalty = 101; }) == "presence_penalty");
  CHECK(setting([](attn::Sampling& s) { s.frequency_penalty = NAN; }) == "frequency_penalty");
  attn::Sampling fine;
  fine.repeat_last_n = -1;
  fine.presence_penalty = -2;
  CHECK_NOTHROW(attn::check_sampling(fine));
}

// ---- Against llama.cpp's own sampler (the cached build's libllama, opened at run time) ----

namespace {

// llama.h's C structs, as declared there (stable C ABI): no header or link dependency.
struct LlamaTokenData {
  std::int32_t id;
  float logit, p;
};
struct LlamaTokenDataArray {
  LlamaTokenData* data;
  std::size_t size;
  std::int64_t selected;
  bool sorted;
};

struct LlamaSampler {
  void* lib = nullptr;
  void* (*init)(std::int32_t, std::int32_t, float, float, float) = nullptr;
  void (*accept)(void*, std::int32_t) = nullptr;
  void (*apply)(void*, LlamaTokenDataArray*) = nullptr;
  void (*free)(void*) = nullptr;

  explicit LlamaSampler(const std::string& path) {
    lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    init = reinterpret_cast<decltype(init)>(::dlsym(lib, "llama_sampler_init_penalties"));
    accept = reinterpret_cast<decltype(accept)>(::dlsym(lib, "llama_sampler_accept"));
    apply = reinterpret_cast<decltype(apply)>(::dlsym(lib, "llama_sampler_apply"));
    free = reinterpret_cast<decltype(free)>(::dlsym(lib, "llama_sampler_free"));
  }
  ~LlamaSampler() {
    if (lib) ::dlclose(lib);
  }
  bool ready() const { return init && accept && apply && free; }
};

}  // namespace

TEST_CASE("sampling: the penalties give llama.cpp's logits (its libllama, when built)") {
  const std::string dir = "/root/.cache/attn-cli/llama.cpp/3.22.1/build";
  if (!std::filesystem::exists(dir + "/.built")) {
    MESSAGE("SKIP: no llama.cpp build in " << dir << " (bench/llama_cpp.sh makes it)");
    return;
  }
  LlamaSampler llama(dir + "/bin/libllama.so");
  REQUIRE_MESSAGE(llama.ready(), "libllama.so lacks the sampler API: " << ::dlerror());
  std::mt19937 rng(7);
  const std::int32_t vocab = 64;
  for (const std::int64_t last_n : {std::int64_t{1}, std::int64_t{16}, std::int64_t{100}}) {
    for (const double repeat : {0.7, 1.0, 1.3}) {
      CAPTURE(last_n);
      CAPTURE(repeat);
      attn::Sampling s;
      s.repeat_penalty = repeat;
      s.repeat_last_n = last_n;
      s.frequency_penalty = 0.2;
      s.presence_penalty = -0.4;
      std::vector<std::int32_t> context(40);
      for (std::int32_t& t : context) t = std::int32_t(rng() % 12);  // many repeats
      std::vector<attn::SampleCandidate> ours(vocab);
      std::vector<LlamaTokenData> theirs(vocab);
      std::normal_distribution<float> normal(0.0f, 3.0f);
      for (std::int32_t i = 0; i < vocab; ++i) {
        const float logit = normal(rng);
        ours[std::size_t(i)] = {i, logit};
        theirs[std::size_t(i)] = {i, logit, 0.0f};
      }
      void* sampler = llama.init(vocab, std::int32_t(last_n), float(repeat), 0.2f, -0.4f);
      for (const std::int32_t t : context) llama.accept(sampler, t);
      LlamaTokenDataArray array{theirs.data(), theirs.size(), -1, false};
      llama.apply(sampler, &array);
      llama.free(sampler);
      attn::apply_penalties(ours, s, context);
      for (std::int32_t i = 0; i < vocab; ++i) {
        CAPTURE(i);
        CHECK(ours[std::size_t(i)].logit ==
              doctest::Approx(theirs[std::size_t(i)].logit).epsilon(1e-6));
      }
    }
  }
}
