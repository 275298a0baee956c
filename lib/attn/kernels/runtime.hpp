#pragma once
// What a run depends on besides the model, as gemma.cpp's ThreadingContext: the threads every
// parallel region uses, the work under which a region stays on one thread, and which of the own
// kernel sets runs. Made once, then owned by the Transformer, whose scratch (attention scores
// per thread, packed rows) is sized from it: a model cannot run with a thread count its buffers
// were not made for, and nothing here is process-wide.
#include <cstdint>
#include <memory>
#include <string_view>

#include "attn/kernels/kernels.hpp"
#include "attn/kernels/pool.hpp"

namespace attn {

// Work below this many flops stays on one thread: waking another costs more than it saves, and
// on a busy machine the other thread may not get a core for a scheduler slice, so a product this
// small would wait far longer for it than it takes alone (bench/busy.sh; docs/perf/README.md).
inline constexpr std::int64_t kParallelFlops = 1 << 22;

// How products compute: f32, exactly (the weights widened; the default); bf16, BF16 weights times
// the activations rounded to BF16 by vdpbf16ps (detail/bf16_dot.hpp); q8, Q8_0, Q4_K and Q6_K
// weights times the activations quantized to 8 bits as llama.cpp does, integer dot products
// (detail/q8_dot.hpp). Under bf16 and q8 the other weight types compute exactly.
enum class Compute { f32, bf16, q8 };
struct Bf16Dot;  // detail/bf16_dot.hpp
struct Q8Dot;    // detail/q8_dot.hpp

struct Runtime {
  int threads = 1;
  std::int64_t parallel_flops = kParallelFlops;  // 0: every parallel path runs (tests do this)
  const Kernels* kernels = &generic_kernels();   // resolved once, by make_runtime
  Compute compute = Compute::f32;
  // compute bf16's kernels: vdpbf16ps (make_runtime), or their emulation (tests only).
  const Bf16Dot* bf16_dot = nullptr;
  // compute q8's kernels (make_runtime; AVX-512 VNNI).
  const Q8Dot* q8_dot = nullptr;

  // The threads (threads - 1 workers beside the caller), shared by the copies of this Runtime;
  // null with one thread.
  std::shared_ptr<Pool> pool;

  bool worth_parallel(std::int64_t flops) const { return threads > 1 && flops > parallel_flops; }

  // item(i, slot) for each i in [0, n): on the pool when `parallel`, else on the calling thread
  // (slot: Pool::current_slot()). An item's per-thread scratch is the slot's, 0 <= slot < threads.
  template <typename F>
  void run(std::int64_t n, bool parallel, F&& item) const {
    if (parallel && pool) return pool->run(n, item);
    const int slot = Pool::current_slot();
    for (std::int64_t i = 0; i < n; ++i) item(i, slot);
  }
};

// threads < 1: one per core. kernels "": the best set this CPU runs; an unknown or unsupported one
// throws InputError, as does compute bf16 where the CPU lacks AVX512-BF16, compute q8 where it
// lacks AVX512-VNNI, either with a kernel set other than avx512. OpenBLAS runs one thread per call
// (detail/blas.hpp pins it when it is opened): the pool owns the cores, and two spinning pools on
// the same cores cost milliseconds per hand-over.
Runtime make_runtime(int threads = 0, std::int64_t parallel_flops = kParallelFlops,
                     std::string_view kernels = "", Compute compute = Compute::f32);

// "f32", "bf16" or "q8" (InputError otherwise), and back.
Compute parse_compute(std::string_view name);
const char* compute_name(Compute compute);

// The machine's cores this process may run on (its affinity mask), as OpenMP counted them.
int cores();

}  // namespace attn
