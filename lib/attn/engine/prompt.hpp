#pragma once
// A prompt's text against the cache's capacity before it is encoded whole, and generated ids
// turned back into text as they come. How a front spells a prompt (flags, files of ids) is the
// front's: attn-cli's apps/text_input.hpp.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attn/text/tokenizer.hpp"

namespace attn {

// Refuses (InputError naming `what` and the setting max_seq_len) a text whose ids would be far
// more than max_tokens, measured by encoding it a chunk of about a MiB at a time and stopping
// as soon as the chunks' ids are too many: memory bounded by a chunk, not by the text (its
// whole pieces and ids cost ~14 bytes per byte). A chunk's edges can change a few ids (a word
// cut, a space prefixed), so only a count past max_tokens plus a margin per chunk is refused; a
// text of one chunk or less is left to the caller's exact count.
void check_text_fits(const Tokenizer& tok, std::string_view text, std::int64_t max_tokens,
                     const std::string& what);

// The text of the tokens as they grow, holding back an incomplete UTF-8 character (a byte
// token whose continuation has not come yet). Special tokens (BOS, EOS, a chat template's
// markers) are not text: they print nothing, as in llama.cpp's generation output and
// llama2.c's run.c, so a story prints as its reference prints it.
struct TextStream {
  const Tokenizer& tok;
  std::vector<std::int32_t> ids;
  std::size_t printed = 0;  // bytes of decode(ids) already out

  TextStream(const Tokenizer& tok, std::vector<std::int32_t> printed_ids);
  std::string next(std::int32_t id);
};

}  // namespace attn
