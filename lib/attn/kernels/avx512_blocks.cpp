// avx512.cpp's batched kernels of quantized rows (quant_batch.hpp): 8 weight rows by up to 4 rows
// of x (32 accumulators' worth of registers with x's vectors: GCC spills a few, as for F32's 8 x
// 4).
#include "attn/kernels/detail/define_kernels.hpp"
#include "attn/kernels/detail/sets.hpp"

#if defined(__x86_64__)
namespace attn {
ATTN_BLOCK_BATCH_SET(avx512, ATTN_AVX512_TARGET, 16, 6, 4)
}  // namespace attn
#endif
