// A decode step allocates nothing: every buffer is made when the model is.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "attn/matmul.hpp"
#include "attn/model.hpp"
#include "attn/run.hpp"

namespace {
std::atomic<long> g_allocations{0};
}

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

TEST_CASE("forward: a decode step and a prefill allocate nothing") {
  attn::ModelArgs a = attn::seed_args();
  a.block = attn::Block::llama;
  a.rope = attn::Rope::half;
  a.dim = 64;
  a.n_heads = 8;
  a.n_kv_heads = 2;
  a.attention_bias = true;
  for (int threads : {1, 2}) {
    attn::set_threads(threads);
    const attn::RunOptions opts{2, 5, 3};
    const std::vector<float> x = attn::seeded_input(a, opts, 1);
    attn::Transformer m = attn::make_transformer(a, attn::seeded_weights(a, 1), 2 * 5);
    std::vector<float> out(x.size());
    const long before = g_allocations.load();
    attn::forward(m, x.data(), 2, 5, 0, out.data());
    for (std::int64_t pos = 5; pos < 8; ++pos) attn::forward(m, x.data(), 2, 1, pos, out.data());
    const long allocations = g_allocations.load() - before;
    CAPTURE(threads);
    CHECK(allocations == 0);
  }
}
