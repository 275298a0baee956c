#pragma once
// Each instruction set's table, defined in the file named after it, and its kernels for each
// weight type (generic_f32.cpp, avx2_bf16.cpp, ...; see define_kernels.hpp).
#include "attn/kernels/kernels.hpp"

namespace attn {

#define ATTN_DECLARE_SET(name)                        \
  const Kernels& name##_kernels();                    \
  TypedKernels name##_float_kernels(bool full_width); \
  TypedKernels name##_Bf16_kernels(bool full_width);  \
  TypedKernels name##_F16_kernels(bool full_width);

ATTN_DECLARE_SET(generic)
#if defined(__x86_64__)
ATTN_DECLARE_SET(avx2)
ATTN_DECLARE_SET(avx512)
#endif

#undef ATTN_DECLARE_SET

// Whether this CPU's 512-bit FMAs run at full width: false on AMD's family 25 (Zen 4: two 256-bit
// halves), true elsewhere (Intel, Zen 5). Read from CPUID once.
bool fma512_full_width();

// Kernels::lanes_from of a set with the own GEMM (AVX-512) or without.
std::int64_t lanes_from(bool own_gemm);

}  // namespace attn
