// The own kernels against OpenBLAS by rows: times attn::linear (the batched kernel for M <=
// kBatchRows, the same in tiles past it) against single-threaded OpenBLAS sgemm on each thread's
// rows of the weights (F32 bits whatever --type: the same bytes read) on one Llama-3-8B layer's
// weight shapes, for M rows, candidates interleaved, best of reps.
// Built with -DATTN_BENCH=ON: build/bench/bench_batch_rows
// Arguments: threads [--type f32|bf16|f16] [--compute f32|bf16] M...
// With 1 thread the times are
// the thread's CPU time, which a machine shared with other jobs inflates far less than wall time
// (time slices taken by others).
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "attn/kernels/detail/blas.hpp"
#include "attn/kernels/matmul.hpp"

namespace {

struct Shape {
  std::int64_t n, k;
};
// wq, wk, wv, wo, w1, w3, w2 of Llama-3-8B: 872 MB of f32 weights, read once per pass.
const Shape kShapes[] = {{4096, 4096},  {1024, 4096},  {1024, 4096}, {4096, 4096},
                         {14336, 4096}, {14336, 4096}, {4096, 14336}};

bool g_cpu_time = false;

double now() {
  if (g_cpu_time) {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const int threads = std::atoi(argv[1]);
  attn::WeightType type = attn::WeightType::f32;
  attn::Compute compute = attn::Compute::f32;
  int first = 2;
  for (; first + 1 < argc && argv[first][0] == '-'; first += 2) {
    const std::string flag = argv[first], value = argv[first + 1];
    if (flag == "--type")
      type = attn::find_weight_type(value).value_or(attn::WeightType::f32);
    else if (flag == "--compute")
      compute = attn::parse_compute(value);
  }
  if (attn::traits(type).block > 1) {  // the batched kernels are the element types' only
    std::fprintf(stderr, "--type: %s has no batched kernel of its own (attn-cli bench runs it)\n",
                 attn::weight_type_name(type));
    return 2;
  }
  const attn::Runtime rt = attn::make_runtime(threads, attn::kParallelFlops, "", compute);
  g_cpu_time = threads == 1;
  // The weights in `type`, stored over the start of the same floats (no type is wider).
  std::vector<std::vector<float>> w;
  for (const Shape& s : kShapes) {
    w.emplace_back(std::size_t(s.n * s.k), 0.01f);
    attn::traits(type).from_f32(w.back().data(), s.n * s.k, w.back().data());
  }
  const std::int64_t maxM = 512;
  std::vector<float> x(std::size_t(maxM * 14336), 0.5f), y(std::size_t(maxM * 14336));
  std::vector<float> pack(std::size_t(attn::scratch_floats(maxM, 14336, threads, compute)));
  attn::blas::api();  // opened before the first pass, which would otherwise time it
  std::printf("isa %s, OpenBLAS core %s, %d threads, %s time, %s weights, compute %s\n",
              rt.kernels->name, attn::blas_core().c_str(), threads,
              g_cpu_time ? "thread CPU" : "wall", attn::weight_type_name(type),
              attn::compute_name(compute));
  std::printf("%4s %12s %12s %10s\n", "M", "kernel ms", "sgemm ms", "kernel/B1");
  double b1 = 0;
  for (int a = first; a < argc; ++a) {
    const std::int64_t M = std::atoi(argv[a]);
    double best[2] = {1e30, 1e30};
    for (int rep = 0; rep < 7; ++rep)
      for (int c = 0; c < 2; ++c) {
        const double t0 = now();
        for (std::size_t i = 0; i < std::size(kShapes); ++i) {
          const Shape s = kShapes[i];
          if (c == 0) {
            const attn::Projection p{y.data(), attn::Matrix(w[i].data(), type), nullptr, s.n};
            attn::linear(rt, {&p, 1}, x.data(), M, s.k, pack.data());
          } else {
#pragma omp parallel num_threads(threads)
            {
              const int t = omp_get_thread_num(), nt = omp_get_num_threads();
              const std::int64_t n0 = s.n * t / nt, n1 = s.n * (t + 1) / nt;
              attn::blas::api().sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(M),
                                      blasint(n1 - n0), blasint(s.k), 1.0f, x.data(), blasint(s.k),
                                      w[i].data() + n0 * s.k, blasint(s.k), 0.0f, y.data() + n0,
                                      blasint(s.n));
            }
          }
        }
        best[c] = std::min(best[c], (now() - t0) * 1e3);
      }
    if (M == 1) b1 = best[0];
    std::printf("%4lld %12.2f %12.2f %10.2f\n", (long long)M, best[0], best[1],
                b1 > 0 ? best[0] / b1 : 0.0);
  }
}
