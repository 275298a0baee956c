// The quantized gemv (quant_gemv.hpp) per weight: one kernel set's gemv of each block type
// against its F32 gemv, one thread, thread CPU time (a shared machine's time slices do not
// count). From cache (--rows 64: 64 rows of 4096 columns, at most 1 MB of F32, in L2) it shows
// the instructions a weight costs; from memory (--rows 4096 and more) the stream.
// Built with -DATTN_BENCH=ON: build/bench/bench_quant_gemv
// Arguments: [kernel set: avx512|avx2|generic, default the best] [--rows N, default 64]
// [--cols K, default 4096, a multiple of 256] [--reps R, default: about 2^30 weights]
// [--batch M: the batched kernel (quant_batch.hpp) for M = 2..32 rows of x instead, its 64-row
// blocks as matmul.cpp hands them out; ns per weight and row of x] [--block-rows N: N-row blocks
// instead (16: a prefill's items, kPrefillRows, each tile of 32 rows of x one call)] [--compute
// q8: the compute-q8 kernels (q8_dot.hpp) of Q8_0, Q4_K and Q6_K instead, x quantized once
// outside the timing] [--huge-pages: the blocks copied to memory advised MADV_HUGEPAGE; by
// default they are on whatever pages the allocator gets (4 KB where transparent huge pages are
// "madvise" only), as a GGUF file's mapping holds them]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include <sys/mman.h>

#include "attn/halves.hpp"
#include "attn/kernels/detail/q8_dot.hpp"
#include "attn/kernels/kernels.hpp"
#include "attn/matrix.hpp"
#include "attn/weight_type.hpp"

namespace {

double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Blocks of bytes drawn from a counter, each block's F16 scales (d and the min, where the traits
// place them) set to small finite values: any quant bits are valid weights.
std::vector<std::uint8_t> draw(const attn::WeightTypeTraits& t, std::int64_t weights) {
  std::vector<std::uint8_t> w(std::size_t(weights / t.block * t.block_bytes));
  std::uint64_t s = 0x9E3779B97F4A7C15ull;
  for (auto& b : w) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    b = std::uint8_t(s >> 56);
  }
  const std::uint16_t d = attn::f32_to_f16(0.001f);
  for (std::int64_t i = 0; i < weights / t.block; ++i) {
    std::uint8_t* blk = w.data() + i * t.block_bytes;
    for (const std::int64_t at : {std::int64_t(t.scale_at), std::int64_t(t.min_at)})
      if (at >= 0) {
        blk[at] = std::uint8_t(d);
        blk[at + 1] = std::uint8_t(d >> 8);
      }
  }
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  const attn::Kernels* k = &attn::best_kernels();
  std::int64_t rows = 64, cols = 4096, reps = 0, batch = 1, block_rows = 64;
  bool q8 = false, huge = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rows" && i + 1 < argc) {
      rows = std::max<std::int64_t>(1, std::stoll(argv[++i]));
    } else if (a == "--cols" && i + 1 < argc) {
      cols = std::max<std::int64_t>(256, std::stoll(argv[++i]) / 256 * 256);
    } else if (a == "--batch" && i + 1 < argc) {
      batch = std::clamp<std::int64_t>(std::stoll(argv[++i]), 1, 32);
    } else if (a == "--compute" && i + 1 < argc) {
      q8 = std::string(argv[++i]) == "q8";
    } else if (a == "--block-rows" && i + 1 < argc) {
      block_rows = std::clamp<std::int64_t>(std::stoll(argv[++i]), 1, 64);
    } else if (a == "--huge-pages") {
      huge = true;
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max<std::int64_t>(1, std::stoll(argv[++i]));
    } else {
      const attn::Kernels* named = attn::find_kernels(a);
      if (!named) {
        std::fprintf(stderr, "unknown argument %s\n", a.c_str());
        return 2;
      }
      k = named;
    }
  }
  if (reps == 0) reps = std::max<std::int64_t>(1, (std::int64_t(1) << 30) / (rows * cols));
  const std::int64_t M = batch;
  std::vector<float> x(static_cast<std::size_t>(M * cols)), y(static_cast<std::size_t>(M * rows));
  for (std::int64_t j = 0; j < M * cols; ++j) x[std::size_t(j)] = float(j % 7) * 0.25f - 0.75f;
  std::vector<float> xp(x.size());  // [K / 16, M, 16], as matmul.cpp packs x for the batch
  for (std::int64_t b = 0; b < cols / 16; ++b)
    for (std::int64_t m = 0; m < M; ++m)
      std::copy_n(x.data() + m * cols + b * 16, 16, xp.data() + (b * M + m) * 16);
  const attn::Q8Dot* dot = q8 ? attn::q8_dot_native() : nullptr;
  if (q8 && !dot) {
    std::fprintf(stderr, "--compute q8: this CPU has no AVX512-VNNI\n");
    return 2;
  }
  std::vector<std::uint8_t> xq(std::size_t(q8 ? attn::q8_input_bytes(M, cols) : 0));
  std::printf("kernels %s, %lld rows x %lld columns, %lld rows of x, %lld reps, one thread\n",
              q8 ? "compute q8" : k->name, static_cast<long long>(rows),
              static_cast<long long>(cols), static_cast<long long>(M),
              static_cast<long long>(reps));
  std::printf("%-6s %10s %10s %8s\n", "type", "ns/weight", "weights/ns", "GB/s");
  for (const attn::WeightTypeTraits& t : attn::kWeightTypeTraits) {
    if (t.block == 1 && t.type != attn::WeightType::f32) continue;
    if (q8 && !attn::q8_weights(t.type)) continue;
    const auto w = draw(t, rows * cols);
    std::vector<float> wf;
    if (t.block == 1) wf.assign(std::size_t(rows * cols), 0.001f);
    const void* wp = t.block == 1 ? static_cast<const void*>(wf.data()) : w.data();
    void* mapped = MAP_FAILED;
    if (huge && t.block > 1) {
      mapped = mmap(nullptr, w.size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (mapped == MAP_FAILED) return 1;
      madvise(mapped, w.size(), MADV_HUGEPAGE);
      std::copy(w.begin(), w.end(), static_cast<std::uint8_t*>(mapped));
      wp = mapped;
    }
    const attn::TypedKernels& tk = k->typed(t.type);
    if (!q8 && (M == 1 ? !tk.gemv : !tk.batch)) continue;
    std::uint8_t* xt = xq.data() + (q8 ? attn::q8_offset(t.type, M, cols) : 0);
    if (q8) dot->quantize(t.type, x.data(), M, cols, xt);
    const std::int64_t row_bytes = t.block == 1 ? cols * 4 : cols / t.block * t.block_bytes;
    auto run = [&] {
      if (q8) {
        for (std::int64_t r0 = 0; r0 < rows; r0 += 64)
          dot->rows(t.type, static_cast<const std::uint8_t*>(wp) + r0 * row_bytes, cols, xt, M,
                    cols, y.data() + r0, rows, std::min<std::int64_t>(64, rows - r0), false);
        return;
      }
      if (M == 1) return tk.gemv(wp, cols, x.data(), x.data(), y.data(), rows, cols, false);
      for (std::int64_t r0 = 0; r0 < rows; r0 += block_rows)
        tk.batch(static_cast<const std::uint8_t*>(wp) + r0 * row_bytes, cols, xp.data(), x.data(),
                 M, cols, y.data() + r0, rows, std::min(block_rows, rows - r0), false);
    };
    run();  // warm
    const double t0 = cpu_now();
    for (std::int64_t r = 0; r < reps; ++r) run();
    const double s = cpu_now() - t0, n = double(reps * rows * cols);
    const double bytes = double(rows * cols / t.block * t.block_bytes) * double(reps);
    std::printf("%-6s %10.4f %10.2f %8.2f\n", t.name, 1e9 * s / n, n / s * 1e-9, bytes / s * 1e-9);
    if (mapped != MAP_FAILED) munmap(mapped, w.size());
  }
}
