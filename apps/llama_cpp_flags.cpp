// The table of llama.cpp's flags attn-cli refuses (llama_cpp_flags.hpp), and the pass over argv.
#include "llama_cpp_flags.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <string>

#include "attn/error.hpp"
#include "attn/io/text.hpp"

namespace cli {

namespace {

constexpr std::string_view kGpu =
    "a GPU flag; attn-cli runs on the CPU only and needs none: leave it out";
constexpr std::string_view kChat = "conversation: use attn-cli chat";
constexpr std::string_view kSystem = "a system prompt: use attn-cli chat -sys TEXT";
constexpr std::string_view kDownload =
    "attn-cli reads local files only: download the model, then name it with -m FILE";

// llama.cpp's common/arg.cpp names; the ones whose meaning attn-cli has are aliases in the flag
// table instead (--model, --ctx-size, --n-predict, --file).
constexpr std::array<LlamaCppFlag, 23> kRefused = {{
    {"-ngl", "--n-gpu-layers", kGpu},
    {"-ngld", "--n-gpu-layers-draft", kGpu},
    {"-mg", "--main-gpu", kGpu},
    {"-ts", "--tensor-split", kGpu},
    {"-sm", "--split-mode", kGpu},
    {"-dev", "--device", kGpu},
    {"-nkvo", "--no-kv-offload", kGpu},
    {"-ot", "--override-tensor", kGpu},
    {"-fa", "--flash-attn", "attn-cli's attention is its own kernel, with no switch: leave it out"},
    {"-cnv", "--conversation", kChat},
    {"-sys", "--system-prompt", kSystem},
    {"-st", "--single-turn", kChat},
    {"-i", "--interactive", kChat},
    {"-tb", "--threads-batch", "--threads sets the threads of the prompt and of each token"},
    {"-ub", "--ubatch-size", "attn-cli reads the prompt in one call; leave it out"},
    {"-np", "--parallel", "attn-cli generate runs one sequence"},
    {"-ctk", "--cache-type-k", "attn-cli's cache holds F32: leave it out"},
    {"-ctv", "--cache-type-v", "attn-cli's cache holds F32: leave it out"},
    {"-hf", "--hf-repo", kDownload},
    {"-hfr", "--hf-repo-draft", kDownload},
    {"-mu", "--model-url", kDownload},
    {"", "--prompt-cache",
     "attn-cli saves the cache with --save-session F and continues after it with "
     "--load-session F (the prompt given then follows the saved one)"},
    {"-co", "--color", "attn-cli prints the text as the model gives it"},
}};

bool named(std::string_view word, const LlamaCppFlag& f) {
  return (!f.dash.empty() && word == f.dash) || (!f.name.empty() && word == f.name);
}

// In attn-cli chat, what llama.cpp's conversation flags become: -sys is --system-prompt (CLI11
// would split it), the flags asking for a conversation are what chat is already.
constexpr std::array<std::string_view, 4> kChatAlready = {"-cnv", "--conversation", "-i",
                                                          "--interactive"};

// -sys TEXT or -sys=TEXT as --system-prompt; argv keeps pointing at strings that live on.
const char* chat_spelling(std::string_view arg) {
  static std::deque<std::string> spelled;
  return spelled.emplace_back("--system-prompt" + std::string(arg.substr(4))).c_str();
}

// The subcommand: argv's first word that is not a flag (attn-cli's top level takes no values).
bool in_chat(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (argv[i][0] != '-') return std::string_view(argv[i]) == "chat";
  return false;
}

}  // namespace

void refuse_llama_cpp_flags(int& argc, char** argv) {
  int kept = 1;
  const bool chat = in_chat(argc, argv);
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") {  // the rest are values
      for (; i < argc; ++i) argv[kept++] = argv[i];
      break;
    }
    const std::string_view word = arg.substr(0, arg.find('='));
    if (word == "-no-cnv" || word == "--no-conversation") continue;  // generate never converses
    if (chat && word == "-sys") {
      argv[kept++] = const_cast<char*>(chat_spelling(arg));
      continue;
    }
    if (chat && word == "--system-prompt") {
      argv[kept++] = argv[i];
      continue;
    }
    if (chat && std::find(kChatAlready.begin(), kChatAlready.end(), word) != kChatAlready.end())
      continue;
    if (chat && (word == "-st" || word == "--single-turn"))
      throw attn::InputError(attn::escape(std::string(word)) +
                             " (llama.cpp's): attn-cli chat converses until /exit or the end of "
                             "input; for one turn in a script use attn-cli generate --chat");
    for (const LlamaCppFlag& f : kRefused)
      if (named(word, f))
        throw attn::InputError(
            attn::escape(std::string(word)) + " (llama.cpp's" +
            (word == f.dash && !f.name.empty() ? " " + std::string(f.name) : "") +
            "): " + std::string(f.instead));
    argv[kept++] = argv[i];
  }
  argc = kept;
}

}  // namespace cli
