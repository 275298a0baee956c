// attn-cli tokenize: text to token ids and back with a tokenizer alone (tokenizer.json, a GGUF
// file's, tokenizer.bin), as llama.cpp's llama-tokenize.
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>

#include "attn/error.hpp"
#include "attn/io/files.hpp"
#include "attn/io/format.hpp"
#include "attn/io/text.hpp"
#include "attn/text/tokenizer.hpp"
#include "commands/commands.hpp"
#include "flags.hpp"
#include "text_input.hpp"

namespace cli {

using namespace attn;  // the engine's names; this file is its front

namespace {

using json = nlohmann::json;

// --tokenizer, else a GGUF model file given as -m (it holds its tokenizer).
std::string tokenizer_file(const Options& f) {
  if (!f.text.tokenizer.empty()) return f.text.tokenizer;
  if (f.weights.empty()) throw InputError("--tokenizer (or -m with a GGUF file) is needed");
  // The same "what is this file" step as -m elsewhere: a FIFO, a device or a file that is no
  // model is said so.
  const FileHead head = read_head(f.weights, "weights", kFormatHeadBytes);
  const FileFormat format = detect_format(head.bytes, head.size);
  check_model_format(head, format);
  if (format != FileFormat::gguf)
    throw InputError(
        head.source + ": " +
        (format == FileFormat::unknown ? "not a GGUF file" : format_description(format)) +
        ", which holds no tokenizer: give --tokenizer (or -m with a GGUF file)");
  return f.weights;
}

}  // namespace

int tokenize_command(const Options& f) {
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  const Tokenizer tok = load_tokenizer(tokenizer_file(f));
  if (f.decode) {
    const std::vector<std::int32_t> ids =
        one_sequence(prompt_sequences(f.text, &tok, tok.vocab_size()));
    const std::string text = decode(tok, ids, {false, false});
    if (f.json)
      std::cout << json{{"ids", ids}, {"text", text}}.dump() << '\n';
    else
      std::cout << text << '\n';
    return 0;
  }
  if (!f.text.wants_text())
    throw InputError("tokenize needs --prompt or --prompt-file (or --decode --tokens)");
  if (f.text.prompt.size() > 1) throw InputError("one --prompt at a time here");
  const std::string text =
      f.text.prompt_file.empty() ? f.text.prompt[0] : read_text_input(f.text.prompt_file, "prompt");
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::int32_t> ids = encode_prompt(tok, f.text, text, tok.vocab_size());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("tokenize: {} bytes, {} ids in {:.4f} s ({:.1f} MB/s, one thread)", text.size(),
               ids.size(), s, s > 0 ? double(text.size()) / s / 1e6 : 0.0);
  if (f.json) {
    json pieces = json::array();
    for (const std::int32_t id : ids) pieces.push_back(tok.pieces[std::size_t(id)]);
    std::cout << json{{"ids", ids}, {"pieces", pieces}}.dump() << '\n';
  } else {
    for (std::size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
    std::cout << '\n';
  }
  std::cout.flush();
  if (!std::cout) throw std::runtime_error("cannot write to stdout");
  return 0;
}

}  // namespace cli
