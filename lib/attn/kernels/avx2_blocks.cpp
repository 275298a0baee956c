// avx2.cpp's batched kernels of quantized rows (quant_batch.hpp): 4 weight rows by up to 2 rows
// of x (16 registers: 8 accumulators, 2 vectors of x, a weight vector).
#include "attn/kernels/detail/define_kernels.hpp"
#include "attn/kernels/detail/sets.hpp"

#if defined(__x86_64__)
namespace attn {
ATTN_BLOCK_BATCH_SET(avx2, __attribute__((target("avx2,fma,f16c"))), 8, 4, 2, true)
}  // namespace attn
#endif
