#pragma once
// llama.cpp's flags that attn-cli does not take, as its users type them: each refused before
// CLI11 parses, with what to use instead. CLI11 would split a multi-letter single-dash flag
// (-ngl 99 into -n gl, "could not convert: --steps = gl"), so these must be caught first.
#include <string_view>

namespace cli {

// One llama.cpp flag attn-cli refuses: its single-dash and long names, and what to do instead.
struct LlamaCppFlag {
  std::string_view dash;  // "-ngl"; empty: none
  std::string_view name;  // "--n-gpu-layers"; empty: none
  std::string_view instead;
};

// Throws attn::InputError naming the first argv entry (before "--") that is one of them, with
// what to use instead; "-no-cnv" (generate never converses) is dropped from argv. In attn-cli
// chat, -sys is --system-prompt and -cnv, -i (a conversation: chat is one) are dropped.
void refuse_llama_cpp_flags(int& argc, char** argv);

}  // namespace cli
