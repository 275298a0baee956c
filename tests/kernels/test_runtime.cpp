// The Runtime belongs to the model: its threads size the scratch, so nothing a program does to
// the process's OpenMP settings afterwards can make the engine write past it (a model built with
// one thread and run after omp_set_num_threads(4) overflowed the attention scratch before), and
// two models with different runtimes live side by side.
#include <doctest/doctest.h>
#include <omp.h>

#include <vector>

#include "attn/engine/run.hpp"
#include "attn/kernels/runtime.hpp"
#include "attn/model/model.hpp"
#include "test_support.hpp"

namespace {

attn::ModelArgs small_llama() {
  attn::ModelArgs a = test::small_llama_args(attn::Block::llama, 1);
  a.dim = 32;
  a.max_batch_size = 2;
  a.max_seq_len = 160;
  return a;
}

// Prefill of 130 positions (three attention chunks) and 4 decode steps at batch 2.
attn::RunOutputs run_with(const attn::Runtime& rt, const std::vector<float>& x) {
  const attn::ModelArgs a = small_llama();
  attn::Transformer m = attn::make_transformer(a, attn::seeded_weights(a, 5), 2 * 130, rt);
  return attn::run(m, x, {2, 130, 4}, [](const attn::Event&) {});
}

}  // namespace

TEST_CASE("runtime: a model built for 1 thread runs on 1 thread whatever OpenMP is set to") {
  const attn::ModelArgs a = small_llama();
  const std::vector<float> x = attn::seeded_input(a, {2, 130, 4}, 3);
  const attn::RunOutputs before = run_with(attn::make_runtime(1, 0), x);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(4);  // what a host program might do after building the model
  const attn::Runtime one = attn::make_runtime(1, 0);
  attn::Transformer m = attn::make_transformer(a, attn::seeded_weights(a, 5), 2 * 130, one);
  CHECK(m.act.scores.size() == std::size_t(1 * attn::kAttentionChunk * a.max_seq_len));
  const attn::RunOutputs after = attn::run(m, x, {2, 130, 4}, [](const attn::Event&) {});
  omp_set_num_threads(saved);
  // Same thread count, same kernels: the same bits.
  CHECK(before.prefill_output == after.prefill_output);
  CHECK(before.decode_output == after.decode_output);
}

TEST_CASE("runtime: models with 1, 2 and 4 threads side by side agree") {
  const attn::ModelArgs a = small_llama();
  const std::vector<float> x = attn::seeded_input(a, {2, 130, 4}, 3);
  const attn::RunOutputs one = run_with(attn::make_runtime(1, 0), x);
  for (int threads : {2, 4}) {
    CAPTURE(threads);
    const attn::RunOutputs r = run_with(attn::make_runtime(threads, 0), x);
    const test::Diff d = test::compare(r.prefill_output.data(), one.prefill_output.data(),
                                       std::int64_t(one.prefill_output.size()), {});
    CHECK(d.failures == 0);
    const test::Diff e = test::compare(r.decode_output.data(), one.decode_output.data(),
                                       std::int64_t(one.decode_output.size()), {});
    CHECK(e.failures == 0);
  }
}

TEST_CASE("runtime: make_runtime picks the threads and a kernel set this CPU runs") {
  CHECK(attn::make_runtime(3).threads == 3);
  CHECK(attn::make_runtime(0).threads == attn::cores());
  CHECK(attn::make_runtime(1).kernels == &attn::best_kernels());
  CHECK_FALSE(attn::make_runtime(1).worth_parallel(1 << 30));  // one thread: never a region
  CHECK(attn::make_runtime(2, 0).worth_parallel(1));
}

// The threads split outputs only, each summed in one order (docs/design.md, "One order per
// output"): prefill on OpenBLAS, as the avx2 and generic sets once ran it, gave 3 threads other
// bits than 1 on OpenBLAS's Zen core.
TEST_CASE(
    "runtime: 1, 2, 3, 4 and 16 threads give the same bits on every kernel set this CPU runs") {
  attn::ModelArgs a = small_llama();
  a.dim = 64;
  a.n_heads = 8;
  for (const char* set : {"generic", "avx2", "avx512"}) {
    if (!attn::find_kernels(set)) continue;
    CAPTURE(std::string(set));
    const std::vector<float> x = attn::seeded_input(a, {2, 70, 3}, 1);
    auto run_on = [&](int threads) {
      const attn::Runtime rt = attn::make_runtime(threads, 0, set);
      attn::Transformer m = attn::make_transformer(a, attn::seeded_weights(a, 2), 2 * 70, rt);
      return attn::run(m, x, {2, 70, 3}, [](const attn::Event&) {});
    };
    const attn::RunOutputs one = run_on(1);
    for (int threads : {2, 3, 4, 16}) {  // 16 on 2 cores: oversubscribed
      CAPTURE(threads);
      const attn::RunOutputs r = run_on(threads);
      CHECK(r.prefill_output == one.prefill_output);
      CHECK(r.decode_output == one.decode_output);
    }
  }
}
