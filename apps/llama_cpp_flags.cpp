// The table of llama.cpp's flags attn-cli refuses (llama_cpp_flags.hpp), and the pass over argv.
#include "llama_cpp_flags.hpp"

#include <array>
#include <string>

#include "attn/error.hpp"
#include "attn/io/text.hpp"

namespace cli {

namespace {

constexpr std::string_view kGpu =
    "a GPU flag; attn-cli runs on the CPU only and needs none: leave it out";
constexpr std::string_view kChat = "conversation: use attn-cli chat";
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
    {"-sys", "--system-prompt", kChat},
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

}  // namespace

void refuse_llama_cpp_flags(int& argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") {  // the rest are values
      for (; i < argc; ++i) argv[kept++] = argv[i];
      break;
    }
    const std::string_view word = arg.substr(0, arg.find('='));
    if (word == "-no-cnv" || word == "--no-conversation") continue;  // generate never converses
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
