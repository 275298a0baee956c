#pragma once
// Q8 compute (engine-internal, not installed): products of Q8_0, Q4_K and Q6_K weights with the
// activations quantized per block to 8 bits as llama.cpp quantizes them (ggml-quants.c's
// quantize_row_q8_0_ref for Q8_0 weights: blocks of 32, d = amax / 127 kept as an F16,
// q = roundf(x / d); quantize_row_q8_K_ref for Q4_K and Q6_K: blocks of 256, an F32 d =
// max / -127 of the value of largest magnitude, q = nearest-even of x * (-127 / max), and the
// 16 sums of 16 quants), the products summed in integers (exact) and only then scaled in F32.
// Opt-in (Runtime::compute q8) and not exact: the error is the activations' quantization
// (docs/perf/q8-compute.md). Other weight types under q8 run the exact kernels.
//
// The order of every output y[m][r] (the same whatever M, the tile a row falls in, the weight
// rows beside it and the thread count): for each block of the row in k order (Q8_0: two blocks
// at a time, the pair's first in lanes 0-7, its second in lanes 8-15), the block's integer sums
// in 16 int32 lanes (exact), each lane converted to F32 and added to its lane of a 16-lane F32
// accumulator by one fused multiply-add with the F32 product of the two scales (Q4_K: then the
// mins' 8 lane sums by a second one with -(dmin * d_x)); at the end the 16 lanes summed by one
// fixed tree (_mm512_reduce_add_ps), then added to y when accumulating.
#include <cstdint>

#include "attn/weight_type.hpp"

namespace attn {

// Whether this CPU has what the kernels use: AVX-512 F, BW, DQ, VL and VNNI (vpdpbusd,
// vpdpwssd).
bool has_q8_dot();

// The weight types compute q8 multiplies by quantized activations.
bool q8_weights(WeightType type);

// Bytes of one row of x quantized for weights of `type` (K a whole number of its blocks): Q8_0,
// the quants (offset by 128, as unsigned bytes) then the F32 scales (the F16's value);
// Q4_K/Q6_K (Q8_K), the quants, the F32 scales, then the 16-sums as int16.
std::int64_t q8_row_bytes(WeightType type, std::int64_t K);
// Bytes of x quantized both ways (where K has whole blocks of each) for M rows: the Q8_0 rows
// at q8_offset(Q8_0...) = 0, the Q8_K rows after them.
std::int64_t q8_input_bytes(std::int64_t M, std::int64_t K);
std::int64_t q8_offset(WeightType type, std::int64_t M, std::int64_t K);

struct Q8Dot {
  // x [M, K] quantized for weights of `type`, q8_row_bytes(type, K) bytes a row, into out.
  void (*quantize)(WeightType type, const float* x, std::int64_t M, std::int64_t K,
                   std::uint8_t* out);
  // y[m * ldy + r] (=|+=) w[r] . x[m] for n rows of w (ldw weights apart) of `type` and M <=
  // kBatchRows rows of x quantized by quantize: each weight block unpacked once for all M rows.
  void (*rows)(WeightType type, const void* w, std::int64_t ldw, const std::uint8_t* xq,
               std::int64_t M, std::int64_t K, float* y, std::int64_t ldy, std::int64_t n,
               bool accumulate);
};

// Null where has_q8_dot() is false.
const Q8Dot* q8_dot_native();

}  // namespace attn
