#pragma once
// A chat template (tokenizer.chat_template, tokenizer_config.json's chat_template) rendered as
// Hugging Face transformers' apply_chat_template renders it: Jinja with trim_blocks and
// lstrip_blocks, transformers' tojson (ensure_ascii=False), raise_exception and strftime_now,
// loop controls and the {% generation %} tag. Only the subset of Jinja that chat templates use:
// a template using anything else is refused when it is read, naming the construct and its line.
// Rendering is bounded (output size, loop steps, call depth) so that a hostile template ends
// with an InputError rather than a hang.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

struct Tokenizer;

struct ChatMessage {
  std::string role, content;
};

struct ChatOptions {
  bool add_generation_prompt = false;
  std::string bos_token, eos_token;
  // The time strftime_now formats (seconds since the epoch, local time); none: now.
  std::optional<std::int64_t> now;
};

class ChatTemplate {
 public:
  // `name` is what messages call the template (a file name, "tokenizer.chat_template").
  // Throws InputError naming `name` and the line of a syntax error or an unsupported construct.
  ChatTemplate(std::string_view source, std::string name);

  // The conversation rendered with tools and documents left undefined-as-None, as
  // transformers renders it. Throws InputError (raise_exception's message, a type error, a
  // bound reached) naming the template and the line.
  std::string render(const std::vector<ChatMessage>& messages, const ChatOptions& options) const;

  // The same with the template's variables given as a JSON object (messages with any fields,
  // tools, add_generation_prompt, bos_token, ...); `now` as in ChatOptions.
  std::string render_json(std::string_view variables,
                          std::optional<std::int64_t> now = std::nullopt) const;

  const std::string& name() const { return name_; }

  struct Program;

 private:
  std::string name_;
  std::shared_ptr<const Program> program_;
};

// The template that renders a conversation for `t`: `choice` a file holding one, else the name
// of one of the tokenizer's templates; empty: the tokenizer's default. Throws InputError when
// there is none (setting "chat_template"), or as ChatTemplate's constructor.
ChatTemplate chat_template_for(const Tokenizer& t, const std::string& choice);

// The options transformers renders with for `t`: its BOS and EOS tokens' text.
ChatOptions chat_options(const Tokenizer& t, bool add_generation_prompt);

// The ids that end the assistant's turn: the tokenizer's EOS ids (with GGUF's EOT and EOM) and
// the end-of-turn tokens templates write (<|eot_id|>, <|im_end|>, <end_of_turn>, <|end|>, ...)
// where the vocabulary has them.
std::vector<std::int32_t> chat_stop_ids(const Tokenizer& t);

}  // namespace attn
