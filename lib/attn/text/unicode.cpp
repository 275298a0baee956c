#include "attn/text/unicode.hpp"

#include <array>

#include "attn/io/utf8.hpp"

namespace attn {

namespace {

constexpr std::array<std::array<char32_t, 2>, 10> kWhiteSpace = {{{0x09, 0x0D},
                                                                  {0x20, 0x20},
                                                                  {0x85, 0x85},
                                                                  {0xA0, 0xA0},
                                                                  {0x1680, 0x1680},
                                                                  {0x2000, 0x200A},
                                                                  {0x2028, 0x2029},
                                                                  {0x202F, 0x202F},
                                                                  {0x205F, 0x205F},
                                                                  {0x3000, 0x3000}}};

struct ByteMap {
  std::array<std::string, 256> to_unicode;
  std::array<int, 512> to_byte{};  // every code point of the map is below 512
  ByteMap() {
    to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t c = printable ? char32_t(b) : char32_t(256 + extra++);
      append_utf8(to_unicode[std::size_t(b)], c);
      to_byte[c] = b;
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

}  // namespace

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    std::size_t bad = 1;
    const std::size_t n = utf8_sequence(s, i, &bad);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += bad;
    }
  }
  return out;
}

std::size_t code_point_bytes(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const std::size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  return i + n <= s.size() ? n : s.size() - i;
}

char32_t next_code_point(std::string_view s, std::size_t& i) {
  const std::size_t n = code_point_bytes(s, i);
  const auto c = static_cast<unsigned char>(s[i]);
  char32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
  for (std::size_t k = 1; k < n; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

bool is_white_space(char32_t c) {
  for (const auto& r : kWhiteSpace)
    if (c >= r[0] && c <= r[1]) return true;
  return false;
}

const std::string& byte_to_unicode(unsigned char b) {
  return byte_map().to_unicode[b];
}

int unicode_to_byte(char32_t c) {
  return c < 512 ? byte_map().to_byte[c] : -1;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  std::size_t at = 0;
  for (std::size_t k; (k = s.find(from, at)) != std::string::npos; at = k + from.size())
    out.append(s, at, k - at).append(to);
  if (at == 0) return;
  s = out.append(s, at);
}

}  // namespace attn
