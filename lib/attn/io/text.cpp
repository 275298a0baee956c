#include "attn/io/text.hpp"

#include "attn/io/utf8.hpp"

namespace attn {

namespace {

constexpr char kHex[] = "0123456789abcdef";

void hex_byte(std::string& out, unsigned char u) {
  out += "\\x";
  out += kHex[u >> 4];
  out += kHex[u & 15];
}

// The length of the valid UTF-8 sequence at s[i] and its code point, or 0 if it is not one.
std::size_t utf8_at(std::string_view s, std::size_t i, char32_t& cp) {
  const std::size_t n = utf8_sequence(s, i);
  if (n == 0) return 0;
  const auto u = static_cast<unsigned char>(s[i]);
  cp = n == 1 ? u : u & (0x7f >> n);
  for (std::size_t k = 1; k < n; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
  return n;
}

// Code points a terminal acts on rather than shows: C1 controls (U+009B is CSI), line and
// paragraph separators, and the bidirectional overrides and isolates that reorder a line.
bool interpreted(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x200e || cp == 0x200f ||
         (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
}

// escape's loop: `text` keeps newlines and tabs and escapes only the C1 controls of the
// interpreted code points.
std::string escape_all(std::string_view cut, bool text) {
  std::string out;
  for (std::size_t i = 0; i < cut.size();) {
    const auto u = static_cast<unsigned char>(cut[i]);
    if (u < 0x80) {
      if ((u < 0x20 && !(text && (u == '\n' || u == '\t'))) || u == 0x7f)
        hex_byte(out, u);
      else
        out += cut[i];
      ++i;
      continue;
    }
    char32_t cp = 0;
    const std::size_t n = utf8_at(cut, i, cp);
    if (n == 0) {  // not UTF-8: a lone 0x9b is CSI to an 8-bit terminal
      hex_byte(out, u);
      ++i;
    } else if (text ? cp >= 0x80 && cp <= 0x9f : interpreted(cp)) {
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(cp >> shift) & 15];
      i += n;
    } else {
      out.append(cut.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace

std::string escape(std::string_view s, std::size_t max) {
  std::string out = escape_all(s.substr(0, max), false);
  if (s.size() > max) out += "...";
  return out;
}

std::string escape_controls(std::string_view s) {
  return escape_all(s, true);
}

std::string quoted(std::string_view s, std::size_t max) {
  std::string out(1, '\'');
  out += escape(s, max);
  out += '\'';
  return out;
}

std::string summarise(const std::vector<std::string>& names, const std::string& what,
                      std::size_t shown) {
  std::string out = std::to_string(names.size()) + " " + what;
  for (std::size_t i = 0; i < names.size() && i < shown; ++i)
    out += (i == 0 ? ", e.g. " : ", ") + quoted(names[i], 60);
  return out;
}

}  // namespace attn
