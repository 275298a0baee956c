#include "attn/io/text.hpp"

namespace attn {

std::string escape(std::string_view s, std::size_t max) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : s.substr(0, max)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  if (s.size() > max) out += "...";
  return out;
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
