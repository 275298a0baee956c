#include "attn/kernels/runtime.hpp"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <thread>
#include <vector>

#include "attn/error.hpp"
#include "attn/kernels/detail/bf16_dot.hpp"
#include "attn/kernels/detail/q8_dot.hpp"
#include "attn/kernels/kernels.hpp"

namespace attn {

Runtime make_runtime(int threads, std::int64_t parallel_flops, std::string_view kernels,
                     Compute compute) {
  Runtime rt;
  rt.threads = threads < 1 ? cores() : threads;
  if (rt.threads > 1) rt.pool = std::make_shared<Pool>(rt.threads);
  rt.parallel_flops = parallel_flops;
  rt.kernels = kernels.empty() ? &best_kernels() : find_kernels(kernels);
  if (!rt.kernels)
    throw InputError("kernel set '" + std::string(kernels) + "' is not supported by this CPU");
  rt.compute = compute;
  if (compute == Compute::bf16 && !(rt.bf16_dot = bf16_dot_native()))
    throw InputError("compute bf16 needs vdpbf16ps (AVX512-BF16), which this CPU does not have",
                     "compute");
  if (compute == Compute::q8 && !(rt.q8_dot = q8_dot_native()))
    throw InputError("compute q8 needs vpdpbusd (AVX512-VNNI), which this CPU does not have",
                     "compute");
  if (compute != Compute::f32 && std::string_view(rt.kernels->name) != "avx512")
    throw InputError(std::string("compute ") + compute_name(compute) +
                         " runs with the avx512 kernels only, not " + rt.kernels->name,
                     "compute");
  return rt;
}

Compute parse_compute(std::string_view name) {
  if (name == "f32") return Compute::f32;
  if (name == "bf16") return Compute::bf16;
  if (name == "q8") return Compute::q8;
  throw InputError("compute: expected f32, bf16 or q8, got '" + std::string(name) + "'", "compute");
}

const char* compute_name(Compute compute) {
  return compute == Compute::bf16 ? "bf16" : compute == Compute::q8 ? "q8" : "f32";
}

// The CPUs this process may run on (its affinity mask: taskset, a container's cpuset), as
// OpenMP's omp_get_num_procs counted them; neither counts a cgroup's CPU quota, and no
// environment variable (OMP_NUM_THREADS) changes it. The mask is read again at each call, as
// OpenMP did; a mask over the default 1024 CPUs is read into a larger set.
int cores() {
  for (int n = CPU_SETSIZE; n <= (1 << 20); n *= 2) {
    std::vector<cpu_set_t> set((CPU_ALLOC_SIZE(n) + sizeof(cpu_set_t) - 1) / sizeof(cpu_set_t));
    if (sched_getaffinity(0, CPU_ALLOC_SIZE(n), set.data()) == 0)
      return std::max(1, CPU_COUNT_S(CPU_ALLOC_SIZE(n), set.data()));
    if (errno != EINVAL) break;
  }
  return std::max(1, int(std::thread::hardware_concurrency()));
}

}  // namespace attn
