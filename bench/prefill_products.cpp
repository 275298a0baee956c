// The prefill's matrix products alone: the seven products of one Llama-3-8B layer (the FFN in
// its 3072-unit blocks, as the engine runs it) at M = 512 rows through attn::linear, 2 threads
// (or the first argument's), weights F32, F16 or BF16 (the second argument, f32 by default), best
// of 8 passes, in GFLOP/s of wall time and, on one thread, of
// the thread's CPU time too (which a busy machine's other jobs do not stretch; the FMA peak beside
// it is measured the same way). Built with -DATTN_BENCH=ON (build/bench/bench_prefill_products);
// to compare two versions of the prefill path, build both and run them in turn.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "attn/kernels/kernels.hpp"
#include "attn/kernels/matmul.hpp"

namespace {

struct Shape {
  std::int64_t n, k;
};
// wq, wk, wv, wo; w1, w3 and w2 over one 3072-unit block of the FFN.
const Shape kShapes[] = {{4096, 4096}, {1024, 4096}, {1024, 4096}, {4096, 4096},
                         {3072, 4096}, {3072, 4096}, {4096, 3072}};

double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  const attn::Runtime rt = attn::make_runtime(argc > 1 ? std::atoi(argv[1]) : 2);
  const char* type = argc > 2 ? argv[2] : "f32";
  const attn::WeightType wt = std::strcmp(type, "f16") == 0    ? attn::WeightType::f16
                              : std::strcmp(type, "bf16") == 0 ? attn::WeightType::bf16
                                                               : attn::WeightType::f32;
  // Every weight 0.01 (F16 0x211F, BF16 0x3C24), as bytes of the type; 4 a float of F32.
  const std::size_t bytes = wt == attn::WeightType::f32 ? 4 : 2;
  std::vector<std::vector<char>> w;
  for (const Shape& s : kShapes) {
    w.emplace_back(std::size_t(s.n * s.k) * bytes);
    const float f = 0.01f;
    const std::uint16_t h = wt == attn::WeightType::f16 ? 0x211F : 0x3C24;
    for (std::size_t i = 0; i < w.back().size(); i += bytes)
      std::memcpy(w.back().data() + i, bytes == 4 ? static_cast<const void*>(&f) : &h, bytes);
  }
  const std::int64_t M = 512;
  std::vector<float> x(std::size_t(M * 4096), 0.5f), y(std::size_t(M * 4096));
  std::vector<float> scratch(std::size_t(attn::scratch_floats(M, 4096, rt.threads)));
  double best = 1e9, best_cpu = 1e9, flop = 0;
  for (const Shape& s : kShapes) flop += 2.0 * double(M * s.n * s.k);
  for (int pass = 0; pass < 8; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = thread_seconds();
    for (std::size_t i = 0; i < std::size(kShapes); ++i) {
      const attn::Projection p{y.data(), attn::Matrix(w[i].data(), wt), nullptr, kShapes[i].n};
      attn::linear(rt, {&p, 1}, x.data(), M, kShapes[i].k, scratch.data());
    }
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    best_cpu = std::min(best_cpu, thread_seconds() - c0);
  }
  std::printf("isa %s, %s weights: %.1f GFLOP/s", rt.kernels->name, type, flop / best / 1e9);
  if (rt.threads == 1) {  // the caller runs every item: its CPU time is the products'
    // The FMA peak as fma_peak_gflops measures it (its loop: 12 chains of `width` lanes a turn),
    // in CPU time too, best of 5 rounds; `sink` keeps the sums alive, as there.
    const std::int64_t iters = 20'000'000;
    double peak = 0, sink = 0;
    for (int round = 0; round < 5; ++round) {
      const double c0 = thread_seconds();
      sink += rt.kernels->fma_loop(iters);
      peak = std::max(peak,
                      double(iters) * 12 * rt.kernels->width * 2 / (thread_seconds() - c0) / 1e9);
    }
    std::printf(", CPU time %.1f GFLOP/s, %.0f%% of the FMA peak %.1f%s", flop / best_cpu / 1e9,
                100 * flop / best_cpu / 1e9 / peak, peak, sink == 12345.678 ? " " : "");
  }
  std::printf("\n");
}
