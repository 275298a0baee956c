// generic.cpp's batched kernels of quantized rows (quant_batch.hpp): 4 weight rows by x's rows in
// groups of up to 3, one kernel for every M (the fallback set: one compile of each widening).
#include "attn/kernels/detail/define_kernels.hpp"
#include "attn/kernels/detail/sets.hpp"

namespace attn {
ATTN_BLOCK_BATCH_SET(generic, , 4, 4, 3, false)
}  // namespace attn
