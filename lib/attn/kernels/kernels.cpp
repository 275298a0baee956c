#include "attn/kernels/kernels.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "attn/kernels/detail/batch_lanes.hpp"
#include "attn/kernels/detail/sets.hpp"
#include "attn/kernels/matmul.hpp"

namespace attn {

namespace {

#if defined(__x86_64__)
// F16C (vcvtph2ps on 8 lanes), from CPUID: clang 14's __builtin_cpu_supports does not know it.
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#endif

}  // namespace

bool fma512_full_width() {
#if defined(__x86_64__)
  static const bool full = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return true;
    const bool amd = b == 0x68747541;  // "Auth" of "AuthenticAMD"
    if (!__get_cpuid(1, &a, &b, &c, &d)) return true;
    const unsigned family = ((a >> 8) & 0xf) + ((a >> 20) & 0xff);
    return !(amd && family == 25);
  }();
  return full;
#else
  return true;
#endif
}

Kernels with_block_batches(Kernels k, BatchFn (*batch)(WeightType)) {
  for (std::size_t t = kElementTypeCount; t < kWeightTypeCount; ++t)
    k.of[t].batch = batch(WeightType(t));
  return k;
}

std::int64_t lanes_from(bool) {
  // Never: batch_lanes sums each output in one chain, not in the canonical order (vectors.hpp's
  // kChains), so a row's bits would depend on the batch it came in.
  return kBatchRows + 1;
}

std::vector<const Kernels*> supported_kernels() {
  // Probed once per process: CPUID traps to the hypervisor on a virtual machine, and a run asks
  // more than once (issue 52, docs/perf/startup.md).
  static const std::vector<const Kernels*> out = [] {
    std::vector<const Kernels*> sets;
#if defined(__x86_64__)
    __builtin_cpu_init();
    const bool fma_f16c = __builtin_cpu_supports("fma") && has_f16c();  // avx512's target's too
    if (__builtin_cpu_supports("avx512f") && fma_f16c) sets.push_back(&avx512_kernels());
    if (__builtin_cpu_supports("avx2") && fma_f16c) sets.push_back(&avx2_kernels());
#endif
    sets.push_back(&generic_kernels());
    return sets;
  }();
  return out;
}

const Kernels& best_kernels() {
  return *supported_kernels().front();
}

const Kernels* find_kernels(std::string_view name) {
  for (const Kernels* k : supported_kernels())
    if (name == k->name) return k;
  return nullptr;
}

}  // namespace attn
