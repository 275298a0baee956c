// AVX-512F: vectors of 16 floats, 32 registers (register blocks chosen by the rows), and the
// own prefill GEMM (gemm.cpp).
#include "attn/kernels/detail/define_kernels.hpp"
#include "attn/kernels/detail/sets.hpp"

#if defined(__x86_64__)
namespace attn {
namespace {
ATTN_KERNELS(avx512, __attribute__((target("avx512f"))), 16, ATTN_BATCH_WIDE, true)
}  // namespace

const Kernels& avx512_kernels() {
  return k_avx512;
}

}  // namespace attn
#endif
