#include "attn/kernels/runtime.hpp"

#include <cblas.h>
#include <omp.h>

#include <string>

#include "attn/error.hpp"
#include "attn/kernels/kernels.hpp"

namespace attn {

Runtime make_runtime(int threads, std::int64_t parallel_flops, std::string_view kernels) {
  openblas_set_num_threads(1);
  Runtime rt;
  rt.threads = threads < 1 ? cores() : threads;
  rt.parallel_flops = parallel_flops;
  rt.kernels = kernels.empty() ? &best_kernels() : find_kernels(kernels);
  if (!rt.kernels)
    throw InputError("kernel set '" + std::string(kernels) + "' is not supported by this CPU");
  return rt;
}

int cores() {
  return omp_get_num_procs();
}

}  // namespace attn
