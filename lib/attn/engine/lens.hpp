#pragma once
// The logit lens: each block's output (the observer's resid_post) through the model's final
// RMSNorm and output head, on the raw weights (nothing folded), with the top k tokens of every
// position. It runs inside the one forward, between blocks, with the same norm and product as
// output_logits: the last block's lens is the model's logits bit for bit (at the same rows).
//
// Usage, as a recorder of the model (LensRecorder, the one wiring every front uses):
//   LensRecorder rec(m, /*k=*/5);                          // refuses a model without the head
//   Attached on(m, rec.observer());                        // resid_post at every block
//   forward(m, tokens, bsz, seqlen, start_pos, logits);
//   const TopLogit* t = lens_top(rec.lens(), layer, b, pos);  // k_used entries, best first
// or held by a recorder of one's own (the page), whose on_tensor calls rec.feed(o).
// After each forward call, lens.top holds that call's [n_layers, bsz, seqlen, k_used]; with
// keep_logits, lens.logits each layer's full logits [n_layers, bsz, seqlen, vocab_size].
// Layer numbers are the model's blocks (0 .. n_layers-1); the checkpoint's are
// args.first_layer + l.
#include <cstdint>
#include <vector>

#include "attn/model/model.hpp"
#include "attn/model/observer.hpp"

namespace attn {

// One of the k highest logits of a row.
struct TopLogit {
  std::int32_t id;
  float logit;
};

// k in [1, kLensMaxK]: more is a job for keep_logits (the dump).
inline constexpr int kLensMaxK = 100;

// The n highest of logits[vocab] into out[min(n, vocab)], highest first, ties: the lower id
// first (the trace's top_logits). No allocation; n at most kLensMaxK is cheap (one pass, an
// insertion into the n kept).
void top_logits(const float* logits, std::int64_t vocab, int n, TopLogit* out);

struct LogitLens {
  int k = 5;                  // top tokens asked for
  int k_used = 5;             // min(k, vocab_size): entries per position in `top`
  std::int64_t n_layers = 0;  // the model's blocks
  std::int64_t max_rows = 0;  // the most rows (bsz * seqlen) of one forward call
  std::int64_t vocab_size = 0;
  bool keep_logits = false;  // keep every layer's full logits (the dump), not one layer's
  // The last forward call fed: its shape, and which of its layers were fed (an observer with a
  // layer filter feeds some). calls counts the forward calls fed so far.
  std::int64_t bsz = 0, seqlen = 0, start_pos = 0, calls = 0;
  std::int64_t last_layer = -1;   // the last layer fed
  std::vector<std::uint8_t> fed;  // [n_layers]: nonzero = this call's layer l was fed
  // [n_layers, max_rows, k_used]: the call's rows are [n_layers, bsz, seqlen, k_used] (a layer's
  // block starts at l * max_rows * k_used).
  std::vector<TopLogit> top;
  // [max_rows, vocab_size] (one layer's, reused), or with keep_logits [n_layers, max_rows,
  // vocab_size]; a layer's block starts at l * max_rows * vocab_size.
  std::vector<float> logits;
};

// Refuses (InputError, setting "logit_lens") k outside [1, kLensMaxK] and a model without the
// output head (vocab_size <= 0, or a run whose ends have none: a slice of layers short of the
// last, or no token input), as a run plans before any work.
void check_logit_lens(const ModelArgs& a, const ModelEnds& ends, int k);

// The bytes make_logit_lens allocates for calls of up to max_rows rows (its tops and logits): what
// the memory pre-flight counts for it. 0 for a model without a vocabulary (refused later).
std::uint64_t logit_lens_bytes(const ModelArgs& a, std::int64_t max_rows, int k,
                               bool keep_logits = false);

// A lens for m's calls of up to m.act.plan.max_rows rows, every buffer allocated here once.
// Refuses what check_logit_lens refuses, and a model split over ranks.
LogitLens make_logit_lens(const Transformer& m, int k, bool keep_logits = false);

// Feeds one resid_post observation [bsz, seqlen, dim] of m's forward: its rows through m's
// final norm and head (in m.act.xb and m.act.pack, free between blocks), into the layer's
// logits and top. A layer at or below the last one fed starts a new call.
void feed_lens(LogitLens& lens, Transformer& m, const Observation& o);

// The lens as a recorder: its observer asks for resid_post at every block and feeds each to the
// lens; with copy_to, each block's logits of the call are copied into (*layers)[l] too, when it
// is the call's size (the run's dump keeps every call's). m must outlive it.
class LensRecorder {
 public:
  LensRecorder(Transformer& m, int k, bool keep_logits = false);
  LensRecorder(const LensRecorder&) = delete;  // its observer's function holds `this`
  LensRecorder& operator=(const LensRecorder&) = delete;

  void copy_to(std::vector<std::vector<float>>* layers) { copy_to_ = layers; }
  // What the observer does with a resid_post: for a recorder holding this one.
  void feed(const Observation& o);
  const LogitLens& lens() const { return lens_; }
  const Observer& observer() const { return observer_; }

 private:
  Transformer& m_;
  LogitLens lens_;
  std::vector<std::vector<float>>* copy_to_ = nullptr;
  Observer observer_;
};

// The last call's top tokens of layer l, batch row b, position t (0 .. seqlen-1): lens.k_used.
inline const TopLogit* lens_top(const LogitLens& lens, std::int64_t l, std::int64_t b,
                                std::int64_t t) {
  return lens.top.data() + (l * lens.max_rows + b * lens.seqlen + t) * lens.k_used;
}

// The last call's logits of layer l, [bsz, seqlen, vocab_size]; keep_logits only.
inline const float* lens_logits(const LogitLens& lens, std::int64_t l) {
  return lens.logits.data() + l * lens.max_rows * lens.vocab_size;
}

}  // namespace attn
