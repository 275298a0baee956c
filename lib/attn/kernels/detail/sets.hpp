#pragma once
// Each instruction set's table, defined in the file named after it.
#include "attn/kernels/kernels.hpp"

namespace attn {

const Kernels& generic_kernels();
#if defined(__x86_64__)
const Kernels& avx2_kernels();
const Kernels& avx512_kernels();
#endif

}  // namespace attn
