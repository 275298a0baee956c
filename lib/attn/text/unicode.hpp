#pragma once
// UTF-8 as the tokenizers read and write it: text that is not UTF-8 made valid the way
// browsers and Rust's from_utf8_lossy do it, code points one at a time, and GPT-2's map of
// bytes to printable characters (byte-level BPE).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace attn {

// s with every ill-formed sequence replaced by U+FFFD, one per maximal subpart (WHATWG's
// decoder, Rust's String::from_utf8_lossy): the same text a JavaScript or Rust tokenizer sees.
std::string valid_utf8(std::string_view s);

// True when a whole `mark` ("▁") stands right before byte k of s: k continues a run of marks
// rather than following another character (of any length, one byte included).
inline bool follows(std::string_view s, std::size_t k, std::string_view mark) {
  return k >= mark.size() && s.substr(k - mark.size(), mark.size()) == mark;
}

// Bytes of the (valid) code point starting at s[i]: 1 to 4.
std::size_t code_point_bytes(std::string_view s, std::size_t i);

// The code point starting at s[i] of valid UTF-8; i advances past it.
char32_t next_code_point(std::string_view s, std::size_t& i);

void append_utf8(std::string& out, char32_t c);

// Unicode's White_Space property (Rust's char::is_whitespace).
bool is_white_space(char32_t c);

// GPT-2's bytes_to_unicode: byte b as the UTF-8 of a printable code point.
const std::string& byte_to_unicode(unsigned char b);

// The inverse: the byte a code point of that map stands for, or -1.
int unicode_to_byte(char32_t c);

// Every `from` in s (none if empty) replaced by `to`, left to right.
void replace_all(std::string& s, std::string_view from, std::string_view to);

}  // namespace attn
