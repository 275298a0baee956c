// generic.cpp's kernels for float weights.
#include "attn/kernels/detail/define_kernels.hpp"
#include "attn/kernels/detail/sets.hpp"

namespace attn {
ATTN_TYPED_SET(generic, , 4, ATTN_BATCH_NARROW, float)
}  // namespace attn
