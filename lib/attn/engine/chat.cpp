#include "attn/engine/chat.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/text/tokenizer.hpp"

namespace attn {

std::vector<std::int32_t> chat_prompt_ids(const ChatTemplate& chat, const Tokenizer& t,
                                          const std::vector<ChatMessage>& messages,
                                          std::int64_t vocab) {
  EncodeOptions o;
  o.add_special_tokens = false;
  std::vector<std::int32_t> ids = encode(t, chat.render(messages, chat_options(t, true)), o);
  if (ids.empty()) throw InputError(chat.name() + ": the conversation renders to no tokens");
  for (const std::int32_t id : ids)
    if (id >= vocab)
      throw InputError("the chat prompt has token " + std::to_string(id) +
                       ", outside the model's vocabulary of " + std::to_string(vocab));
  return ids;
}

std::size_t keep_common_prefix(Session& e, std::span<const std::int32_t> ids) {
  std::vector<std::int32_t>& held = e.generation.tokens;
  const std::size_t n = std::min(held.size(), ids.empty() ? 0 : ids.size() - 1);
  std::size_t common = 0;
  while (common < n && held[common] == ids[common]) ++common;
  held.resize(common);
  e.filled = std::int64_t(common);
  e.resume = common > 0;
  Generation& g = e.generation;
  g.prompt_seconds = g.eval_seconds = 0;
  g.prompt_tokens = g.eval_tokens = 0;
  return common;
}

}  // namespace attn
