// avx512.cpp's kernels for Bf16 weights.
#include "attn/kernels/detail/define_kernels.hpp"
#include "attn/kernels/detail/sets.hpp"

#if defined(__x86_64__)
namespace attn {
ATTN_TYPED_SET(avx512, ATTN_AVX512_TARGET, 16, ATTN_BATCH_WIDE, Bf16)
}  // namespace attn
#endif
