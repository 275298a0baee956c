// libFuzzer harness: a tokenizer.json, then (after the first NUL byte) a text to encode and the
// ids to decode back. Refusals (InputError) are expected, with an escaped message; anything
// else, a crash, a hang, a sanitizer report or work or output past a fixed multiple of the
// input's bytes (work_bound.hpp) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "attn/error.hpp"
#include "attn/text/tokenizer.hpp"
#include "escaped_message.hpp"
#include "work_bound.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = all.find('\0');
  const WorkBound bound(size + 32);
  try {
    const attn::Tokenizer t = attn::parse_tokenizer(all.substr(0, nul), "fuzz/tokenizer.json");
    const std::string text = nul == std::string::npos ? "Hello world 123 é ☕" : all.substr(nul + 1);
    const std::vector<std::int32_t> ids = attn::encode(t, text);
    WorkBound::check_size(ids.size(), size + 32);
    WorkBound::check_decoded(t, ids, attn::decode(t, ids));
    WorkBound::check_decoded(t, ids, attn::decode(t, ids, {true, false}));
    for (const std::int32_t id : ids) WorkBound::check_decoded(t, {id}, attn::token_bytes(t, id));
    bound.check_work();
  } catch (const attn::InputError& e) {
    require_escaped(e.what(), all);
  }
  return 0;
}
