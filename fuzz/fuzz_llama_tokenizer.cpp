// libFuzzer harness: the tokenizers llama.cpp's rules run (text/llama_vocab.hpp). The first byte
// picks the file's kind (even: a GGUF file's metadata, odd: llama2.c's tokenizer.bin), the next
// two give a text's length (little-endian), then the text, then the file's bytes. The text is
// encoded with and without parsing special tokens and decoded back every way. Refusals
// (InputError) are expected; anything else, a crash, a hang or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "attn/error.hpp"
#include "attn/io/gguf.hpp"
#include "attn/text/llama_vocab.hpp"
#include "attn/text/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const bool gguf = data[0] % 2 == 0;
  const std::size_t n = std::min<std::size_t>(data[1] | std::size_t(data[2]) << 8, size - 3);
  const std::string text(reinterpret_cast<const char*>(data + 3), n);
  const std::span<const std::uint8_t> file(data + 3 + n, size - 3 - n);
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
      attn::decode(t, ids);
      attn::decode(t, ids, {true, {}});
      attn::decode(t, ids, {false, true});
    }
    for (std::int32_t id = 0; id < t.vocab_size() && id < 4096; ++id) attn::token_bytes(t, id);
  } catch (const attn::InputError&) {
  }
  return 0;
}
