#pragma once
// Every buffer a model allocates, sized in one place: make_transformer allocates what the plan
// says and the memory estimate (memory.hpp) counts the same plan, so the two cannot drift apart.
// Sizes are floats, computed in 64 bits with overflow checks (a size past 2^62 floats is an
// InputError naming the buffer).
#include <cstdint>
#include <vector>

#include "attn/kernels/matmul.hpp"
#include "attn/kernels/runtime.hpp"
#include "attn/model/config.hpp"
#include "attn/model/parallel.hpp"

namespace attn {

// The FFN runs over a call's rows in passes of at most this many, each with every hidden unit at
// once (model.cpp, feed_forward), so that h1 and h3 stay at [kFfnRows, ffn_hidden]. Why this size:
// docs/perf/batch-invariance.md ("FFN passes").
inline constexpr std::int64_t kFfnRows = 256;

// Floats h1 (and h3) hold: [min(max_rows, kFfnRows), ffn_hidden].
std::int64_t ffn_buffer_floats(const ModelArgs& args, std::int64_t max_rows);

// Floats of each of cache_k and cache_v: [n_layers, max_batch_size, n_kv_heads, max_seq_len,
// head_dim].
std::int64_t kv_cache_floats(const ModelArgs& args);

struct BufferPlan {
  std::int64_t max_rows = 0;  // the most rows (bsz * seqlen) one forward call is given
  std::int64_t cache = 0;     // each of cache_k, cache_v (kv_cache_floats)
  std::int64_t rope = 0;      // the RoPE table: [max_seq_len, head_dim / 2, 2], or 0
  std::int64_t xb = 0;        // [max_rows, dim]: the normed input of attention or FFN
  // Attention's xq, xk, xv and the FFN's h1, h3 are never live at the same time: one buffer,
  // `work`, holds either. xq and h1 start at 0.
  std::int64_t work = 0, xk_at = 0, xv_at = 0, h3_at = 0;
  std::int64_t scores = 0;   // per-thread attention scores (attention_scratch_floats)
  std::int64_t pack = 0;     // linear()'s scratch (scratch_floats)
  std::int64_t partial = 0;  // [max_rows, dim]: a rank's share of wo or w2 before the allreduce

  // The shape the capacity-sized buffers are cut in, for what a run writes of them.
  std::int64_t n_layers = 0, n_kv_heads = 0, head_dim = 0, threads = 0;

  struct Part {
    const char* name;
    std::int64_t floats;
    std::uint64_t written;  // bytes a run writes, at most: what it costs (buffer.hpp)
    bool zeroed = false;    // a FloatBuffer: floats * 4 bytes reserved, `written` of them used
  };
  // Every buffer above with its name, for the memory estimate of a run of `batch` sequences
  // reaching `positions`: the KV cache, RoPE table and attention scratch are FloatBuffers, whose
  // untouched pages cost nothing, so they count what such a run writes of them.
  std::vector<Part> parts(std::int64_t batch, std::int64_t positions) const;
};

// The buffers of a model computing `local` (a rank's local_args, or the whole model) for forward
// calls of up to max_rows rows on rt's threads and kernels (no weight type changes them: every
// type is widened in the kernels' registers and L1 buffers, matmul.hpp).
BufferPlan plan_buffers(const ModelArgs& local, const Shard& shard, std::int64_t max_rows,
                        const Runtime& rt);

}  // namespace attn
