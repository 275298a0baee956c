#pragma once
// Trace events with the shapes the notebooks print, and the two printers: lines for people,
// JSON Lines for scripts.
#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attn/engine/lens.hpp"
#include "attn/engine/run.hpp"      // Event
#include "attn/io/safetensors.hpp"  // shape_text
#include "attn/model/config.hpp"
#include "attn/text/tokenizer.hpp"

namespace cli {

struct Summary {
  std::int64_t prefill_positions = 0;
  double prefill_ms = 0;
  std::int64_t decode_steps = 0;
  double decode_ms_median = 0;
  double decode_ms_total = 0;
  int threads = 0;
  std::string blas_core;
};

// Text: `decode_only` prints the notebook's per-step cache line and nothing else per step.
void print_config_text(std::ostream& os, const attn::ModelArgs& a);
void print_event_text(std::ostream& os, const attn::Event& e, bool decode_only);
void print_summary_text(std::ostream& os, const Summary& s);

// The n highest logits of logits[vocab] as [{"id", "logit"}], highest first (ties: lower id).
nlohmann::json top_logits(const float* logits, std::int64_t vocab, int n);

void print_config_json(std::ostream& os, const attn::ModelArgs& a);
void print_event_json(std::ostream& os, const attn::Event& e);
void print_summary_json(std::ostream& os, const Summary& s);

// The event's attention probabilities as notebook 001 prints attention_weights: per layer, batch
// row and head, one line of 4-decimal numbers per query.
void print_attention(std::ostream& os, const attn::ModelArgs& a, const attn::Event& e);
// The same as JSON Lines (--json): one "attention_weights" event per layer, batch row and head.
void print_attention_json(std::ostream& os, const attn::ModelArgs& a, const attn::Event& e);

// The logit lens of one forward call (lens.hpp), `of` "prefill" or "decode" (step: the decode
// step, 1-based), layers numbered as the checkpoint's (first_layer + l). JSON: one "lens" event
// per layer, `top` [batch row][position][{"id", "logit"}] as top_logits. Text: one line per
// layer and batch row, each position's top token (its text with a tokenizer, else its id).
void print_lens_json(std::ostream& os, const attn::LogitLens& lens, const char* of,
                     std::int64_t step, std::int64_t first_layer);
void print_lens_text(std::ostream& os, const attn::LogitLens& lens, const char* of,
                     std::int64_t step, std::int64_t first_layer, const attn::Tokenizer* tok);

// --print-attention prints at most this many probabilities (about 8 MB of text): more is a job
// for --attention-weights and the dump.
constexpr double kPrintAttentionLimit = double(1 << 20);

}  // namespace cli
