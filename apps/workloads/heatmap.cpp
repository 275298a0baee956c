#include "workloads/heatmap.hpp"

#include <stb_image_write.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

#include "attn/error.hpp"
#include "attn/io/text.hpp"
#include "workloads/font.hpp"

namespace attn {

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

// Probability of query row r (prefill rows, then decode steps) for key j of head h, batch 0;
// negative where the row does not score that key.
float probability(const RunOptions& o, const RunOutputs& out, std::size_t layer, std::int64_t h,
                  std::int64_t r, std::int64_t j) {
  const std::int64_t P = o.prefill;
  if (r < P) return j < P ? out.attn_prefill[layer][std::size_t((h * P + r) * P + j)] : -1;
  const std::int64_t i = r - P + 1, keys = P + i;
  return j < keys ? out.attn_decode[std::size_t(i - 1)][layer][std::size_t(h * keys + j)] : -1;
}

}  // namespace

HeatmapLayout heatmap_layout(const ModelArgs& a, std::int64_t positions) {
  HeatmapLayout l;
  const int T = int(std::max<std::int64_t>(positions, 1));
  l.cell = std::clamp(256 / T, 1, 24);  // at most kHeatmapPositions positions: <= 512 px
  l.panel = T * l.cell;
  // GQA: one row of panels per KV head, so the heads that share it sit side by side.
  const std::int64_t n_rep = a.n_rep();
  l.columns = int(n_rep > 1 && n_rep <= 8 ? n_rep : std::min<std::int64_t>(a.n_heads, 4));
  const int pitch_x = std::max(l.panel, text_width(head_label(a, a.n_heads - 1))) + kMargin;
  const int pitch_y = kLabel + l.panel + kMargin;
  const int rows = int((a.n_heads + l.columns - 1) / l.columns);
  const int top = kMargin + kTitle;
  for (std::int64_t h = 0; h < a.n_heads; ++h) {
    l.panel_x.push_back(kMargin + int(h % l.columns) * pitch_x);
    l.panel_y.push_back(top + kLabel + int(h / l.columns) * pitch_y);
  }
  const int grid_w = l.columns * pitch_x + kBar + 3 * kAdvance;
  l.width = kMargin + std::max(grid_w, kTitleChars * kAdvance) + kMargin;
  l.height = top + rows * pitch_y + kMargin;
  return l;
}

Image render_heatmap(const ModelArgs& a, const RunOptions& o, const RunOutputs& out,
                     std::int64_t layer) {
  const std::int64_t T = o.prefill + o.steps;
  const HeatmapLayout l = heatmap_layout(a, T);
  Image img{l.width, l.height,
            std::vector<std::uint8_t>(std::size_t(l.width) * std::size_t(l.height) * 3, 255)};
  const std::string title = "LAYER " + std::to_string(layer) + "  MASK " +
                            (a.mask == Mask::causal ? "CAUSAL" : "NONE") + "  BATCH ROW 0";
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
        const float p = probability(o, out, L, h, r, j);
        fill(img, x0 + int(j) * l.cell, y0 + int(r) * l.cell, l.cell, l.cell,
             p < 0 ? Rgb{200, 200, 200} : colour(p));
      }
  }
  // The colour scale beside the first row of panels: 1 at the top, 0 at the bottom.
  const int bx = l.panel_x[std::size_t(l.columns - 1)] +
                 std::max(l.panel, text_width(head_label(a, a.n_heads - 1))) + kMargin / 2;
  const int by = l.panel_y[0], bh = std::max(l.panel, 2 * kLine);
  for (int y = 0; y < bh; ++y)
    fill(img, bx, by + y, kBar, 1, colour(1.0f - float(y) / float(bh - 1)));
  text(img, bx + kBar + 4, by, "1");
  text(img, bx + kBar + 4, by + bh - kLine, "0");
  return img;
}

void check_heatmap(const ModelArgs& a, const RunOptions& o, std::int64_t layer) {
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

}  // namespace attn
