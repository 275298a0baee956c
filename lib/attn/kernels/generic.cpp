// The kernels every x86-64 (and any other) CPU runs: vectors of 4 floats, the FMAs in software
// where the CPU has none (std::fma), so the bits are those of the other sets. The weight types'
// kernels are in generic_f32.cpp, generic_bf16.cpp and generic_f16.cpp.
#include "attn/kernels/detail/define_kernels.hpp"
#include "attn/kernels/detail/sets.hpp"

namespace attn {
ATTN_KERNELS(generic, , 4, false)
}  // namespace attn
