#pragma once
// The model: config, weights, KV cache and preallocated activations, and the one forward pass
// for prefill and decode, as Meta's Transformer.forward(x, start_pos).
#include <cstdint>
#include <vector>

#include "attn/kernels/attention.hpp"
#include "attn/model/cache.hpp"
#include "attn/model/config.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/kernels/ops.hpp"
#include "attn/model/parallel.hpp"
#include "attn/kernels/runtime.hpp"
#include "attn/model/weights.hpp"

namespace attn {

// Prefill runs the FFN over blocks of this many hidden units, with M = all rows, so h1, h3 stay
// at [rows, kFfnBlock] inside the buffer of attention's xq, xk, xv (for Llama-3-8B, 2 x 3072 =
// 4096 + 2 x 1024: they fill it exactly). Since the products pack the weights in blocks anyway
// (gemm.hpp; sgemm in blocks of widen_rows without AVX-512), smaller FFN blocks repack no more.
// bench, prefill 512 of that layer, F32, Zen 4, 2 threads, four alternating runs: blocks of 3072
// 169-180 GFLOP/s, 2048 158-174, the previous 7168 (own h1, h3 buffers, 29 MB) 156-179.
inline constexpr std::int64_t kFfnBlock = 3072;

// Activations for up to max_rows = bsz * seqlen rows, allocated once.
struct Activations {
  std::int64_t max_rows = 0;
  std::int64_t ffn_block = kFfnBlock;  // hidden units per FFN block in prefill (at most)
  // Products of up to this many rows take every hidden unit at once (tests set 0: blocks always).
  std::int64_t ffn_whole_rows = kBatchRows;

  std::vector<float> xb;  // [rows, dim]: the normed input of attention or FFN
  // Attention's xq, xk, xv and the FFN's h1, h3 are never live at the same time: one buffer
  // holds either, which saves the smaller of the two (12.6 MB at a 512-row prefill of
  // Llama-3-8B).
  std::vector<float> work;
  std::int64_t xk_at = 0, xv_at = 0, h3_at = 0;  // offsets in work; xq and h1 start at 0
  float* xq() { return work.data(); }            // [rows, n_heads * head_dim], then the output
  float* xk() { return work.data() + xk_at; }    // [rows, n_kv_heads * head_dim]
  float* xv() { return work.data() + xv_at; }    // [rows, n_kv_heads * head_dim]
  float* h1() { return work.data(); }  // [rows, block]: w1 x, then the gate (decode: ffn_hidden)
  float* h3() { return work.data() + h3_at; }  // [rows, block]: w3 x
  std::vector<float> scores;   // per-thread attention scores: [rt.threads, chunk, max_seq_len]
  std::vector<float> pack;     // x packed for the batched decode kernel (deinterleaved for the
                               // BF16 gemv), or prefill's weight panels or widened BF16/F16
                               // blocks (scratch_floats)
  std::vector<float> partial;  // [rows, dim]: this rank's share of wo or w2, before the allreduce
};

struct Transformer {
  ModelArgs args;  // the whole model
  TransformerWeights weights;
  KVCache cache;
  RopeTable rope;
  Activations act;
  AttentionMask mask;              // kind from args.mask; keep: a padded batch's attention_mask
  std::vector<float*> attn_probs;  // [n_layers]: where forward writes the probabilities, or null
  Runtime rt;                      // fixed at make_transformer: the scratch above is sized from it
  // Model parallel: this rank, and the part of the model it computes (local_args: its heads,
  // KV heads and FFN rows; the weights and cache hold only those). Without a shard, local = args.
  Shard shard;
  ModelArgs local;
  double allreduce_seconds = 0;  // spent in the allreduces so far
};

// Hidden units per FFN block for a product of `rows` rows: decode (rows <= whole_rows, kBatchRows:
// the own kernels, which read each weight once for all rows) takes all ffn_hidden at once,
// prefill goes in blocks of at most ffn_block. Blocks in decode only cost: 5 calls per product
// instead of one, and w2 read in column slices (one Llama-3-8B layer, F32, batch 4, 2 threads: a
// step spent 2.8-2.9 ms beyond its products with blocks of 3072, 1.7-1.9 ms without).
std::int64_t ffn_block_units(const ModelArgs& args, std::int64_t ffn_block, std::int64_t rows,
                             std::int64_t whole_rows = kBatchRows);

// Floats h1 (and h3) must hold for any forward of 1..max_rows rows: the largest rows * block
// over every row count. Used by make_transformer and by the memory estimate.
std::int64_t ffn_buffer_floats(const ModelArgs& args, std::int64_t ffn_block,
                               std::int64_t max_rows);

// max_rows: the most rows (bsz * seqlen) one forward call will be given. The model keeps rt:
// every forward runs with its threads, kernels and scratch. The weights must be loaded or drawn
// for the same shard.
Transformer make_transformer(const ModelArgs& args, TransformerWeights weights,
                             std::int64_t max_rows, const Runtime& rt = make_runtime(1),
                             const Shard& shard = {});

// out[bsz, seqlen, dim] = the n_layers blocks applied to x[bsz, seqlen, dim] at positions
// start_pos .. start_pos+seqlen-1, reading and extending the KV cache. No allocation.
void forward(Transformer& m, const float* x, std::int64_t bsz, std::int64_t seqlen,
             std::int64_t start_pos, float* out);

}  // namespace attn
