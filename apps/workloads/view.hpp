#pragma once
// `attn-cli view`'s page: the attention of every shown layer x head of one batch row, recorded
// from the forward's observer as a run makes it (prefill, then each decode step), coded as 8- or
// 16-bit cells, deflated (raw, zlib windowBits -15, for the page's DecompressionStream) and
// base64'd into one self-contained HTML file with its META (docs/contract.md §3, "view").
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "attn/engine/head_stats.hpp"
#include "attn/engine/lens.hpp"
#include "attn/io/output.hpp"
#include "attn/model/config.hpp"
#include "attn/model/input.hpp"
#include "attn/model/kept_probabilities.hpp"
#include "attn/model/memory.hpp"
#include "attn/model/observer.hpp"
#include "attn/text/tokenizer.hpp"

namespace cli {

// The template's bytes (apps/view_page/: the skeleton with its CSS and JS inlined, embedded at
// build time).
extern const unsigned char kViewPage[];
extern const std::size_t kViewPage_size;
inline constexpr const char* kViewMarker = "<!--ATTN-DATA-->";

// What the flags ask the page to show: ranges as "A:B" (empty: all), the batch row, the code.
struct ViewSettings {
  std::string layers, heads, positions;
  std::int64_t batch_row = 0;
  int bits = 8;           // 8: sqrt code, 16: linear
  double max_size = 256;  // MB (10^6 bytes) the page may reach at most
};

// What the page holds, fixed before the run: the model's shape, the shown layers, heads and
// query rows [row_begin, row_end) of batch row `batch_row`, and each row's cells.
struct ViewShape {
  std::int64_t n_layers = 0, n_heads = 0;
  std::int64_t batch = 1, prefill = 0, steps = 0;  // T = prefill + steps positions
  bool causal = true;
  std::vector<std::int64_t> layers, heads;  // model layer and query head indices shown
  std::int64_t row_begin = 0, row_end = 0;
  std::int64_t batch_row = 0;
  int bits = 8;

  std::int64_t positions() const { return prefill + steps; }
  // Keys row t holds: causal t+1; no mask, a prefill row all P, a decode row t+1.
  std::int64_t row_keys(std::int64_t t) const { return !causal && t < prefill ? prefill : t + 1; }
  // Cells of the shown rows [row_begin, end) of one layer x head.
  std::int64_t block_cells(std::int64_t end) const;
  std::int64_t cells() const;  // every shown layer x head x shown row
  std::int64_t bytes_per_cell() const { return bits / 8; }
};

// "A:B" -> [A, B) within [0, n): InputError naming `setting` (layers, heads, positions) when it
// is not two numbers A < B <= n. Empty: [0, n).
std::pair<std::int64_t, std::int64_t> parse_view_range(const std::string& text, std::int64_t n,
                                                       const char* setting, const char* what);

// The shape of a run of args over B x (P + N) positions as `s` cuts it; InputError naming the
// setting for a range or batch row out of range.
ViewShape plan_view(const attn::ModelArgs& args, const attn::RunOptions& o, const ViewSettings& s);

// The page's size at most, in bytes: the template, META (per position `token_bytes` bytes of
// text at most, each escaped to 6; with a lens, lens_k tokens per layer and position), and the
// cells deflated at worst and in base64.
std::int64_t view_page_bound(const ViewShape& v, std::int64_t token_bytes, int lens_k = 0);

// "view: L layers x H heads x T positions: N MB of probabilities, page at most M MB", and
// InputError past max_size naming layers, heads and positions; also past the recording's
// one-call buffer of 2 GiB (a prefill's probabilities of one layer, every head).
std::string view_estimate(const ViewShape& v, std::int64_t bound);
std::string megabytes(double bytes);  // "12.3", "0.004": MB of 10^6 bytes
// lens_vocab: the lens's vocabulary (its one-call logits), 0 without a lens.
void check_view_bound(const ViewShape& v, std::int64_t bound, double max_size_mb,
                      std::int64_t lens_vocab = 0);

// What viewing v allocates: the recorder's buffers (ViewRecorder: the one-call probabilities, the
// coded cells, the figures) and, with lens_k > 0, the lens (record_lens: make_logit_lens's
// buffers for calls of up to batch x max(prefill, 1) rows, and the tops kept): the parts the
// memory pre-flight adds (SessionShape::front, RunRequest::front_parts).
std::vector<attn::MemoryPart> view_memory(const ViewShape& v, const attn::ModelArgs& a, int lens_k);

// Records the shown probabilities as the forward reports them (observer: set it on the model
// with attn::observe), coded at once, and the per-head figures of the real query rows in
// float64. Everything is sized at construction: a step allocates nothing.
class ViewRecorder {
 public:
  explicit ViewRecorder(const ViewShape& v);
  ViewRecorder(const ViewRecorder&) = delete;
  ViewRecorder& operator=(const ViewRecorder&) = delete;

  // [T]: batch row's padding mask (1: a real position); default all real. Set before the run.
  void set_keep(std::vector<std::uint8_t> keep);
  // The batch row's tokens so far (the prompt; at most T), for the token-based figures
  // (duplicate_token_head, induction_head): without them those are null. add_token appends a
  // chosen one before it is fed, within the room reserved here (no allocation in a step).
  void set_tokens(std::span<const std::int32_t> ids);
  void add_token(std::int32_t id);
  // The logit lens of m (lens.hpp) at every layer, its top k of the batch row kept for every
  // position; m must outlive the recording. Refuses a model without the head (InputError).
  void record_lens(attn::Transformer& m, int k);
  // [n_layers, T, k_used] of the recorded positions; empty without a lens.
  const attn::LogitLens* lens() const { return lens_ ? &lens_->lens() : nullptr; }
  const std::vector<attn::TopLogit>& lens_tops() const { return lens_tops_; }

  const attn::Observer& observer() const { return observer_; }
  const ViewShape& shape() const { return v_; }
  const std::vector<std::uint8_t>& keep() const { return keep_; }
  // Rows recorded so far: the shown rows run [row_begin, rows_end()); positions the run made
  // (fewer than planned when generation stopped at an end-of-sequence token).
  std::int64_t rows_end() const;
  std::int64_t positions_seen() const;
  // [shown layer][shown head], over the shown real rows recorded.
  const std::vector<attn::HeadStats>& stats() const { return stats_; }
  // [shown layer][shown head][T]: ||v_t||, the L2 norm of position t's value vector (of the
  // head's KV head), for the page's value-weighted attention.
  const std::vector<float>& value_norms() const { return vnorm_; }
  // The coded cells of layer x head block (i, k), rows [row_begin, row_end) in full.
  const std::uint8_t* block(std::size_t i, std::size_t k) const;

 private:
  void on_probs(const attn::Observation& o);
  void on_resid(const attn::Observation& o);
  void on_values(const attn::Observation& o);

  ViewShape v_;
  std::vector<std::int64_t> row_offset_;  // [rows + 1]: cells before row row_begin + r
  std::vector<std::int64_t> layer_slot_;  // [n_layers]: shown index, or -1
  std::vector<std::uint8_t> keep_;
  std::vector<std::int32_t> ids_;    // capacity T
  std::vector<float> scratch_;       // the largest call's [bsz, n_heads, seqlen, keys]
  attn::KeptProbabilities probs_;    // the shown layers' into scratch_, each coded as it comes
  std::vector<std::uint8_t> cells_;  // [layers, heads, cells of the rows] coded
  std::vector<attn::HeadStats> stats_;
  std::vector<float> vnorm_;  // [shown layers, shown heads, T]
  std::optional<attn::LensRecorder> lens_;
  std::vector<attn::TopLogit> lens_tops_;  // [n_layers, T, k_used]
  std::int64_t rows_end_ = 0;
  attn::Observer observer_;
};

// One cell's code: bits 8, round(255 sqrt p); bits 16, round(65535 p) (clamped to the range).
std::uint16_t code_cell(float p, int bits);

// The per-head figures as JSON: {"names": [...], "values": [[[e, f, p, d], ...], ...]} (NaN:
// null).
nlohmann::json view_stats_json(const ViewRecorder& r);

// META's value_norms: {"layout": "layer, head, position", "float32": base64 of the recorded
// positions' norms, little-endian}.
nlohmann::json value_norms_json(const ViewRecorder& r);

// META's parts the run does not decide: format, title, the model, what is shown, row_keys and
// keep of the recorded positions, the figures, the lens (texts from `tok`, or ids),
// generated_by. The caller adds tokens and chosen.
nlohmann::json view_meta(const attn::ModelArgs& a, const ViewRecorder& r, const std::string& title,
                         const attn::Tokenizer* tok);

// META, dumped so that it can sit in a <script>: invalid UTF-8 replaced, every '<' as \u003c
// (neither "</script" nor "<!--" can appear), U+2028 and U+2029 as escapes.
std::string script_json(const nlohmann::json& meta);

// Raw deflate (no zlib header; windowBits -15) and base64 (RFC 4648, padded).
std::string base64(const std::string& bytes);

// The page: the template with its marker replaced by the META and PROBS script elements, the
// recorded rows [row_begin, rows_end()) of every shown block deflated; staged beside `path`,
// uncommitted (attn/io/output.hpp). `meta` gets "cells", "rows" and "encoding" here.
// With `other` (view --compare: the corrupted run, of r's shape and rows), its cells follow in a
// third element, attn-probs-corrupted, coded and laid out as r's.
attn::OutputFile stage_view_page(const std::filesystem::path& path, nlohmann::json meta,
                                 const ViewRecorder& r, const ViewRecorder* other = nullptr);

}  // namespace cli
