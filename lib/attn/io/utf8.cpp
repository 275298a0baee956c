#include "attn/io/utf8.hpp"

namespace attn {

std::size_t utf8_sequence(std::string_view s, std::size_t i, std::size_t* bad) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  std::size_t subpart = 1;
  const auto fail = [&] {
    if (bad) *bad = subpart;
    return std::size_t(0);
  };
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return fail();
  }
  for (std::size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) return fail();
    if (b(k) < (k == 1 ? lo : 0x80) || b(k) > (k == 1 ? hi : 0xBF)) return fail();
    subpart = k + 1;
  }
  return n;
}

}  // namespace attn
