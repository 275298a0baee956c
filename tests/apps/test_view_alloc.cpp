// attn-cli view records every decode step without allocating: its recorder (the probabilities'
// scratch, the coded cells, the figures and the lens's tops) is sized when it is made.
#include <doctest/doctest.h>

#include "count_allocations.hpp"
#include "test_support.hpp"

#include "attn/kernels/matmul.hpp"
#include "attn/model/model.hpp"
#include "attn/model/weights.hpp"
#include "workloads/view.hpp"

#if !defined(__SANITIZE_ADDRESS__)
namespace {

// 3 llama layers with tokens in and logits out, for 2 sequences of up to 32 positions.
attn::ModelArgs view_args(std::int64_t dim) {
  attn::ModelArgs a = test::small_llama_args(attn::Block::llama, 3);
  a.dim = dim;
  a.vocab_size = 40;
  a.max_seq_len = 32;
  a.max_batch_size = 2;
  return a;
}

constexpr attn::ModelEnds kEnds{true, true};

}  // namespace

TEST_CASE("view: recording a prefill and decode steps, with the lens, allocates nothing") {
  attn::ModelArgs a = view_args(32);
  const std::int64_t B = 2, P = 6, N = 3;
  for (const char* mask : {"causal", "none"}) {
    CAPTURE(mask);
    a.mask = std::string(mask) == "none" ? attn::Mask::none : attn::Mask::causal;
    const attn::Runtime rt = attn::make_runtime(2, 0);
    attn::Transformer m = attn::make_transformer(
        a, attn::seeded_weights(a, 1, {}, attn::WeightType::f32, kEnds), B * P, rt);
    const cli::ViewShape v = cli::plan_view(a, {B, P, N}, {"1:3", "1:4", "2:8", 1, 16, 256});
    cli::ViewRecorder rec(v);
    rec.record_lens(m, 5);
    std::vector<std::int32_t> tokens(std::size_t(B * (P + N)));
    for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = std::int32_t(i * 7 % 40);
    std::vector<float> logits(std::size_t(B * a.vocab_size));
    attn::forward(m, tokens.data(), B, P, 0, logits.data());  // warm: the thread pool
    attn::observe(m, &rec.observer());
    const long before = g_allocations.load();
    attn::forward(m, tokens.data(), B, P, 0, logits.data());
    for (std::int64_t pos = P; pos < P + N; ++pos)
      attn::forward(m, tokens.data() + B * pos, B, 1, pos, logits.data());
    const long allocations = g_allocations.load() - before;
    CHECK(allocations == 0);
    CHECK(rec.rows_end() == 8);
    CHECK(rec.positions_seen() == P + N);
    attn::observe(m, nullptr);
  }
}

// The memory pre-flight counts what viewing allocates (view_memory): every byte the recorder and
// its lens ask for, on each kind of shape (prefill 0, a cut, no mask, 16 bits, a lens k past
// the vocabulary).
TEST_CASE("view: view_memory counts every byte the recorder and its lens allocate") {
  attn::ModelArgs a = view_args(16);
  struct Shape {
    std::int64_t B, P, N;
    cli::ViewSettings s;
    int k;
    attn::Mask mask;
  };
  for (const Shape& c : {Shape{2, 6, 3, {"1:3", "1:4", "2:8", 1, 16, 256}, 5, attn::Mask::causal},
                         Shape{1, 0, 4, {"", "", "", 0, 8, 256}, 0, attn::Mask::causal},
                         Shape{2, 9, 0, {"0:1", "", "", 0, 8, 256}, 50, attn::Mask::none},
                         Shape{1, 1, 1, {"", "2:3", "1:2", 0, 16, 256}, 1, attn::Mask::causal}}) {
    CAPTURE(c.P);
    a.mask = c.mask;
    attn::Transformer m =
        attn::make_transformer(a, attn::seeded_weights(a, 1, {}, attn::WeightType::f32, kEnds),
                               c.B * std::max<std::int64_t>(c.P, 1), attn::make_runtime(1, 0));
    const cli::ViewShape v = cli::plan_view(a, {c.B, c.P, c.N}, c.s);
    std::uint64_t counted = 0;
    for (const attn::MemoryPart& p : cli::view_memory(v, a, c.k)) counted += p.bytes;
    const long before = g_allocated_bytes.load();
    {
      cli::ViewRecorder rec(v);
      if (c.k > 0) rec.record_lens(m, c.k);
      CHECK(std::uint64_t(g_allocated_bytes.load() - before) == counted);
    }
  }
}
#endif
