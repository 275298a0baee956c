#pragma once
// Token labels in any script: a TrueType font (DejaVu Sans, Debian's fonts-dejavu-core; or the
// file ATTN_FONT names) rasterised by stb_truetype. The bitmap font (font.hpp) draws the rest.
#include <cstdint>
#include <string_view>
#include <vector>

namespace cli {

struct Image;

// The font, loaded on first use; null when no font file can be read (labels then fall back to
// the bitmap font, escaped to ASCII).
struct LabelFont;
const LabelFont* label_font();

// Width in pixels of UTF-8 text at a height of px pixels.
int label_width(const LabelFont& f, std::string_view text, int px);

// Draws UTF-8 text in black, its top-left at (x, y); vertical: turned 90 degrees anticlockwise,
// read bottom to top, its bottom-left at (x, y).
void draw_label(Image& img, const LabelFont& f, int x, int y, std::string_view text, int px,
                bool vertical);

}  // namespace cli
