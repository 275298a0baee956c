// generic.cpp's batched kernels of quantized rows (quant_batch.hpp): 4 weight rows by up to 3 rows
// of x, as its F32 ones.
#include "attn/kernels/detail/define_kernels.hpp"
#include "attn/kernels/detail/sets.hpp"

namespace attn {
ATTN_BLOCK_BATCH_SET(generic, , 4, 4, 3)
}  // namespace attn
