#include "attn/kernels/kernels.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
// glibc's table of what CPUID said; its header spells bool as C's _Bool, which only GCC takes in
// C++ (clang builds ask CPUID, below).
#if __has_include(<sys/platform/x86.h>) && !defined(__clang__)
#define ATTN_GLIBC_CPU_TABLE 1
#include <sys/platform/x86.h>
#endif
#endif

#include "attn/kernels/detail/sets.hpp"

namespace attn {

namespace {

#if defined(__x86_64__)
// CpuFeatures is read once per process: CPUID traps to the hypervisor on a virtual machine (12 us
// on a Firecracker guest), and libgcc's __builtin_cpu_init made about ten (issue 52,
// docs/perf/startup.md); nor does clang 14's __builtin_cpu_supports know F16C. glibc (2.33 on) has
// read them all before main: its table is asked where it is there, four CPUIDs elsewhere.

// Zen 3 and 4 (family 25: AMD's only) split 512-bit FMAs into two halves.
constexpr bool full_width_family(unsigned leaf1_eax) {
  return ((leaf1_eax >> 8) & 0xf) + ((leaf1_eax >> 20) & 0xff) != 25;
}

#if defined(ATTN_GLIBC_CPU_TABLE)
CpuFeatures probe() {
  CpuFeatures c;
  const bool fma_f16c = CPU_FEATURE_ACTIVE(FMA) && CPU_FEATURE_ACTIVE(F16C);
  c.avx2 = fma_f16c && CPU_FEATURE_ACTIVE(AVX2);
  c.avx512 = fma_f16c && CPU_FEATURE_ACTIVE(AVX512F);
  c.fma512_full_width =
      full_width_family(__x86_get_cpuid_feature_leaf(CPUID_INDEX_1)->cpuid_array[0]);
  c.avx512dq = c.avx512 && CPU_FEATURE_ACTIVE(AVX512DQ);
  c.avx512bw_vl = c.avx512dq && CPU_FEATURE_ACTIVE(AVX512BW) && CPU_FEATURE_ACTIVE(AVX512VL);
  c.avx512_vnni = c.avx512bw_vl && CPU_FEATURE_ACTIVE(AVX512_VNNI);
  c.avx512_bf16 = c.avx512bw_vl && CPU_FEATURE_ACTIVE(AVX512_BF16);
  return c;
}
#else
CpuFeatures probe() {
  CpuFeatures c;
  unsigned a = 0, b = 0, cx = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &cx, &d)) return c;
  const unsigned max_leaf = a;
  __get_cpuid(1, &a, &b, &cx, &d);
  c.fma512_full_width = full_width_family(a);
  unsigned xcr0 = 0, high = 0;
  if (cx & bit_OSXSAVE) __asm__("xgetbv" : "=a"(xcr0), "=d"(high) : "c"(0));
  (void)high;
  const bool ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6;
  const bool fma_f16c = ymm && (cx & bit_FMA) && (cx & bit_F16C);
  unsigned leaf7 = 0, leaf7c = 0, leaf7_1 = 0;
  if (max_leaf >= 7) __cpuid_count(7, 0, a, leaf7, leaf7c, d);
  if (max_leaf >= 7 && a >= 1) __cpuid_count(7, 1, leaf7_1, b, cx, d);
  c.avx2 = fma_f16c && (leaf7 & bit_AVX2);
  c.avx512 = fma_f16c && zmm && (leaf7 & bit_AVX512F);
  c.avx512dq = c.avx512 && (leaf7 & bit_AVX512DQ);
  c.avx512bw_vl = c.avx512dq && (leaf7 & bit_AVX512BW) && (leaf7 & bit_AVX512VL);
  c.avx512_vnni = c.avx512bw_vl && (leaf7c & bit_AVX512VNNI);
  c.avx512_bf16 = c.avx512bw_vl && (leaf7_1 & bit_AVX512BF16);
  return c;
}
#endif

#endif

}  // namespace

const CpuFeatures& cpu_features() {
#if defined(__x86_64__)
  static const CpuFeatures probed = probe();
#else
  static const CpuFeatures probed;
#endif
  return probed;
}

Kernels with_block_batches(Kernels k, BatchFn (*batch)(WeightType)) {
  for (std::size_t t = kElementTypeCount; t < kWeightTypeCount; ++t)
    k.of[t].batch = batch(WeightType(t));
  return k;
}

std::vector<const Kernels*> supported_kernels() {
  // Once per process: a run asks more than once.
  static const std::vector<const Kernels*> out = [] {
    std::vector<const Kernels*> sets;
#if defined(__x86_64__)
    if (cpu_features().avx512) sets.push_back(&avx512_kernels());
    if (cpu_features().avx2) sets.push_back(&avx2_kernels());
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
