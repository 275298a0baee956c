#include "attn/kernels/detail/blas.hpp"

#include <dlfcn.h>

#include <atomic>
#include <stdexcept>
#include <string>

namespace attn::blas {

namespace {

// Set once api() has opened the library. Asking the loader instead (dlopen with RTLD_NOLOAD by
// each name) opened and read both candidate files in every run's summary (issue 52).
std::atomic<bool> opened{false};

// The runtime name first (Debian's alternatives choose the build), then the file CMake found,
// for a library outside the loader's path.
constexpr const char* kNames[] = {"libopenblas.so.0", ATTN_OPENBLAS_LIBRARY};

void* open_library() {
  std::string errors;
  for (const char* name : kNames) {
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return handle;
    errors += std::string("; ") + dlerror();
  }
  throw std::runtime_error(std::string("cannot load OpenBLAS (") + kNames[0] + ", needed for " +
                           "this product): install libopenblas0" + errors);
}

template <class F>
F symbol(void* handle, const char* name) {
  void* f = dlsym(handle, name);
  if (!f) throw std::runtime_error(std::string("OpenBLAS has no ") + name + ": " + dlerror());
  return reinterpret_cast<F>(f);
}

Api open_api() {
  void* handle = open_library();  // kept for the process's life: the one handle
  const Api a{symbol<decltype(Api::sgemm)>(handle, "cblas_sgemm"),
              symbol<decltype(Api::sgemv)>(handle, "cblas_sgemv"),
              symbol<decltype(Api::set_num_threads)>(handle, "openblas_set_num_threads"),
              symbol<decltype(Api::get_corename)>(handle, "openblas_get_corename")};
  a.set_num_threads(1);
  opened.store(true, std::memory_order_release);
  return a;
}

}  // namespace

const Api& api() {
  static const Api a = open_api();  // a failed open throws and is retried by the next caller
  return a;
}

bool loaded() {
  return opened.load(std::memory_order_acquire);
}

}  // namespace attn::blas
