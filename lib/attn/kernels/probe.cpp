#include "attn/kernels/probe.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "attn/kernels/detail/blas.hpp"
#include "attn/kernels/kernels.hpp"

namespace attn {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

constexpr ReadPattern kReadPatterns[] = {
    {"contiguous halves per thread", 0},
    {"64-row blocks taken dynamically, 1 row at a time", 1},
    {"64-row blocks taken dynamically, 4 rows interleaved", 4},
    {"64-row blocks taken dynamically, 8 rows interleaved", 8},
    {"64-row blocks taken dynamically, 8 rows interleaved, prefetched ahead as gemv",
     kPrefetchedRows},
};
constexpr std::int64_t kReadBlockRows = 64;

// On the runtime's own threads, as the decode steps the read is compared with: a second team
// (OpenMP's) kept spinning on a core after the read and slowed the next timed step by a third.
// Per-slot sums, added in slot order, only keep the loads alive.
float read_pattern(const Runtime& rt, std::span<const StreamMatrix> mats,
                   const ReadPattern& pattern) {
  const Kernels& k = *rt.kernels;
  std::vector<float> sums(std::size_t(std::max(rt.threads, 1)), 0.0f);
  if (pattern.interleave == 0) {
    const int nt = std::max(rt.threads, 1);
    rt.run(nt, nt > 1, [&](std::int64_t t, int slot) {
      for (const StreamMatrix& mat : mats) {
        const std::int64_t n = mat.n * mat.k, i0 = n * t / nt, i1 = n * (t + 1) / nt;
        sums[std::size_t(slot)] += k.read_contiguous(mat.w + i0, i1 - i0);
      }
    });
  } else {
    std::int64_t blocks = 0;
    for (const StreamMatrix& mat : mats) blocks += (mat.n + kReadBlockRows - 1) / kReadBlockRows;
    rt.run(blocks, rt.threads > 1, [&](std::int64_t b, int slot) {
      for (const StreamMatrix& mat : mats) {
        const std::int64_t nb = (mat.n + kReadBlockRows - 1) / kReadBlockRows;
        if (b < nb) {
          const std::int64_t r0 = b * kReadBlockRows, r1 = std::min(mat.n, r0 + kReadBlockRows);
          sums[std::size_t(slot)] +=
              k.read_rows(mat.w + r0 * mat.k, r1 - r0, mat.k, pattern.interleave);
          return;
        }
        b -= nb;
      }
    });
  }
  float total = 0;
  for (const float s : sums) total += s;
  return total;
}

// k's FMA loop once on each of `threads` threads, the caller's among them; the sum of their
// results. Plain threads, started and joined here (tens of microseconds against a round's tenth
// of a second): each must run exactly one loop at once, which a pool's claimed items do not
// promise, and none may spin on after the round.
double fma_loops(const Kernels& k, std::int64_t iters, int threads) {
  std::vector<double> sinks(std::size_t(std::max(threads, 1)), 0.0);
  std::vector<std::thread> team;
  for (int t = 1; t < threads; ++t)
    team.emplace_back([&k, &sinks, iters, t] { sinks[std::size_t(t)] = k.fma_loop(iters); });
  sinks[0] = k.fma_loop(iters);
  for (std::thread& th : team) th.join();
  double sum = 0;
  for (const double s : sinks) sum += s;
  return sum;
}

}  // namespace

std::span<const ReadPattern> read_patterns() {
  return kReadPatterns;
}

double stream_read_gbs(const Runtime& rt, std::span<const StreamMatrix> mats,
                       const ReadPattern& pattern) {
  double bytes = 0;
  for (const StreamMatrix& mat : mats) bytes += double(mat.n * mat.k) * 4;
  const auto t0 = Clock::now();
  const float total = read_pattern(rt, mats, pattern);
  const double t = since(t0);
  if (total == 12345.678f) bytes += 1;  // keeps the sums alive
  return bytes / t / 1e9;
}

double sgemm_seconds(std::span<const StreamMatrix> mats, std::int64_t P, int threads) {
  std::int64_t kmax = 0, nmax = 0;
  for (const StreamMatrix& mat : mats) kmax = std::max(kmax, mat.k), nmax = std::max(nmax, mat.n);
  std::vector<float> A(std::size_t(P * kmax), 0.5f), C(std::size_t(P * nmax));
  const blas::Api& blas = blas::api();
  blas.set_num_threads(threads);
  double best = 1e30;
  for (int rep = 0; rep < 2; ++rep) {
    const auto t0 = Clock::now();
    for (const StreamMatrix& mat : mats)
      blas.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(P), blasint(mat.n),
                 blasint(mat.k), 1.0f, A.data(), blasint(mat.k), mat.w, blasint(mat.k), 0.0f,
                 C.data(), blasint(mat.n));
    best = std::min(best, since(t0));
  }
  blas.set_num_threads(1);
  return best;
}

double fma_peak_gflops(int threads, std::string& set) {
  const std::int64_t iters = 20'000'000;
  double best = 0;
  // The best of a few rounds (a tenth of a second each): one round on a shared machine can land
  // in a busy moment and report a peak below what the prefill then reaches.
  for (int round = 0; round < 5; ++round)
    for (const Kernels* k : supported_kernels()) {
      const auto t0 = Clock::now();
      const double sink = fma_loops(*k, iters, threads);
      const double t = since(t0);
      const double g = double(iters) * 12 * k->width * 2 * threads / t / 1e9 + sink * 0;
      if (g > best) best = g, set = k->name;
    }
  return best;
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string name, family, model;
  const auto value = [](const std::string& line) {
    const std::size_t colon = line.find(':');
    return colon == std::string::npos ? std::string()
                                      : line.substr(line.find_first_not_of(' ', colon + 1));
  };
  for (std::string line;
       std::getline(in, line) && (name.empty() || family.empty() || model.empty());) {
    if (line.starts_with("model name"))
      name = value(line);
    else if (line.starts_with("cpu family"))
      family = value(line);
    else if (line.starts_with("model\t") || line.starts_with("model "))
      model = value(line);
  }
  if (name.empty()) return "unknown CPU";
  return family.empty() ? name : name + " (family " + family + ", model " + model + ")";
}

}  // namespace attn
