// libFuzzer harness: the tokenizers llama.cpp's rules run (text/llama_vocab.hpp). The first byte
// picks the file's kind (even: a GGUF file's metadata, odd: llama2.c's tokenizer.bin), the next
// two give a text's length (little-endian), then the text, then the file's bytes. The text is
// encoded with and without parsing special tokens and decoded back every way. Refusals
// (InputError) are expected; anything else, a crash, a hang, a sanitizer report or work or output
// past a fixed multiple of the input's bytes (work_bound.hpp) is a finding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "attn/error.hpp"
#include "attn/io/gguf.hpp"
#include "attn/text/llama_vocab.hpp"
#include "attn/text/tokenizer.hpp"
#include "work_bound.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const bool gguf = data[0] % 2 == 0;
  const std::size_t n = std::min<std::size_t>(data[1] | std::size_t(data[2]) << 8, size - 3);
  const std::string text(reinterpret_cast<const char*>(data + 3), n);
  const std::span<const std::uint8_t> file(data + 3 + n, size - 3 - n);
  const WorkBound bound(size);
  try {
    const attn::Tokenizer t =
        gguf ? attn::tokenizer_from_gguf(attn::parse_gguf(file, "fuzz.gguf"))
             : attn::parse_llama2c_tokenizer(
                   std::string_view(reinterpret_cast<const char*>(file.data()), file.size()),
                   "fuzz/tokenizer.bin");
    for (const bool special : {true, false}) {
      attn::EncodeOptions o;
      o.parse_special = special;
      const std::vector<std::int32_t> ids = attn::encode(t, text, o);
      WorkBound::check_size(ids.size(), text.size());
      WorkBound::check_decoded(t, ids, attn::decode(t, ids));
      WorkBound::check_decoded(t, ids, attn::decode(t, ids, {true, {}}));
      WorkBound::check_decoded(t, ids, attn::decode(t, ids, {false, true}));
    }
    for (std::int32_t id = 0; id < t.vocab_size() && id < 4096; ++id)
      WorkBound::check_decoded(t, {id}, attn::token_bytes(t, id));
    bound.check_work();
  } catch (const attn::InputError&) {
  }
  return 0;
}
