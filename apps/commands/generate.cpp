// attn-cli generate: from a prompt, through the tokenizer and the whole model, to text (or JSON
// Lines), continuing and saving cache sessions; the timing on stderr as llama.cpp prints it.
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <unistd.h>

#include "attn/engine/chat.hpp"
#include "attn/engine/lens.hpp"
#include "attn/engine/prompt.hpp"
#include "attn/engine/session.hpp"
#include "attn/error.hpp"
#include "attn/io/files.hpp"
#include "attn/io/format.hpp"
#include "attn/io/text.hpp"
#include "attn/kernels/runtime.hpp"
#include "attn/text/tokenizer.hpp"
#include "commands/commands.hpp"
#include "commands/setup.hpp"
#include "flags.hpp"
#include "text_input.hpp"
#include "workloads/trace.hpp"

namespace cli {

using namespace attn;  // the engine's names; this file is its front

namespace {

using json = nlohmann::json;

// generate --json's prefill event: the prompt's ids and the cache after it, as run's events.
void print_prefill_json(const ModelArgs& a, const std::vector<std::int32_t>& prompt,
                        std::int64_t before, double seconds) {
  const std::int64_t filled = before + std::int64_t(prompt.size());
  const std::vector<std::int64_t> cache = {1, a.n_kv_heads, filled, a.head_dim()};
  std::cout << json{{"event", "prefill"},      {"ids", prompt},    {"start_pos", before},
                    {"seqlen", prompt.size()}, {"cache_k", cache}, {"cache_v", cache},
                    {"ms", seconds * 1e3}}
                   .dump()
            << '\n';
}

// --chat: the prompt as the one user turn of a conversation, rendered by the chat template with
// the generation prompt and encoded as transformers' apply_chat_template does (the template
// writes the special tokens: none added, their text read as the tokens).
std::vector<std::int32_t> chat_prompt(const Options& f, const std::optional<Tokenizer>& tok,
                                      std::int64_t vocab) {
  if (!tok) throw InputError("--chat needs a tokenizer with text (--tokenizer)");
  if (f.text.prompt.size() != 1 || !f.text.prompt_file.empty() || !f.text.tokens.empty() ||
      !f.text.tokens_file.empty())
    throw InputError("--chat takes the user's turn as one --prompt");
  const ChatTemplate chat = chat_template_for(*tok, f.chat_template);
  return chat_prompt_ids(chat, *tok, {{"user", f.text.prompt[0]}}, vocab);
}

// The prompt's ids, read with the tokenizer the model's files name (ids need none), checked
// against the vocabulary of both and against the cache before the engine is opened. A prompt
// continuing a loaded session gets no BOS (unless --add-bos): it is not the context's start.
std::vector<std::int32_t> generate_prompt(const Options& f, const ModelSpec& spec,
                                          const OpenedModel& model, std::optional<Tokenizer>& tok) {
  const ModelArgs a = model_args(spec, model, nullptr);  // needs a config
  require_tokenizer(f.text, model.files);
  tok = open_tokenizer(model);
  const std::int64_t vocab = token_vocab(a, tok);
  TextInput text = f.text;
  const std::optional<bool> asked = text.add_bos  ? std::optional<bool>(true)
                                    : text.no_bos ? std::optional<bool>(false)
                                                  : std::nullopt;
  const std::optional<bool> bos = prompt_bos(!f.load_session.empty(), asked);
  text.no_bos = bos == false;
  text.add_bos = bos == true;
  std::vector<std::int32_t> prompt =
      f.chat ? chat_prompt(f, tok, vocab)
             : one_sequence(prompt_sequences(text, tok ? &*tok : nullptr, vocab, a.max_seq_len));
  if (prompt.empty() && f.load_session.empty())
    throw InputError("generate needs a prompt: --prompt, --prompt-file, --tokens or --tokens-file");
  check_generation_fits(a, 0, std::int64_t(prompt.size()), std::max<std::int64_t>(f.run.steps, 0));
  return prompt;
}

// What -m takes, for the first message a new user sees.
constexpr const char* kModelKinds =
    "a GGUF file (e.g. weights/stories260K.gguf), safetensors with config.json and "
    "tokenizer.json beside them, a llama2.c .bin (with --tokenizer tokenizer.bin) or a Hugging "
    "Face folder";

// The GGUF files a folder holds, sorted, as -m would name them.
std::vector<std::string> gguf_files_in(const std::filesystem::path& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.path().extension() == ".gguf" && entry.is_regular_file(ec))
      found.push_back(escape(entry.path().string()));
  std::sort(found.begin(), found.end());
  return found;
}

// No model, a file that is none, or a folder of GGUF files: said in words that name the fix,
// before the library's "no config" (which is right, but not what a first user needs to hear).
void check_model_named(const Options& f) {
  if (!f.config.empty()) return;  // a config: weights drawn, or the library's checks
  if (f.weights.empty()) throw InputError(std::string("generate needs a model: -m ") + kModelKinds);
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path w = f.weights;
  if (fs::is_directory(w, ec) && !fs::exists(w / "config.json", ec)) {
    const std::vector<std::string> ggufs = gguf_files_in(w);
    if (ggufs.empty()) return;  // the library says what the folder lacks
    std::string names;
    for (std::size_t i = 0; i < ggufs.size() && i < 4; ++i)
      names += (i ? " or -m " : "") + ggufs[i];
    throw InputError(escape(w.string()) +
                     ": a folder without config.json; name a GGUF file in it: -m " + names);
  }
  // A file of no format: what it looks like, as the library's "what is this file" step says it
  // (empty for what may be a damaged safetensors file, whose reader then says what is wrong).
  // A model's own extensions are left to the library, which opens the file once and names what
  // a broken one looks like; other names (README.md) are looked at here, for the hint on -m.
  const std::string ext = w.extension().string();
  if (ext == ".gguf" || ext == ".bin" || ext == ".safetensors" || ext == ".json") return;
  if (!fs::is_regular_file(w, ec) || detect_format(w) != FileFormat::unknown) return;
  const FileHead head = read_head(w, "the model file", kFormatHeadBytes);
  const std::string look = unknown_look(head.bytes, head.size);
  if (!look.empty())
    throw InputError(head.source + ": not a model file: it looks like " + look + "; -m takes " +
                     kModelKinds);
}

bool stdout_is_terminal() {
  static const bool terminal = ::isatty(STDOUT_FILENO) != 0;
  return terminal;
}

// Text for a terminal: the model's C0 and C1 control bytes (ESC, BEL, CSI, ...) escaped, so that
// sampled tokens cannot move the cursor, retitle the window or forge output; newlines and tabs
// kept. A pipe or a file gets the bytes as they are.
std::string for_terminal(const std::string& piece) {
  return stdout_is_terminal() ? escape_controls(piece) : piece;
}

void print_token(const Options& f, const Session& e, std::optional<TextStream>& stream,
                 const Generated& t) {
  const std::string piece = stream ? stream->next(t.id) : std::to_string(t.id) + " ";
  if (!f.json) {
    std::cout << for_terminal(piece);
    return;
  }
  const std::string text = e.tokenizer ? decode(*e.tokenizer, {t.id}, {false, false}) : "";
  std::cout << json{{"event", "token"},
                    {"step", t.step + 1},
                    {"id", t.id},
                    {"text", text},
                    {"top", top_logits(t.logits.data(), std::int64_t(t.logits.size()), 5)}}
                   .dump(-1, ' ', false, json::error_handler_t::replace)
            << '\n';
}

void print_summary(const Options& f, const Session& e) {
  const Generation& g = e.generation;
  if (f.json)
    std::cout << json{{"event", "summary"},
                      {"prompt_tokens", g.prompt_tokens},
                      {"prompt_seconds", g.prompt_seconds},
                      {"eval_tokens", g.eval_tokens},
                      {"eval_seconds", g.eval_seconds},
                      {"threads", e.model.rt.threads},
                      {"blas_core", blas_core()}}
                     .dump()
              << '\n';
  else
    std::cout << '\n';
  std::cout.flush();
  if (!std::cout) throw std::runtime_error("cannot write the text to stdout");
}

}  // namespace

void print_timing(const Generation& g, double total) {
  const auto line = [](const char* what, double s, std::int64_t n, const char* unit) {
    std::fprintf(stderr,
                 "%18s = %10.2f ms / %5lld %-6s (%8.2f ms per token, %8.2f tokens per second)\n",
                 what, s * 1e3, static_cast<long long>(n), unit, n ? s * 1e3 / double(n) : 0.0,
                 s > 0 ? double(n) / s : 0.0);
  };
  line("prompt eval time", g.prompt_seconds, g.prompt_tokens, "tokens");
  line("eval time", g.eval_seconds, g.eval_tokens, "runs");
  std::fprintf(stderr, "%18s = %10.2f ms / %5lld tokens\n", "total time", total * 1e3,
               static_cast<long long>(g.tokens.size()));
}

ModelSpec generate_spec(const Options& f) {
  ModelSpec spec;
  spec.weights = f.weights;
  spec.config = f.config;
  spec.tokenizer = f.text.tokenizer;
  spec.overrides.max_seq_len = f.overrides.max_seq_len;
  spec.overrides.max_batch_size = 1;
  spec.seed = f.sampling.seed;
  spec.threads = f.threads;
  spec.compute = parse_compute(f.compute);
  return spec;
}

int generate_command(const Options& f) {
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  if (!std::cout) throw std::runtime_error("stdout is closed: the text has nowhere to go");
  const auto t0 = std::chrono::steady_clock::now();
  check_model_named(f);
  const ModelSpec spec = generate_spec(f);
  OpenedModel model = open_model(spec);
  std::optional<Tokenizer> tok;
  const std::vector<std::int32_t> prompt = generate_prompt(f, spec, model, tok);
  if (!f.save_session.empty()) check_output(f.save_session, "session");
  const std::int64_t rows = std::max<std::int64_t>(1, std::int64_t(prompt.size()));
  Session e =
      open_session(std::move(model), spec,
                   {1, rows, std::max<std::int64_t>(f.run.steps, 0), std::max(f.logit_lens, 0), {}},
                   std::nullopt, std::move(tok));
  require_token_model(e.model.args, "generate");
  apply_control_vectors(f, e);
  if (!f.load_session.empty()) load_cache_session(e, f.load_session);
  // -n -1, as llama.cpp's: until the end of text or the context's last position.
  const std::int64_t steps = f.run.steps >= 0
                                 ? f.run.steps
                                 : std::max<std::int64_t>(0, e.model.args.max_seq_len - e.filled -
                                                                 std::int64_t(prompt.size()));
  check_generation(e, prompt, steps, f.sampling);  // before any output
  const std::int64_t before = e.filled;            // a loaded session's positions
  std::optional<TextStream> stream;  // a loaded session's text was printed by its own run
  if (e.tokenizer) stream.emplace(*e.tokenizer, e.generation.tokens);
  if (f.json) {
    print_config_json(std::cout, e.model.args);
  } else if (stream) {
    for (const std::int32_t id : prompt) std::cout << for_terminal(stream->next(id));
  }
  std::cout.flush();
  // --chat stops where the assistant's turn ends, as the template writes it.
  const std::vector<std::int32_t> stop = f.chat && e.tokenizer && !f.ignore_eos
                                             ? chat_stop_ids(*e.tokenizer)
                                             : stop_ids(e, f.ignore_eos);
  // --logit-lens: each forward call's lens, printed before the token it chose (JSON on stdout,
  // text on stderr: stdout is the generated text).
  std::optional<LensRecorder> recorder;
  std::optional<Attached> attached;
  const LogitLens* lens = nullptr;
  std::int64_t lens_printed = 0;  // forward calls whose lens is printed
  if (f.logit_lens > 0) {
    lens = &recorder.emplace(e.model, f.logit_lens).lens();
    attached.emplace(e.model, recorder->observer());
  }
  const auto print_lens = [&] {
    if (!lens || lens->calls == lens_printed) return;
    // The prompt's call first (none when a loaded session continues with no prompt), then one
    // call per token fed.
    const bool prefill = lens_printed == 0 && !prompt.empty();
    const std::int64_t step = lens_printed + (prompt.empty() ? 1 : 0);
    lens_printed = lens->calls;
    if (f.json)
      print_lens_json(std::cout, *lens, prefill ? "prefill" : "decode", step,
                      e.model.args.first_layer);
    else
      print_lens_text(std::cerr, *lens, prefill ? "prefill" : "decode", step,
                      e.model.args.first_layer, e.tokenizer ? &*e.tokenizer : nullptr);
  };
  generate(e, prompt, steps, f.sampling, stop, !f.save_session.empty(), [&](const Generated& t) {
    if (f.json && t.step == 0)
      print_prefill_json(e.model.args, prompt, before, e.generation.prompt_seconds);
    print_lens();
    print_token(f, e, stream, t);
    std::cout.flush();
  });
  print_lens();  // the last token's call, fed for a session
  attached.reset();
  print_summary(f, e);
  print_timing(e.generation,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (!f.save_session.empty()) {
    stage_cache_session(e, f.save_session).commit();
    spdlog::info("session: {} ({} positions)", escape(f.save_session), e.filled);
  }
  return 0;
}

}  // namespace cli
