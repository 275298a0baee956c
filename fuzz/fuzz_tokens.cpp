// libFuzzer harness: token ids as a user gives them (--tokens, a tokens file, Python's ids) on
// any text: comma- or space-separated ids, sequences split by ';' or lines, a JSON array, an
// array of arrays or {"ids": [...]}. Refusals (InputError) are expected; anything else, a crash,
// a hang, a sanitizer report or more ids than a fixed multiple of the input's bytes
// (work_bound.hpp) is a finding. The parsing is attn-cli's (apps/text_input.hpp).
#include <cstddef>
#include <cstdint>
#include <string>

#include "attn/error.hpp"
#include "text_input.hpp"
#include "work_bound.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cli::TextInput t;
  t.tokens.assign(reinterpret_cast<const char*>(data), size);
  try {
    std::size_t ids = 0;
    for (const auto& seq : cli::prompt_sequences(t, nullptr, 1000)) ids += seq.size() + 1;
    WorkBound::check_size(ids, size);
  } catch (const attn::InputError&) {
  }
  try {
    WorkBound::check_size(cli::parse_token_ids(t.tokens, "fuzz", 0).size(), size);
  } catch (const attn::InputError&) {
  }
  return 0;
}
