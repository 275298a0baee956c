#pragma once
// Scaled dot-product attention over the KV cache, grouped-query: query heads
// g*n_rep .. g*n_rep+n_rep-1 read KV head g where it lies in the cache (no repeat_kv copy).
// Causal (Meta's mask offset by start_pos) or none (the notebooks' mask=None), and optionally
// a padding mask over key positions (Hugging Face's attention_mask).
#include <cstdint>
#include <vector>

#include "attn/kernels/runtime.hpp"
#include "attn/types.hpp"

namespace attn {

// Query rows per attention task in prefill: the causal mask lets row chunk c stop at key
// start_pos + (c+1)*kChunk, which skips most of the masked upper triangle.
inline constexpr std::int64_t kAttentionChunk = 64;

// Which keys a query sees. keep: [bsz, ld] by absolute position, 1 = real, 0 = padding; null
// when every position is real. A padded key's score becomes the lowest finite float before the
// softmax (as Hugging Face does): it gets weight exactly 0 unless every key the query sees is
// padded, and then the query attends uniformly to them, never NaN.
// window > 0 (Gemma's sliding layers): a key at position j is also hidden from the query at i
// when i - j >= window, its probability exactly 0. softcap > 0 (Gemma 2): each scaled score s
// becomes softcap * tanh(s / softcap) before any key is hidden.
struct AttentionMask {
  Mask kind = Mask::causal;
  const std::uint8_t* keep = nullptr;
  std::int64_t ld = 0;
  std::int64_t window = 0;
  float softcap = 0;
};

// Whether a head's chunk of `rows` query rows against `keys` keys runs on OpenBLAS sgemm (else
// on the own decode kernels, a row at a time: small products, where opening OpenBLAS costs more).
bool attention_on_blas(std::int64_t rows, std::int64_t keys, std::int64_t head_dim);

// Split attention (flash-decoding): a decode step, or a block of up to kSplitRows query rows, at
// kSplitFrom keys or more cuts each (sequence, KV head)'s keys into chunks of key_chunk(keys)
// keys, one pool item each, so that B = 1 with 8 KV heads still fills 16 threads and a long
// cache is read by all of them. Each chunk gives its query heads a partial softmax (max, sum of
// exps, exps x V), merged per head in chunk order. The chunk follows from the keys alone, never
// from the threads: the bits are the same for any thread count. Fewer keys: one item per
// (sequence, KV head), as before (no faster split there, docs/perf/long-context.md).
inline constexpr std::int64_t kSplitRows = 4;
inline constexpr std::int64_t kSplitFrom = 1024;
inline constexpr std::int64_t kKeyChunk = 256;     // the smallest chunk, doubled as keys grow
inline constexpr std::int64_t kMaxKeyChunks = 64;  // so that a row has at most this many
// Keys per chunk for `rows` query rows over `keys` keys; 0: no split.
std::int64_t key_chunk(std::int64_t rows, std::int64_t keys);

// Floats of attention's scratch: per-thread score rows [threads, kAttentionChunk, max_seq_len],
// then split attention's partials [max_batch, kSplitRows, chunks, n_heads, head_dim + 2] (none
// when max_seq_len < kSplitFrom). attention() must run with a Runtime of at most `threads`
// threads and at most max_batch sequences.
std::int64_t attention_scratch_floats(std::int64_t max_seq_len, int threads, std::int64_t max_batch,
                                      std::int64_t n_heads, std::int64_t head_dim);

// out[bsz, seqlen, n_heads*head_dim] = softmax(xq K^T / sqrt(head_dim) + mask) V, with xq
// [bsz, seqlen, n_heads*head_dim] and K, V one layer's cache filled up to start_pos + seqlen.
// out may be xq: each task reads its rows of one head's queries before it writes them.
// probs, if not null, receives the probabilities [bsz, n_heads, seqlen, start_pos + seqlen],
// masked entries 0.
void attention(const Runtime& rt, float* out, const float* xq, const KVView& cache,
               std::int64_t n_heads, std::int64_t bsz, std::int64_t seqlen, std::int64_t start_pos,
               float* scratch, const AttentionMask& mask = {}, float* probs = nullptr);

// out[bsz, seqlen, n_heads*head_dim] = probs V per head, for probabilities given whole (an
// observer's patched attn_probs): probs [bsz, n_heads, seqlen, start_pos + seqlen] over every
// key as given (no mask applied), V one layer's cache filled up to start_pos + seqlen, query
// head h reading KV head h / n_rep where it lies (no repeat_kv copy).
void mix_probs(const Runtime& rt, float* out, const float* probs, const KVView& cache,
               std::int64_t n_heads, std::int64_t bsz, std::int64_t seqlen, std::int64_t start_pos);

}  // namespace attn
