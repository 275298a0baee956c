#include "workloads/heatmap.hpp"

#include <stb_image_write.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include "attn/error.hpp"
#include "attn/io/text.hpp"
#include "workloads/font.hpp"
#include "workloads/label_font.hpp"

namespace cli {

using attn::escape;
using attn::InputError;
using attn::Mask;
using attn::ModelArgs;
using attn::OutputFile;
using attn::quoted;
using attn::RunOptions;
using attn::RunOutputs;

namespace {

constexpr int kMargin = 16, kText = 2;  // text scale: 5x7 glyphs drawn as 10x14
constexpr int kAdvance = (kGlyphWidth + 1) * kText, kLine = kGlyphHeight * kText;
constexpr int kLabel = kLine + 6;            // a panel's label above it
constexpr int kTitle = 2 * (kLine + 8) + 8;  // two title lines
constexpr int kTitleChars = 64;
constexpr int kBar = 16;  // colour scale width

using Rgb = std::array<std::uint8_t, 3>;

// viridis at 0, 1/4, 1/2, 3/4, 1, interpolated linearly.
Rgb colour(float v) {
  static constexpr Rgb stops[] = {
      {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  const float t = std::clamp(v, 0.0f, 1.0f) * 4;
  const int i = std::min(int(t), 3);
  const float f = t - float(i);
  Rgb c;
  for (int k = 0; k < 3; ++k)
    c[std::size_t(k)] = std::uint8_t(float(stops[i][std::size_t(k)]) * (1 - f) +
                                     float(stops[i + 1][std::size_t(k)]) * f + 0.5f);
  return c;
}

void fill(Image& img, int x0, int y0, int w, int h, Rgb c) {
  for (int y = std::max(y0, 0); y < std::min(y0 + h, img.height); ++y)
    for (int x = std::max(x0, 0); x < std::min(x0 + w, img.width); ++x)
      std::copy(c.begin(), c.end(),
                img.rgb.begin() + (std::size_t(y) * std::size_t(img.width) + std::size_t(x)) * 3);
}

void text(Image& img, int x, int y, const std::string& s) {
  for (char ch : s) {
    if (const std::uint8_t* g = glyph(ch))
      for (int r = 0; r < kGlyphHeight; ++r)
        for (int c = 0; c < kGlyphWidth; ++c)
          if (g[r] >> (kGlyphWidth - 1 - c) & 1)
            fill(img, x + c * kText, y + r * kText, kText, kText, {0, 0, 0});
    x += kAdvance;
  }
}

int text_width(const std::string& s) {
  return int(s.size()) * kAdvance;
}

std::string head_label(const ModelArgs& a, std::int64_t h) {
  return "HEAD " + std::to_string(h) + " KV " + std::to_string(h / a.n_rep());
}

// Probability of query row r (prefill rows, then decode steps) for key j of head h, batch row b;
// negative where the row does not score that key.
float probability(const RunOptions& o, const RunOutputs& out, std::size_t layer, std::int64_t H,
                  std::int64_t b, std::int64_t h, std::int64_t r, std::int64_t j) {
  const std::int64_t P = o.prefill;
  if (r < P)
    return j < P ? out.attn_prefill[layer][std::size_t(((b * H + h) * P + r) * P + j)] : -1;
  const std::int64_t i = r - P + 1, keys = P + i;
  return j < keys ? out.attn_decode[std::size_t(i - 1)][layer][std::size_t((b * H + h) * keys + j)]
                  : -1;
}

float scaled(float p, HeatmapScale s) {
  if (s == HeatmapScale::sqrt) return std::sqrt(p);
  if (s == HeatmapScale::log) return (std::log10(std::max(p, 1e-4f)) + 4) / 4;
  return p;
}

const char* scale_name(HeatmapScale s) {
  return s == HeatmapScale::linear ? "LINEAR" : s == HeatmapScale::sqrt ? "SQRT" : "LOG";
}

constexpr Rgb kCausal = {228, 228, 228}, kPadded = {250, 200, 200};
constexpr int kMaxLabel = 90;  // pixels: longer token texts are cut

// The labels' pixel height for cells of `cell` pixels, and every how many positions one is
// drawn so that they do not overlap.
int label_px(int cell) {
  return std::clamp(cell - 2, 9, 12);
}
std::int64_t label_every(int cell) {
  return (label_px(cell) + 1 + cell - 1) / cell;
}

// Pixels of s at a height of px: the TrueType font's, or the bitmap font's.
int text_px(const LabelFont* f, const std::string& s, int px) {
  return f ? label_width(*f, s, px) : int(s.size()) * (kGlyphWidth + 1);
}

// s escaped, cut to at most kMaxLabel pixels (with "..."), as the axes show it.
std::string fit_label(const LabelFont* f, const std::string& s, int px) {
  std::string t = escape(s, 40);
  while (t.size() > 1 && text_px(f, t, px) > kMaxLabel) {
    t.pop_back();
    while (!t.empty() && (static_cast<unsigned char>(t.back()) & 0xC0) == 0x80) t.pop_back();
    if (text_px(f, t + "...", px) <= kMaxLabel) return t + "...";
  }
  return t;
}

struct Label {
  std::string text;  // as drawn
  int width;         // pixels
};

// Every position's label fitted once for cells of `cell` pixels.
std::vector<Label> fitted_labels(const HeatmapOptions& o, int cell) {
  const LabelFont* f = label_font();
  const int px = label_px(cell);
  std::vector<Label> out;
  for (const std::string& l : o.labels) {
    std::string t = fit_label(f, l, px);
    const int w = text_px(f, t, px);
    out.push_back({std::move(t), w});
  }
  return out;
}

// The room beside and below each panel: the widest label.
int labels_room(const std::vector<Label>& labels) {
  int w = 0;
  for (const Label& l : labels) w = std::max(w, l.width);
  return labels.empty() ? 0 : w + 6;
}

void draw_axis_label(Image& img, const std::string& t, int x, int y, int px, bool vertical) {
  if (const LabelFont* f = label_font()) {
    draw_label(img, *f, x, y, t, px, vertical);
    return;
  }
  std::string upper;  // the bitmap font's capitals
  for (const char c : t) upper += char(std::toupper(static_cast<unsigned char>(c)));
  text(img, x, vertical ? y - kGlyphHeight : y, upper);
}

// Token labels: queries down the left of the panel, keys below it (read bottom to top).
void draw_labels(Image& img, const HeatmapLayout& l, const std::vector<Label>& labels, int x0,
                 int y0, std::int64_t T) {
  const int px = label_px(l.cell);
  const std::int64_t every = label_every(l.cell);
  for (std::int64_t t = 0; t < T && t < std::int64_t(labels.size()); t += every) {
    const int centre = int(t) * l.cell + l.cell / 2;
    const Label& s = labels[std::size_t(t)];
    draw_axis_label(img, s.text, x0 - 4 - s.width, y0 + centre - px / 2 - 1, px, false);
    draw_axis_label(img, s.text, x0 + centre - px / 2, y0 + l.panel + l.label_room, px, true);
  }
  // A tick at every position up to 64, past that at the labelled ones.
  for (std::int64_t t = 0; t < T; t += T <= 64 ? 1 : every) {
    const int centre = int(t) * l.cell + l.cell / 2;
    fill(img, x0 - 3, y0 + centre, 2, 1, {0, 0, 0});
    fill(img, x0 + centre, y0 + l.panel + 1, 1, 2, {0, 0, 0});
  }
}

}  // namespace

HeatmapScale default_scale(std::int64_t positions) {
  return positions <= 16   ? HeatmapScale::linear
         : positions <= 64 ? HeatmapScale::sqrt
                           : HeatmapScale::log;
}

HeatmapScale parse_scale(const std::string& name) {
  if (name == "linear") return HeatmapScale::linear;
  if (name == "sqrt") return HeatmapScale::sqrt;
  if (name == "log") return HeatmapScale::log;
  throw InputError("--scale: expected linear, sqrt or log, got " + quoted(name, 40));
}

HeatmapLayout heatmap_layout(const ModelArgs& a, std::int64_t positions, const HeatmapOptions& o) {
  HeatmapLayout l;
  const int T = int(std::max<std::int64_t>(positions, 1));
  l.cell = std::clamp(256 / T, 1, 24);  // at most kHeatmapPositions positions: <= 512 px
  l.panel = T * l.cell;
  // Token labels left of and below each panel.
  const int room = l.label_room = labels_room(fitted_labels(o, l.cell));
  // GQA: one row of panels per KV head, so the heads that share it sit side by side.
  const std::int64_t n_rep = a.n_rep();
  l.columns = int(n_rep > 1 && n_rep <= 8 ? n_rep : std::min<std::int64_t>(a.n_heads, 4));
  const int pitch_x = room + std::max(l.panel, text_width(head_label(a, a.n_heads - 1))) + kMargin;
  const int pitch_y = kLabel + l.panel + room + kMargin;
  const int rows = int((a.n_heads + l.columns - 1) / l.columns);
  const int top = kMargin + kTitle;
  for (std::int64_t h = 0; h < a.n_heads; ++h) {
    l.panel_x.push_back(kMargin + room + int(h % l.columns) * pitch_x);
    l.panel_y.push_back(top + kLabel + int(h / l.columns) * pitch_y);
  }
  const int grid_w = l.columns * pitch_x + kBar + 3 * kAdvance;
  l.width = kMargin + std::max(grid_w, kTitleChars * kAdvance) + kMargin;
  l.height = top + rows * pitch_y + kMargin;
  return l;
}

Image render_heatmap(const ModelArgs& a, const RunOptions& o, const RunOutputs& out,
                     std::int64_t layer, const HeatmapOptions& opts) {
  const std::int64_t T = o.prefill + o.steps;
  const HeatmapLayout l = heatmap_layout(a, T, opts);
  const std::vector<Label> labels = fitted_labels(opts, l.cell);
  Image img{l.width, l.height,
            std::vector<std::uint8_t>(std::size_t(l.width) * std::size_t(l.height) * 3, 255)};
  const std::string title = "LAYER " + std::to_string(opts.first_layer + layer) + "  MASK " +
                            (a.mask == Mask::causal ? "CAUSAL" : "NONE") + "  BATCH ROW " +
                            std::to_string(opts.batch_row) + "  " + scale_name(opts.scale);
  const std::string sub = "QUERIES DOWN: PREFILL " + std::to_string(o.prefill) + ", THEN " +
                          std::to_string(o.steps) + " DECODE STEPS. KEYS ACROSS.";
  text(img, kMargin, kMargin, title.substr(0, kTitleChars));
  text(img, kMargin, kMargin + kLine + 8, sub.substr(0, kTitleChars));
  const auto L = std::size_t(layer);
  for (std::int64_t h = 0; h < a.n_heads; ++h) {
    const int x0 = l.panel_x[std::size_t(h)], y0 = l.panel_y[std::size_t(h)];
    text(img, x0, y0 - kLabel, head_label(a, h));
    for (std::int64_t r = 0; r < T; ++r)
      for (std::int64_t j = 0; j < T; ++j) {
        const float p = probability(o, out, L, a.n_heads, opts.batch_row, h, r, j);
        const bool padded =
            !opts.keep.empty() && (!opts.keep[std::size_t(j)] || !opts.keep[std::size_t(r)]);
        const bool hidden = p < 0 || (a.mask == Mask::causal && j > r);
        fill(img, x0 + int(j) * l.cell, y0 + int(r) * l.cell, l.cell, l.cell,
             padded   ? kPadded
             : hidden ? kCausal
                      : colour(scaled(p, opts.scale)));
      }
    if (!labels.empty()) draw_labels(img, l, labels, x0, y0, T);
  }
  // The colour scale beside the first row of panels: 1 at the top, 0 at the bottom.
  const int bx = l.panel_x[std::size_t(l.columns - 1)] +
                 std::max(l.panel, text_width(head_label(a, a.n_heads - 1))) + kMargin / 2;
  const int by = l.panel_y[0], bh = std::max(l.panel, 2 * kLine);
  for (int y = 0; y < bh; ++y)
    fill(img, bx, by + y, kBar, 1, colour(1.0f - float(y) / float(bh - 1)));
  text(img, bx + kBar + 4, by, "1");
  text(img, bx + kBar + 4, by + bh - kLine, opts.scale == HeatmapScale::log ? "1E-4" : "0");
  return img;
}

void check_heatmap(const ModelArgs& a, const RunOptions& o, std::int64_t layer,
                   std::int64_t batch_row) {
  if (batch_row < 0 || batch_row >= o.batch)
    throw InputError("--batch-row " + std::to_string(batch_row) +
                     " is out of range: the batch has " + std::to_string(o.batch) + " sequence(s)");
  if (o.prefill + o.steps > kHeatmapPositions)
    throw InputError("heatmap: " + std::to_string(o.prefill + o.steps) +
                     " positions are too many to draw (at most " +
                     std::to_string(kHeatmapPositions) + ")");
  if (layer < 0 || layer >= a.n_layers)
    throw InputError("--layer " + std::to_string(layer) + " is out of range: the config has " +
                     std::to_string(a.n_layers) + " layer(s), 0.." +
                     std::to_string(a.n_layers - 1));
}

OutputFile stage_png(const std::filesystem::path& path, const Image& img) {
  std::vector<std::uint8_t> png;
  auto append = [](void* ctx, void* data, int size) {
    auto* v = static_cast<std::vector<std::uint8_t>*>(ctx);
    v->insert(v->end(), static_cast<std::uint8_t*>(data), static_cast<std::uint8_t*>(data) + size);
  };
  if (!stbi_write_png_to_func(append, &png, img.width, img.height, 3, img.rgb.data(),
                              img.width * 3))
    throw std::runtime_error(escape(path.string()) + ": cannot encode the PNG");
  OutputFile out(path, "PNG");
  out.write(png.data(), png.size());
  return out;
}

}  // namespace cli
