// AVX2 with FMA and F16C: vectors of 8 floats, 16 registers (3 x 3 and 4 x 2 register blocks).
#include "attn/kernels/detail/define_kernels.hpp"
#include "attn/kernels/detail/sets.hpp"

#if defined(__x86_64__)
namespace attn {
namespace {
ATTN_KERNELS(avx2, __attribute__((target("avx2,fma,f16c"))), 8, ATTN_BATCH_AVX2, false)
}  // namespace

const Kernels& avx2_kernels() {
  return k_avx2;
}

}  // namespace attn
#endif
