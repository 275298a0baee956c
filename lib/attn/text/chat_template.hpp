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

}  // namespace attn
