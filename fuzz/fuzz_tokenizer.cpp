// libFuzzer harness: a tokenizer.json, then (after the first NUL byte) a text to encode and the
// ids to decode back. Refusals (InputError) are expected, with an escaped message; anything
// else, a crash, a hang or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "attn/error.hpp"
#include "attn/text/tokenizer.hpp"
#include "escaped_message.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = all.find('\0');
  try {
    const attn::Tokenizer t = attn::parse_tokenizer(all.substr(0, nul), "fuzz/tokenizer.json");
    const std::string text = nul == std::string::npos ? "Hello world 123 é ☕" : all.substr(nul + 1);
    const std::vector<std::int32_t> ids = attn::encode(t, text);
    attn::decode(t, ids);
    attn::decode(t, ids, {true, false});
    for (const std::int32_t id : ids) attn::token_bytes(t, id);
  } catch (const attn::InputError& e) {
    require_escaped(e.what(), all);
  }
  return 0;
}
