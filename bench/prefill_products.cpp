// The prefill's matrix products alone: the seven products of one Llama-3-8B layer (the FFN in
// its 3072-unit blocks, as the engine runs it) at M = 512 rows through attn::linear, 2 threads
// (or the first argument's), best of 8 passes, in GFLOP/s. Built with -DATTN_BENCH=ON
// (build/bench/bench_prefill_products); to compare two versions of the prefill path, build both and
// run them in turn.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "attn/kernels/matmul.hpp"

namespace {

struct Shape {
  std::int64_t n, k;
};
// wq, wk, wv, wo; w1, w3 and w2 over one 3072-unit block of the FFN.
const Shape kShapes[] = {{4096, 4096}, {1024, 4096}, {1024, 4096}, {4096, 4096},
                         {3072, 4096}, {3072, 4096}, {4096, 3072}};

}  // namespace

int main(int argc, char** argv) {
  const attn::Runtime rt = attn::make_runtime(argc > 1 ? std::atoi(argv[1]) : 2);
  std::vector<std::vector<float>> w;
  for (const Shape& s : kShapes) w.emplace_back(std::size_t(s.n * s.k), 0.01f);
  const std::int64_t M = 512;
  std::vector<float> x(std::size_t(M * 4096), 0.5f), y(std::size_t(M * 4096));
  std::vector<float> scratch(
      std::size_t(attn::scratch_floats(M, 4096, rt.threads, false, false, *rt.kernels)));
  double best = 1e9, flop = 0;
  for (const Shape& s : kShapes) flop += 2.0 * double(M * s.n * s.k);
  for (int pass = 0; pass < 8; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < std::size(kShapes); ++i) {
      const attn::Projection p{y.data(), w[i].data(), nullptr, kShapes[i].n};
      attn::linear(rt, {&p, 1}, x.data(), M, kShapes[i].k, scratch.data());
    }
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("isa %s, OpenBLAS core %s: %.1f GFLOP/s\n", rt.kernels->name,
              attn::blas_core().c_str(), flop / best / 1e9);
}
