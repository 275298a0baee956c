// avx2.cpp's kernels for Bf16 weights.
#include "attn/kernels/detail/define_kernels.hpp"
#include "attn/kernels/detail/sets.hpp"

#if defined(__x86_64__)
namespace attn {
ATTN_TYPED_SET(avx2, __attribute__((target("avx2,fma,f16c"))), 8, ATTN_BATCH_AVX2, Bf16)
}  // namespace attn
#endif
