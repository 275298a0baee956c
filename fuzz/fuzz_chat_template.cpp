// libFuzzer harness: the input is a chat template, read and rendered on a short conversation
// with and without the generation prompt. A refusal (InputError: unsupported construct, syntax,
// raise_exception, a bound reached) is expected, but its message must be escaped; a crash, a
// hang (the renderer bounds its steps, output, call depth and nesting) or a sanitizer report
// is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "attn/error.hpp"
#include "attn/text/chat_template.hpp"
#include "escaped_message.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  try {
    const attn::ChatTemplate t(source, "fuzz.jinja");
    attn::ChatOptions options;
    options.bos_token = "<s>";
    options.eos_token = "</s>";
    options.now = 0;
    const std::vector<attn::ChatMessage> messages = {
        {"system", "Be brief."}, {"user", "Hi \xC3\xA9!"}, {"assistant", " ok\n"}, {"user", "x"}};
    for (const bool prompt : {false, true}) {
      options.add_generation_prompt = prompt;
      try {
        t.render(messages, options);
      } catch (const attn::InputError& e) {
        require_escaped(e.what(), source);
      }
    }
  } catch (const attn::InputError& e) {
    require_escaped(e.what(), source);
  }
  return 0;
}
