#pragma once
// A 5x7 bitmap font for the heatmap's labels: digits, capital letters and a little punctuation.
// No Debian library draws text into a pixel buffer simply (FreeType needs a font file and a
// layout), and labels need only these glyphs.
#include <cstdint>

namespace cli {

// The 7 rows of a glyph, 5 bits each (bit 4 = leftmost column); null for unknown characters.
const std::uint8_t* glyph(char c);

inline constexpr int kGlyphWidth = 5, kGlyphHeight = 7;

}  // namespace cli
