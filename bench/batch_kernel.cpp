// The batched decode kernel fed from cache: one kernel set's batch (M = 2..32) and gemv (M = 1)
// on 64 weight rows of 1024 columns (256 KB of F32: L2), repeated, against the set's FMA peak,
// one thread, thread CPU time (a shared machine's time slices do not count). What the register
// blocking alone achieves; bench_batch_rows and `attn-cli bench` measure it fed from memory.
// Built with -DATTN_BENCH=ON: build/bench/bench_batch_kernel
// Arguments: [kernel set: avx512|avx2|generic, default the best] [--type f32|bf16|f16]
// [--shape ROWS COLS: the weights, default 64 1024] [--ldw N: their row stride, >= COLS] [M...]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "attn/kernels/detail/layout.hpp"
#include "attn/kernels/kernels.hpp"
#include "attn/matrix.hpp"
#include "attn/model/rng.hpp"

namespace {

double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// x [M, K] packed as matmul.cpp packs it: [K / kPack, M, kPack].
std::vector<float> pack(const std::vector<float>& x, std::int64_t M, std::int64_t K) {
  std::vector<float> p(std::size_t(M * K));
  for (std::int64_t b = 0; b < K / attn::kPack; ++b)
    for (std::int64_t m = 0; m < M; ++m)
      std::memcpy(&p[std::size_t((b * M + m) * attn::kPack)],
                  &x[std::size_t(m * K + b * attn::kPack)], attn::kPack * sizeof(float));
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  const attn::Kernels* k = &attn::best_kernels();
  int type = 0;
  std::int64_t rows_w = 64, cols = 1024, ldw = 0;
  std::vector<std::int64_t> rows;  // x's row counts M
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--type" && i + 1 < argc) {
      const std::string t = argv[++i];
      type = t == "bf16" ? 1 : t == "f16" ? 2 : 0;
    } else if (a == "--shape" && i + 2 < argc) {  // rows cols
      rows_w = std::max<std::int64_t>(1, std::stoll(argv[++i]));
      cols = std::max<std::int64_t>(attn::kPack, std::stoll(argv[++i]));
    } else if (a == "--ldw" && i + 1 < argc) {
      ldw = std::stoll(argv[++i]);
    } else if (attn::find_kernels(a)) {
      k = attn::find_kernels(a);
    } else {
      rows.push_back(std::stoll(a));
    }
  }
  if (rows.empty()) rows = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};
  ldw = std::max(ldw, cols);
  // The same multiply-adds whatever the shape: 2000 passes over 64 x 1024 weights.
  const std::int64_t reps = std::max<std::int64_t>(1, 2000 * 64 * 1024 / (rows_w * cols));
  std::vector<float> w(rows_w * ldw), x(32 * cols), y(32 * rows_w);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = float(attn::uniform_pm1(1, 0, i));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(attn::uniform_pm1(2, 0, i));
  std::vector<std::uint16_t> h(w.size());  // the same weights as BF16 or F16 bits
  for (std::size_t i = 0; i < w.size(); ++i)
    h[i] = type == 2 ? attn::f32_to_f16(w[i]) : attn::f32_to_bf16(w[i]);
  const void* wp = type ? static_cast<const void*>(h.data()) : w.data();

  const std::int64_t iters = 20'000'000;
  double t0 = cpu_now();
  volatile double sink = k->fma_loop(iters);
  (void)sink;
  const double peak = double(iters) * 12 * k->width * 2 / (cpu_now() - t0) / 1e9;
  std::printf("kernels %s, %s weights, 1 thread, FMA peak %.1f GFLOP/s\n", k->name,
              type == 2   ? "F16"
              : type == 1 ? "BF16"
                          : "F32",
              peak);
  std::printf("   M   GFLOP/s  of peak\n");
  for (std::int64_t M : rows) {
    if (M < 1 || M > 32) continue;
    const std::vector<float> xp = pack(x, M, cols);
    double best = 1e9;
    for (int rep = 0; rep < 7; ++rep) {
      t0 = cpu_now();
      for (std::int64_t i = 0; i < reps; ++i)
        if (M == 1)
          k->of[type].gemv(wp, ldw, x.data(), x.data(), y.data(), rows_w, cols, false);
        else
          k->of[type].batch(wp, ldw, xp.data(), x.data(), M, cols, y.data(), rows_w, rows_w, false);
      best = std::min(best, cpu_now() - t0);
    }
    const double gflops = 2.0 * double(M * rows_w * cols * reps) / best / 1e9;
    std::printf("%4lld  %8.1f  %6.0f%%\n", static_cast<long long>(M), gflops, 100 * gflops / peak);
  }
}
