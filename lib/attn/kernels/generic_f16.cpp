// generic.cpp's kernels for F16 weights.
#include "attn/kernels/detail/define_kernels.hpp"
#include "attn/kernels/detail/sets.hpp"

namespace attn {
ATTN_TYPED_SET(generic, , 4, ATTN_BATCH_NARROW, F16)
}  // namespace attn
