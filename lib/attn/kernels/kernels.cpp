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
// What the sets need of the CPU and of the OS (XGETBV: it saves the YMM and ZMM registers), read
// once per process with three CPUIDs: on a virtual machine each traps to the hypervisor (12 us on
// a Firecracker guest), and libgcc's __builtin_cpu_init made about ten (issue 52,
// docs/perf/startup.md); nor does clang 14's __builtin_cpu_supports know F16C.
struct Cpu {
  bool avx2 = false, avx512 = false;  // each with FMA and F16C, as the sets' targets have them
  bool fma512_full_width = true;
};

const Cpu& cpu() {
  static const Cpu probed = [] {
    Cpu c;
    unsigned a = 0, b = 0, cx = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &cx, &d)) return c;
    const unsigned max_leaf = a;
    const bool amd = b == 0x68747541;  // "Auth" of "AuthenticAMD"
    __get_cpuid(1, &a, &b, &cx, &d);
    const unsigned family = ((a >> 8) & 0xf) + ((a >> 20) & 0xff);
    c.fma512_full_width = !(amd && family == 25);
    unsigned xcr0 = 0, high = 0;
    if (cx & bit_OSXSAVE) __asm__("xgetbv" : "=a"(xcr0), "=d"(high) : "c"(0));
    (void)high;
    const bool ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6;
    const bool fma_f16c = ymm && (cx & bit_FMA) && (cx & bit_F16C);
    unsigned leaf7 = 0;
    if (max_leaf >= 7) __cpuid_count(7, 0, a, leaf7, cx, d);
    c.avx2 = fma_f16c && (leaf7 & bit_AVX2);
    c.avx512 = fma_f16c && zmm && (leaf7 & bit_AVX512F);
    return c;
  }();
  return probed;
}
#endif

}  // namespace

bool fma512_full_width() {
#if defined(__x86_64__)
  return cpu().fma512_full_width;
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
  // Once per process: a run asks more than once.
  static const std::vector<const Kernels*> out = [] {
    std::vector<const Kernels*> sets;
#if defined(__x86_64__)
    if (cpu().avx512) sets.push_back(&avx512_kernels());
    if (cpu().avx2) sets.push_back(&avx2_kernels());
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
