// attn-cli view's plan and recorder: what the page shows and may cost, checked before any work,
// and the observer that codes the shown probabilities into the page's cells as the forward
// reports them (the page itself: view_page.cpp).
#include "workloads/view.hpp"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string_view>

#include "attn/error.hpp"
#include "attn/io/text.hpp"
#include "flags.hpp"  // cli_flag_for

namespace cli {

using attn::InputError;

namespace {

constexpr double kMB = 1e6;
// One call's probabilities of one layer (every head of the batch) are held whole while the
// shown ones are coded: a prefill of P positions takes B x n_heads x P x P floats.
constexpr std::int64_t kScratchLimit = std::int64_t{1} << 31;

std::int64_t scratch_floats(const ViewShape& v) {
  const std::int64_t P = v.prefill, T = v.positions();
  return v.batch * v.n_heads * std::max(P * P, T);
}

// Megabytes (10^6 bytes), with the digits a small page needs.
std::string mb(double bytes) {
  char s[32];
  std::snprintf(s, sizeof s, bytes < 1e5 ? "%.3f" : "%.1f", bytes / kMB);
  return s;
}

// Every flag that cuts the page, in attn-cli's words.
std::string cut_flags() {
  return cli_flag_for("layers") + ", " + cli_flag_for("heads") + " or " + cli_flag_for("positions");
}

}  // namespace

std::int64_t ViewShape::block_cells(std::int64_t end) const {
  std::int64_t n = 0;
  for (std::int64_t t = row_begin; t < end; ++t) n += row_keys(t);
  return n;
}

std::int64_t ViewShape::cells() const {
  return std::int64_t(layers.size()) * std::int64_t(heads.size()) * block_cells(row_end);
}

std::pair<std::int64_t, std::int64_t> parse_view_range(const std::string& text, std::int64_t n,
                                                       const char* setting, const char* what) {
  if (text.empty()) return {0, n};
  std::int64_t a = 0, b = 0;
  const auto number = [](std::string_view part, std::int64_t& out) {
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    return ec == std::errc() && end == part.data() + part.size() && out >= 0;
  };
  const std::size_t colon = text.find(':');
  const std::string_view t = text;
  if (colon == std::string::npos || !number(t.substr(0, colon), a) ||
      !number(t.substr(colon + 1), b) || a >= b)
    throw InputError(std::string(setting) + ": expected A:B with 0 <= A < B (" + what +
                         " A to B-1), got " + attn::quoted(text, 60),
                     setting);
  if (b > n)
    throw InputError(std::string(setting) + " " + attn::quoted(text, 60) + ": there are " +
                         std::to_string(n) + " " + what + ", 0.." + std::to_string(n - 1),
                     setting);
  return {a, b};
}

ViewShape plan_view(const attn::ModelArgs& args, const attn::RunOptions& o, const ViewSettings& s) {
  ViewShape v;
  v.n_layers = args.n_layers;
  v.n_heads = args.n_heads;
  v.batch = o.batch;
  v.prefill = o.prefill;
  v.steps = o.steps;
  v.causal = args.mask == attn::Mask::causal;
  v.bits = s.bits;
  v.batch_row = s.batch_row;
  if (v.positions() < 1) throw InputError("view: no positions to show", "steps");
  if (s.batch_row < 0 || s.batch_row >= o.batch)
    throw InputError("batch row " + std::to_string(s.batch_row) +
                         " is out of range: the batch has " + std::to_string(o.batch) +
                         " sequence(s)",
                     "batch_row");
  const auto [l0, l1] = parse_view_range(s.layers, args.n_layers, "layers", "layers");
  const auto [h0, h1] = parse_view_range(s.heads, args.n_heads, "heads", "query heads");
  const auto [r0, r1] = parse_view_range(s.positions, v.positions(), "positions", "positions");
  for (std::int64_t l = l0; l < l1; ++l) v.layers.push_back(l);
  for (std::int64_t h = h0; h < h1; ++h) v.heads.push_back(h);
  v.row_begin = r0;
  v.row_end = r1;
  return v;
}

std::int64_t view_page_bound(const ViewShape& v, std::int64_t token_bytes, int lens_k) {
  const std::int64_t T = v.positions(), cells = v.cells() * v.bytes_per_cell();
  const auto L = std::int64_t(v.layers.size()), H = std::int64_t(v.heads.size());
  const std::int64_t text = 64 + 6 * token_bytes;  // {"id": ..., "text": "..."}, escaped
  std::int64_t meta = 16384 + T * (text + 24) +
                      L * H * std::int64_t(attn::kHeadStatNames.size()) * 28 + (L + H) * 24;
  meta += 4 * ((L * H * T * 4 + 2) / 3) + 64;  // value_norms: float32 in base64
  // Each lens entry [id, logit] and, once per id, its text.
  if (lens_k > 0) meta += v.n_layers * T * lens_k * (48 + text) + 4096;
  const std::int64_t deflated = std::int64_t(compressBound(uLong(cells)));
  return std::int64_t(kViewPage_size) + meta + 4 * ((deflated + 2) / 3) + 256;
}

std::string megabytes(double bytes) {
  return mb(bytes);
}

std::string view_estimate(const ViewShape& v, std::int64_t bound) {
  return "view: " + std::to_string(v.layers.size()) + " layers x " +
         std::to_string(v.heads.size()) + " heads x " + std::to_string(v.row_end - v.row_begin) +
         " positions: " + mb(double(v.cells() * v.bytes_per_cell())) +
         " MB of probabilities, page at most " + mb(double(bound)) + " MB";
}

void check_view_bound(const ViewShape& v, std::int64_t bound, double max_size_mb,
                      std::int64_t lens_vocab) {
  if (double(bound) > max_size_mb * kMB)
    throw InputError("view: the page could reach " + mb(double(bound)) + " MB (" +
                     std::to_string(v.cells()) + " cells of " + std::to_string(v.bits) +
                     " bits), over the bound of " + mb(max_size_mb * kMB) +
                     " MB: show fewer with " + cut_flags() + ", or raise " +
                     cli_flag_for("max_size"));
  // The lens's logits of one call: [B x P rows, vocab] floats (lens.hpp).
  const std::int64_t lens = v.batch * std::max<std::int64_t>(v.prefill, 1) * lens_vocab;
  const std::int64_t scratch = (scratch_floats(v) + lens) * std::int64_t(sizeof(float));
  if (scratch > kScratchLimit)
    throw InputError("view: one call's probabilities" +
                         std::string(lens ? " and lens logits" : "") + " take " +
                         mb(double(scratch)) +
                         " MB (batch x heads x prefill^2 floats), over 2 GiB: fewer prefill "
                         "positions",
                     "prefill");
}

std::vector<attn::MemoryPart> view_memory(const ViewShape& v, const attn::ModelArgs& a,
                                          int lens_k) {
  const std::string probs = "view probabilities";
  const std::int64_t rows = v.row_end - v.row_begin, T = v.positions();
  const std::int64_t shown = std::int64_t(v.layers.size() * v.heads.size());
  // As ViewRecorder's constructor sizes them: scratch_ [B, H, max(P * P, T)] floats (P * P < 2^48
  // after check_capacity), cells_, then the small ones: v_'s shown layers and heads, row_offset_,
  // layer_slot_, keep_ and the observer's layers, ids_, stats_, and probs_'s per-layer slots (a
  // buffer and its capacity: KeptProbabilities' constructor).
  const std::int64_t shown_lists = std::int64_t(v.layers.size() + v.heads.size());
  const auto kept_slot = std::int64_t(sizeof(float*) + sizeof(std::int64_t));
  const std::uint64_t parts[] = {
      attn::checked_product({v.batch, v.n_heads, std::max(v.prefill * v.prefill, T), 4}, probs),
      attn::checked_product({v.cells(), v.bytes_per_cell()}, probs),
      attn::checked_product({shown_lists + rows + 1 + v.n_layers, 8}, probs),
      std::uint64_t(T + v.n_layers),
      attn::checked_product({T, std::int64_t(sizeof(std::int32_t))}, probs),  // ids_
      attn::checked_product({shown, T, std::int64_t(sizeof(float))}, probs),  // vnorm_
      attn::checked_product({shown, std::int64_t(sizeof(attn::HeadStats))}, probs),
      attn::checked_product({v.n_layers, kept_slot}, probs)};
  std::uint64_t total = 0;
  for (const std::uint64_t p : parts)
    if (__builtin_add_overflow(total, p, &total))
      throw InputError("the " + probs + " would need more than 2^64 bytes", "prefill");
  std::vector<attn::MemoryPart> out = {{probs, total}};
  if (lens_k > 0) {
    const std::int64_t k_used = std::min<std::int64_t>(lens_k, a.vocab_size);
    const std::uint64_t lens =
        attn::logit_lens_bytes(a, v.batch * std::max<std::int64_t>(v.prefill, 1), lens_k);
    const std::uint64_t tops = attn::checked_product(
        {v.n_layers, T, k_used, std::int64_t(sizeof(attn::TopLogit))}, "logit lens");
    if (__builtin_add_overflow(lens, tops, &total))
      throw InputError("the logit lens would need more than 2^64 bytes", "logit_lens");
    out.push_back({"logit lens", total});
  }
  return out;
}

std::uint16_t code_cell(float p, int bits) {
  if (!(p > 0))
    return 0;  // NaN too: a run's probabilities are checked finite, but a cell is a cell
  const double x = std::min(double(p), 1.0);
  return bits == 8 ? std::uint16_t(std::lround(255.0 * std::sqrt(x)))
                   : std::uint16_t(std::lround(65535.0 * x));
}

ViewRecorder::ViewRecorder(const ViewShape& v) : v_(v), probs_(v.n_layers) {
  const std::int64_t rows = v.row_end - v.row_begin;
  row_offset_.assign(std::size_t(rows + 1), 0);
  for (std::int64_t r = 0; r < rows; ++r)
    row_offset_[std::size_t(r + 1)] = row_offset_[std::size_t(r)] + v.row_keys(v.row_begin + r);
  layer_slot_.assign(std::size_t(v.n_layers), -1);
  observer_.layers.assign(std::size_t(v.n_layers), 0);
  for (std::size_t i = 0; i < v.layers.size(); ++i) {
    layer_slot_[std::size_t(v.layers[i])] = std::int64_t(i);
    observer_.layers[std::size_t(v.layers[i])] = 1;
  }
  keep_.assign(std::size_t(v.positions()), 1);
  ids_.reserve(std::size_t(v.positions()));
  scratch_.resize(std::size_t(std::max<std::int64_t>(1, scratch_floats(v))));  // [B, H, rows, keys]
  for (const std::int64_t l : v.layers)
    probs_.set(l, scratch_.data(), std::int64_t(scratch_.size()));
  cells_.resize(std::size_t(v.cells() * v.bytes_per_cell()));  // [layers, heads, row cells]
  stats_.resize(v.layers.size() * v.heads.size());
  vnorm_.assign(v.layers.size() * v.heads.size() * std::size_t(v.positions()), 0.0f);
  observer_.sites = attn::site_bit(attn::Site::attn_probs) | attn::site_bit(attn::Site::v);
  observer_.probs = [this](std::int64_t layer, std::int64_t bsz, std::int64_t n_heads,
                           std::int64_t seqlen, std::int64_t keys) -> float* {
    if (layer < 0 || layer >= v_.n_layers || layer_slot_[std::size_t(layer)] < 0)
      return static_cast<float*>(nullptr);  // not shown (every layer reports when the lens is on)
    float* p = probs_.buffer(layer, bsz * n_heads * seqlen * keys);
    if (!p)
      throw std::logic_error("view: a call's probabilities outgrow the buffer sized for them");
    return p;
  };
  observer_.on_tensor = [this](const attn::Observation& o) {
    if (o.site == attn::Site::attn_probs) on_probs(o);
    if (o.site == attn::Site::v) on_values(o);
    if (o.site == attn::Site::resid_post && lens_) on_resid(o);
  };
}

void ViewRecorder::set_keep(std::vector<std::uint8_t> keep) {
  if (std::int64_t(keep.size()) != v_.positions())
    throw std::logic_error("view: a padding mask of another length");
  keep_ = std::move(keep);
}

void ViewRecorder::set_tokens(std::span<const std::int32_t> ids) {
  const auto n = std::min<std::size_t>(ids.size(), std::size_t(v_.positions()));
  ids_.assign(ids.begin(), ids.begin() + std::ptrdiff_t(n));  // within the constructor's reserve
}

void ViewRecorder::add_token(std::int32_t id) {
  if (std::int64_t(ids_.size()) < v_.positions()) ids_.push_back(id);
}

void ViewRecorder::record_lens(attn::Transformer& m, int k) {
  lens_.emplace(m, k);
  lens_tops_.assign(std::size_t(v_.n_layers * v_.positions() * lens_->lens().k_used), {0, 0.0f});
  observer_.layers.clear();  // every layer's resid_post; probabilities of the shown only
  observer_.sites |= attn::site_bit(attn::Site::resid_post);
}

// One layer's resid_post through the lens, the batch row's top tokens of each position kept.
void ViewRecorder::on_resid(const attn::Observation& o) {
  lens_->feed(o);
  const attn::LogitLens& lens = lens_->lens();
  const std::int64_t k = lens.k_used, T = v_.positions(), seqlen = o.shape[1];
  for (std::int64_t r = 0; r < seqlen && o.start_pos + r < T; ++r) {
    const attn::TopLogit* top = attn::lens_top(lens, o.layer, v_.batch_row, r);
    std::copy(top, top + k, lens_tops_.begin() + (o.layer * T + o.start_pos + r) * k);
  }
}

std::int64_t ViewRecorder::positions_seen() const {
  return std::min(rows_end_, v_.positions());
}

std::int64_t ViewRecorder::rows_end() const {
  return std::clamp(rows_end_, v_.row_begin, v_.row_end);
}

const std::uint8_t* ViewRecorder::block(std::size_t i, std::size_t k) const {
  const std::size_t b = i * v_.heads.size() + k;
  return cells_.data() + b * std::size_t(row_offset_.back() * v_.bytes_per_cell());
}

// ||v_j|| of each position of the batch row, per shown query head (its KV head's value vector).
void ViewRecorder::on_values(const attn::Observation& o) {
  const std::int64_t slot =
      o.layer >= 0 && o.layer < v_.n_layers ? layer_slot_[std::size_t(o.layer)] : -1;
  if (slot < 0) return;
  const std::int64_t seqlen = o.shape[1], kv = o.shape[2], hd = o.shape[3], T = v_.positions();
  const std::int64_t n_rep = std::max<std::int64_t>(1, v_.n_heads / std::max<std::int64_t>(1, kv));
  for (std::int64_t r = 0; r < seqlen && o.start_pos + r < T; ++r)
    for (std::size_t k = 0; k < v_.heads.size(); ++k) {
      const float* x = o.data + ((v_.batch_row * seqlen + r) * kv + v_.heads[k] / n_rep) * hd;
      double ss = 0;
      for (std::int64_t i = 0; i < hd; ++i) ss += double(x[i]) * double(x[i]);
      vnorm_[(std::size_t(slot) * v_.heads.size() + k) * std::size_t(T) +
             std::size_t(o.start_pos + r)] = float(std::sqrt(ss));
    }
}

void ViewRecorder::on_probs(const attn::Observation& o) {
  const std::int64_t slot =
      o.layer >= 0 && o.layer < v_.n_layers ? layer_slot_[std::size_t(o.layer)] : -1;
  if (slot < 0) return;
  const std::int64_t H = o.shape[1], seqlen = o.shape[2], keys = o.shape[3];
  const std::int64_t block_cells = row_offset_.back(), nb = v_.bytes_per_cell();
  for (std::int64_t r = 0; r < seqlen; ++r) {
    const std::int64_t t = o.start_pos + r;
    if (t < v_.row_begin || t >= v_.row_end) continue;
    const std::int64_t n = std::min(v_.row_keys(t), keys);
    for (std::size_t k = 0; k < v_.heads.size(); ++k) {
      const float* p = o.data + ((v_.batch_row * H + v_.heads[k]) * seqlen + r) * keys;
      const std::size_t b = std::size_t(slot) * v_.heads.size() + k;
      std::uint8_t* dst =
          cells_.data() +
          std::size_t((std::int64_t(b) * block_cells + row_offset_[std::size_t(t - v_.row_begin)]) *
                      nb);
      for (std::int64_t j = 0; j < n; ++j) {
        const std::uint16_t c = code_cell(p[j], v_.bits);
        if (nb == 1) {
          dst[j] = std::uint8_t(c);
        } else {
          dst[2 * j] = std::uint8_t(c & 0xff);  // little-endian
          dst[2 * j + 1] = std::uint8_t(c >> 8);
        }
      }
      if (keep_[std::size_t(t)]) attn::add_row(stats_[b], {p, std::size_t(n)}, t, ids_);
    }
  }
  rows_end_ = std::max(rows_end_, o.start_pos + seqlen);
}

}  // namespace cli
