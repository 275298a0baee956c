// AVX2 with FMA and F16C: vectors of 8 floats, 16 registers (3 x 3 and 4 x 2 register blocks).
// The weight types' kernels are in avx2_f32.cpp, avx2_bf16.cpp and avx2_f16.cpp.
#include "attn/kernels/detail/define_kernels.hpp"
#include "attn/kernels/detail/sets.hpp"

#if defined(__x86_64__)
namespace attn {
ATTN_KERNELS(avx2, __attribute__((target("avx2,fma,f16c"))), 8, false)
}  // namespace attn
#endif
