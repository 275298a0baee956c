// avx512.cpp's batched kernels of quantized rows (quant_batch.hpp): 6 weight rows by up to 4 rows
// of x (24 accumulators; 8 rows spilled them from the buffer in L1: docs/perf/quant.md).
#include "attn/kernels/detail/define_kernels.hpp"
#include "attn/kernels/detail/sets.hpp"

#if defined(__x86_64__)
namespace attn {
ATTN_BLOCK_BATCH_SET(avx512, ATTN_AVX512_TARGET, 16, 6, 4, true)
}  // namespace attn
#endif
