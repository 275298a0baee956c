#include "attn/kernels/kernels.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "attn/kernels/detail/sets.hpp"

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

std::vector<const Kernels*> supported_kernels() {
  std::vector<const Kernels*> out;
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool fma_f16c = __builtin_cpu_supports("fma") && has_f16c();  // avx512's target's too
  if (__builtin_cpu_supports("avx512f") && fma_f16c) out.push_back(&avx512_kernels());
  if (__builtin_cpu_supports("avx2") && fma_f16c) out.push_back(&avx2_kernels());
#endif
  out.push_back(&generic_kernels());
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
