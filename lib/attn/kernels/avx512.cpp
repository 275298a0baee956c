// AVX-512F: vectors of 16 floats, 32 registers (register blocks chosen by the rows), and the
// own prefill GEMM (gemm.cpp).
// The weight types' kernels are in avx512_f32.cpp, avx512_bf16.cpp and avx512_f16.cpp.
#include "attn/kernels/detail/define_kernels.hpp"
#include "attn/kernels/detail/sets.hpp"

#if defined(__x86_64__)
namespace attn {
ATTN_KERNELS(avx512, ATTN_AVX512_TARGET, 16, true)
}  // namespace attn
#endif
