#pragma once
// The model: config, weights, KV cache and preallocated activations, and the one forward pass
// for prefill and decode, as Meta's Transformer.forward(x, start_pos).
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "attn/kernels/attention.hpp"
#include "attn/kernels/matmul.hpp"
#include "attn/kernels/ops.hpp"
#include "attn/kernels/runtime.hpp"
#include "attn/model/buffers.hpp"
#include "attn/model/cache.hpp"
#include "attn/model/config.hpp"
#include "attn/model/observer.hpp"
#include "attn/model/parallel.hpp"
#include "attn/model/weights.hpp"

namespace attn {

// The activations and scratch of forward calls of up to plan.max_rows = bsz * seqlen rows,
// allocated once from the plan.
struct Activations {
  BufferPlan plan;
  // Rows per pass of the FFN (at most kFfnRows, which sizes h1 and h3; tests set fewer).
  std::int64_t ffn_rows = kFfnRows;

  std::vector<float> xb;               // [rows, dim]: the normed input of attention or FFN
  std::vector<float> work;             // xq, xk, xv or h1, h3 (BufferPlan::work)
  float* xq() { return work.data(); }  // [rows, n_heads * head_dim], then the output
  float* xk() { return work.data() + plan.xk_at; }  // [rows, n_kv_heads * head_dim]
  float* xv() { return work.data() + plan.xv_at; }  // [rows, n_kv_heads * head_dim]
  float* h1() { return work.data(); }               // [pass rows, ffn_hidden]: w1 x, then the gate
  float* h3() { return work.data() + plan.h3_at; }  // [pass rows, ffn_hidden]: w3 x
  FloatBuffer scores;          // per-thread attention scores: [rt.threads, chunk, max_seq_len]
  std::vector<float> pack;     // linear()'s scratch: packed x, or prefill's weight panels
  std::vector<float> partial;  // [rows, dim]: this rank's share of wo or w2, before the allreduce
  // A token run (ends.tokens_in or logits_out): the embedded input and the blocks' output.
  std::vector<float> hidden_in, hidden_out;  // [rows, dim] each
  // [max_rows, dim]: mlp_out summed apart from the residual, for an observer that asks for it;
  // sized by observe(), outside the plan (empty unless asked).
  std::vector<float> observed;
  // The sites computed apart only when observed (observer.hpp: attn_scores, result, mlp_pre and
  // mlp_post, the norms' scales): grown by a call that asks for them, never by one that does not.
  std::vector<float> hooked;
};

struct Transformer {
  ModelArgs args;  // the whole model
  ModelEnds ends;  // the token model's ends it was built with: its weights' (weights.ends)
  TransformerWeights weights;
  KVCache cache;
  RopeTable rope;
  RopeTable rope_swa;  // the sliding layers' (args.sliding_layers; empty table without)
  Activations act;
  AttentionMask mask;  // kind from args.mask; keep: a padded batch's attention_mask
  // What forward reports of its insides (observer.hpp): the observers attached, in order
  // (attach/detach, or observe() for one), and the one forward reports to: the one attached, or
  // their merge (merge_observers, held here), or null.
  std::vector<const Observer*> observers;
  std::shared_ptr<const Observer> merged;
  const Observer* observer = nullptr;
  Runtime rt;  // fixed at make_transformer: the scratch above is sized from it
  // Model parallel: this rank, and the part of the model it computes (local_args: its heads,
  // KV heads and FFN rows; the weights and cache hold only those). Without a shard, local = args.
  Shard shard;
  ModelArgs local;
  double allreduce_seconds = 0;  // spent in the allreduces so far
  // A control vector (engine/control_vector.hpp): [n_layers, dim], row l added to the residual
  // stream after block l, as llama.cpp's llama_adapter_cvec; empty: none.
  std::vector<float> steering = {};
  // Set by another thread to stop a forward call between blocks (it throws Interrupted).
  const std::atomic<bool>* cancel = nullptr;
};

// max_rows: the most rows (bsz * seqlen) one forward call will be given. The model keeps rt:
// every forward runs with its threads, kernels and scratch. The weights must be loaded or drawn
// for the same shard, and hold the token model's ends the model will have (weights.ends).
Transformer make_transformer(const ModelArgs& args, TransformerWeights weights,
                             std::int64_t max_rows, const Runtime& rt = make_runtime(1),
                             const Shard& shard = {});

// Makes `observer` the only one attached (null: none) and sizes the buffer its sites need
// (mlp_out's), so that forward allocates nothing. The observer must outlive its use by forward.
void observe(Transformer& m, const Observer* observer);

// Adds an observer after those attached (a session's recorders: each sees what it asks for, as if
// alone), or takes one away; the buffers are sized for what they ask for together. It must stay
// alive while attached.
void attach(Transformer& m, const Observer& observer);
void detach(Transformer& m, const Observer& observer);

// Attached for a scope: detached however the scope ends.
class Attached {
 public:
  Attached(Transformer& m, const Observer& o) : m_(m), o_(o) { attach(m, o); }
  Attached(const Attached&) = delete;
  Attached& operator=(const Attached&) = delete;
  ~Attached() { detach(m_, o_); }

 private:
  Transformer& m_;
  const Observer& o_;
};

// out[bsz, seqlen, dim] = the n_layers blocks applied to x[bsz, seqlen, dim] at positions
// start_pos .. start_pos+seqlen-1, reading and extending the KV cache, reporting to m.observer
// what it asks for. No allocation.
void forward(Transformer& m, const float* x, std::int64_t bsz, std::int64_t seqlen,
             std::int64_t start_pos, float* out);

// Meta's Transformer.forward(tokens, start_pos): tokens[bsz, seqlen] embedded (ends.tokens_in),
// the blocks as above, then (ends.logits_out) norm and output: out = logits [bsz, 1, vocab_size]
// of each sequence's last position, or [bsz, seqlen, vocab_size] with all_positions. Without
// logits_out (a --layers slice short of the last layer) out is the hidden state [bsz, seqlen,
// dim]. With logits_out, m.observer may ask for final_norm: norm(h) of every position. Throws
// InputError for a token outside [0, vocab_size). No allocation.
void forward(Transformer& m, const std::int32_t* tokens, std::int64_t bsz, std::int64_t seqlen,
             std::int64_t start_pos, float* out, bool all_positions = false);

// Refuses (InputError naming `what`, the index and the vocabulary) an id outside
// [0, vocab_size); vocab_size <= 0 checks only that ids are not negative.
void check_token_ids(std::span<const std::int32_t> ids, std::int64_t vocab_size,
                     const std::string& what);

// h[rows, dim]: row r is tokens[r]'s embedding, widened from BF16 or F16 (exact). Throws
// InputError for a token outside [0, vocab_size).
void embed(const Transformer& m, const std::int32_t* tokens, std::int64_t rows, float* h);

// logits[rows, vocab_size] = output(norm(h)) for h[rows, dim]: the head alone.
void output_logits(Transformer& m, const float* h, std::int64_t rows, float* logits);

}  // namespace attn
