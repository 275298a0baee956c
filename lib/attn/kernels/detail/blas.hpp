#pragma once
// OpenBLAS, opened on first use (engine-internal, not installed). Linked, it would be loaded with
// every process and its constructor (CPU probe, thread pool, buffers) would run before main, also
// for runs that never multiply through it (--version, decode, the AVX-512 GEMM;
// docs/perf/startup.md). The functions are the library's own: same calls, same bits.
#include <cblas.h>

namespace attn::blas {

struct Api {
  decltype(&::cblas_sgemm) sgemm;
  decltype(&::cblas_sgemv) sgemv;
  decltype(&::openblas_set_num_threads) set_num_threads;
  decltype(&::openblas_get_corename) get_corename;
};

// Opens libopenblas once (thread-safe; the first caller may be a pool's worker) and pins it to
// one thread per call, as the runtime's pool owns the cores (runtime.hpp). Throws
// std::runtime_error naming the library when it cannot be opened or lacks a function.
const Api& api();

// Whether api() has opened OpenBLAS in this process (another library's copy, such as numpy's,
// is not counted); opens nothing and asks the loader nothing.
bool loaded();

}  // namespace attn::blas
