#pragma once
// UTF-8 as Unicode defines it (table 3-7: no overlong forms, no surrogates, nothing past
// U+10FFFF): the one check the safetensors header, the terminal escaping and the tokenizers'
// repair of text share.
#include <cstddef>
#include <string_view>

namespace attn {

// The length (1 to 4) of the well-formed sequence at s[i], or 0 if there is none; then `bad`,
// if given, is the length of the maximal ill-formed subpart there (at least 1): the bytes one
// U+FFFD replaces, as browsers and Rust's from_utf8_lossy count them.
std::size_t utf8_sequence(std::string_view s, std::size_t i, std::size_t* bad = nullptr);

}  // namespace attn
