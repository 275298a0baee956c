#include "workloads/label_font.hpp"

#include <stb_truetype.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>

#include "attn/text/unicode.hpp"
#include "workloads/heatmap.hpp"

namespace cli {

using attn::next_code_point;
using attn::valid_utf8;

struct LabelFont {
  std::vector<unsigned char> data;
  stbtt_fontinfo info{};
};

namespace {

std::unique_ptr<LabelFont> load_font() {
  const char* env = std::getenv("ATTN_FONT");
  for (const char* path : {env, "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"}) {
    if (!path || !*path) continue;
    std::ifstream in(path, std::ios::binary);
    auto f = std::make_unique<LabelFont>();
    f->data.assign(std::istreambuf_iterator<char>(in), {});
    if (!f->data.empty() && stbtt_InitFont(&f->info, f->data.data(), 0)) return f;
  }
  return nullptr;
}

// Calls draw(glyph bitmap, width, height, x offset, y offset) for each code point, advancing.
template <class Draw>
int layout(const LabelFont& f, std::string_view text, int px, Draw&& draw) {
  const float scale = stbtt_ScaleForPixelHeight(&f.info, float(px));
  int ascent = 0, descent = 0, gap = 0;
  stbtt_GetFontVMetrics(&f.info, &ascent, &descent, &gap);
  const int baseline = int(float(ascent) * scale + 0.5f);
  const std::string s = valid_utf8(text);
  float x = 0;
  for (std::size_t i = 0; i < s.size();) {
    const char32_t c = next_code_point(s, i);
    int advance = 0, bearing = 0;
    stbtt_GetCodepointHMetrics(&f.info, int(c), &advance, &bearing);
    int w = 0, h = 0, xo = 0, yo = 0;
    unsigned char* bm = stbtt_GetCodepointBitmap(&f.info, scale, scale, int(c), &w, &h, &xo, &yo);
    if (bm) draw(bm, w, h, int(x) + xo, baseline + yo);
    stbtt_FreeBitmap(bm, nullptr);
    x += float(advance) * scale;
  }
  return int(x + 0.5f);
}

void darken(Image& img, int x, int y, unsigned char coverage) {
  if (x < 0 || y < 0 || x >= img.width || y >= img.height || !coverage) return;
  std::uint8_t* p = &img.rgb[(std::size_t(y) * std::size_t(img.width) + std::size_t(x)) * 3];
  for (int k = 0; k < 3; ++k) p[k] = std::uint8_t(p[k] * (255 - coverage) / 255);
}

}  // namespace

const LabelFont* label_font() {
  static const std::unique_ptr<LabelFont> font = load_font();
  return font.get();
}

int label_width(const LabelFont& f, std::string_view text, int px) {
  return layout(f, text, px, [](unsigned char*, int, int, int, int) {});
}

void draw_label(Image& img, const LabelFont& f, int x, int y, std::string_view text, int px,
                bool vertical) {
  layout(f, text, px, [&](unsigned char* bm, int w, int h, int gx, int gy) {
    for (int r = 0; r < h; ++r)
      for (int c = 0; c < w; ++c) {
        const unsigned char v = bm[r * w + c];
        if (vertical)  // (gx + c, gy + r) turned: right becomes up
          darken(img, x + gy + r, y - (gx + c), v);
        else
          darken(img, x + gx + c, y + gy + r, v);
      }
  });
}

}  // namespace cli
