#include "attn/kernels/runtime.hpp"

#include <cblas.h>
#include <omp.h>

#include "attn/error.hpp"
#include "attn/kernels/matmul.hpp"

namespace attn {

Runtime make_runtime(int threads, std::int64_t parallel_flops, const std::string& isa) {
  openblas_set_num_threads(1);
  Runtime rt;
  rt.threads = threads < 1 ? cores() : threads;
  rt.parallel_flops = parallel_flops;
  const std::vector<std::string> isas = matmul_isas();
  rt.isa = isa.empty() ? isas.front() : isa;
  bool known = false;
  for (const std::string& s : isas) known = known || s == rt.isa;
  if (!known) throw InputError("kernel set '" + isa + "' is not supported by this CPU");
  return rt;
}

int cores() {
  return omp_get_num_procs();
}

}  // namespace attn
