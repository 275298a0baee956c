#pragma once
// A chat turn on a session: the whole conversation is rendered by the chat template every turn
// and only what the cache does not hold already is prefilled. One home for attn-cli chat and
// Python's Model.chat.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "attn/engine/session.hpp"
#include "attn/text/chat_template.hpp"

namespace attn {

// The conversation rendered by `chat` with the generation prompt and encoded as transformers'
// apply_chat_template(tokenize=True) encodes it: the template writes the special tokens (none
// added; their text is read as the tokens). Throws InputError when it renders to no tokens or an
// id is outside `vocab` (the model's).
std::vector<std::int32_t> chat_prompt_ids(const ChatTemplate& chat, const Tokenizer& t,
                                          const std::vector<ChatMessage>& messages,
                                          std::int64_t vocab);

// Keeps the cache's positions that hold the rendered ids' common prefix (one short of the whole:
// a prefill needs a token), so that the next generate continues after them, and returns how many
// are kept. A template that re-renders earlier turns differently is re-prefilled from the first
// differing position. The generation's timings and counts start again (they are the turn's).
std::size_t keep_common_prefix(Session& e, std::span<const std::int32_t> ids);

}  // namespace attn
