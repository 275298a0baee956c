#include "workloads/generate.hpp"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iostream>

#include "attn/error.hpp"
#include "attn/io/files.hpp"
#include "attn/io/text.hpp"
#include "attn/kernels/runtime.hpp"
#include "attn/model/cache_session.hpp"
#include "attn/model/memory.hpp"
#include "attn/model/weights.hpp"
#include "attn/text/tokenizer.hpp"
#include "flags.hpp"
#include "workloads/trace.hpp"

namespace cli {

using attn::available_memory;
using attn::blas_core;
using attn::check_memory;
using attn::check_output;
using attn::ConfigOverrides;
using attn::cores;
using attn::decode;
using attn::encode;
using attn::EncodeOptions;
using attn::escape;
using attn::Generated;
using attn::Generation;
using attn::InputError;
using attn::kParallelFlops;
using attn::load_config;
using attn::load_session;
using attn::load_tokenizer;
using attn::matrix_types;
using attn::memory_parts;
using attn::ModelArgs;
using attn::open_weights;
using attn::OutputFile;
using attn::parse_compute;
using attn::quoted;
using attn::read_small_file;
using attn::RunShape;
using attn::Tokenizer;
using attn::Transformer;
using attn::TransformerWeights;
using attn::WeightsSource;

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr std::uint64_t kMaxTextBytes = std::uint64_t(1) << 30;

std::vector<std::int32_t> ids_from_json(const json& j, const std::string& what) {
  const json& list = j.is_object() && j.contains("ids") ? j["ids"] : j;
  if (!list.is_array()) throw InputError(what + ": expected a JSON array of token ids");
  std::vector<std::int32_t> ids;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_number_integer() || list[i].get<std::int64_t>() < 0 ||
        list[i].get<std::int64_t>() > INT32_MAX)
      throw InputError(what + ": token " + std::to_string(i) +
                       " is not a token id: " + quoted(list[i].dump(), 40));
    ids.push_back(list[i].get<std::int32_t>());
  }
  return ids;
}

std::vector<std::int32_t> ids_from_text(const std::string& text, const std::string& what) {
  std::vector<std::int32_t> ids;
  std::size_t i = 0;
  const auto separator = [](char c) {
    return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
  };
  while (i < text.size()) {
    while (i < text.size() && separator(text[i])) ++i;
    if (i == text.size()) break;
    std::size_t end = i;
    while (end < text.size() && !separator(text[end])) ++end;
    std::int32_t id = 0;
    const auto [p, ec] = std::from_chars(text.data() + i, text.data() + end, id);
    if (ec != std::errc() || p != text.data() + end || id < 0)
      throw InputError(what + ": token " + std::to_string(ids.size()) +
                       " is not a token id: " + quoted(text.substr(i, end - i), 40));
    ids.push_back(id);
    i = end;
  }
  return ids;
}

std::string read_text_file(const std::string& path, const char* what) {
  return read_small_file(path, what, kMaxTextBytes);
}

// Token ids as text: sequences separated by ';' or lines, ids by commas or spaces; or JSON: an
// array of ids, an array of such arrays, or {"ids": ...}.
std::vector<std::vector<std::int32_t>> parse_sequences(const std::string& text,
                                                       const std::string& what,
                                                       std::int64_t vocab) {
  std::vector<std::vector<std::int32_t>> out;
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[' &&
      text.find('[', first + 1) < text.find(']', first + 1)) {
    json j;
    try {
      j = json::parse(text);
    } catch (const json::exception& e) {
      throw InputError(what + ": not valid JSON: " + escape(e.what(), 160));
    }
    for (std::size_t b = 0; b < j.size(); ++b)
      out.push_back(parse_token_ids(j[b].dump(), what + " sequence " + std::to_string(b), vocab));
    return out;
  }
  if (first != std::string::npos && (text[first] == '[' || text[first] == '{'))
    return {parse_token_ids(text, what, vocab)};
  std::size_t from = 0;
  while (from <= text.size()) {
    const std::size_t end = std::min(text.find_first_of(";\n", from), text.size());
    const std::string part = text.substr(from, end - from);
    if (part.find_first_not_of(" \t\r,") != std::string::npos)
      out.push_back(parse_token_ids(part,
                                    out.empty() && end == text.size()
                                        ? what
                                        : what + " sequence " + std::to_string(out.size()),
                                    vocab));
    from = end + 1;
  }
  return out;
}

bool wants_text(const TextInput& t) {
  return !t.prompt.empty() || !t.prompt_file.empty();
}

std::vector<std::int32_t> encode_prompt(const Tokenizer& tok, const TextInput& t,
                                        const std::string& text, std::int64_t vocab) {
  EncodeOptions o;
  if (t.no_bos) o.bos = false;
  if (t.add_bos) o.bos = true;
  std::vector<std::int32_t> ids = encode(tok, text, o);
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (vocab > 0 && ids[i] >= vocab)
      throw InputError(tok.source + ": token " + std::to_string(ids[i]) + " (index " +
                       std::to_string(i) + ") is outside the model's vocabulary of " +
                       std::to_string(vocab));
  return ids;
}

// The one sequence generate and tokenize --decode take (none: a session continues).
std::vector<std::int32_t> one_sequence(std::vector<std::vector<std::int32_t>> sequences) {
  if (sequences.size() > 1)
    throw InputError("one sequence at a time here, got " + std::to_string(sequences.size()));
  return sequences.empty() ? std::vector<std::int32_t>{} : std::move(sequences.front());
}

// --tokens / --tokens-file as sequences of ids.
std::vector<std::vector<std::int32_t>> id_sequences(const TextInput& t, std::int64_t vocab) {
  if (!t.tokens.empty()) return parse_sequences(t.tokens, "--tokens", vocab);
  if (!t.tokens_file.empty())
    return parse_sequences(read_text_file(t.tokens_file, "tokens file"), escape(t.tokens_file),
                           vocab);
  return {};
}

// Prints the text of the tokens as it grows, holding back an incomplete UTF-8 character
// (a byte token whose continuation has not come yet).
struct TextStream {
  const Tokenizer& tok;
  std::vector<std::int32_t> ids;
  std::size_t printed = 0;  // bytes of decode(ids) already out

  // The bytes of decode(ids) that are final: a trailing U+FFFD may be a split character's start.
  static std::size_t settled(const std::string& text) {
    return text.size() - (text.ends_with("\xEF\xBF\xBD") ? 3 : 0);
  }

  std::string next(std::int32_t id) {
    ids.push_back(id);
    const std::string text = decode(tok, ids, {false, false});
    const std::size_t end = settled(text);
    if (end <= printed) return {};
    std::string out = text.substr(printed, end - printed);
    printed = end;
    return out;
  }
};

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

ModelArgs generate_args(const Options& f, fs::path& config) {
  config = f.config;
  if (config.empty() && !f.weights.empty())
    config = fs::path(f.weights).parent_path() / "config.json";
  if (config.empty())
    throw InputError(
        "generate needs --config (or -m DIR/model.safetensors beside DIR/config.json)");
  ModelArgs args = load_config(config);
  ConfigOverrides o;
  o.max_seq_len = f.overrides.max_seq_len;
  o.max_batch_size = 1;
  apply_overrides(args, o);
  if (args.vocab_size <= 0)
    throw InputError(args.source +
                     ": generate needs a token model (vocab_size > 0, with "
                     "tok_embeddings and output), got vocab_size " +
                     std::to_string(args.vocab_size));
  if (args.model_parallel_size > 1)
    throw InputError(args.source + ": generate runs on one process (model_parallel_size 1)");
  args.tokens_in = args.logits_out = true;
  return args;
}

}  // namespace

std::vector<std::int32_t> parse_token_ids(const std::string& text, const std::string& what,
                                          std::int64_t vocab_size) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  std::vector<std::int32_t> ids;
  if (first != std::string::npos && (text[first] == '[' || text[first] == '{')) {
    try {
      ids = ids_from_json(json::parse(text), what);
    } catch (const json::exception& e) {
      throw InputError(what + ": not valid JSON: " + escape(e.what(), 160));
    }
  } else {
    ids = ids_from_text(text, what);
  }
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (vocab_size > 0 && ids[i] >= vocab_size)
      throw InputError(what + ": token " + std::to_string(ids[i]) + " at index " +
                       std::to_string(i) + " is outside the vocabulary [0, " +
                       std::to_string(vocab_size) + ")");
  return ids;
}

PromptTokens prompt_tokens(const TextInput& t, const std::string& config, std::int64_t vocab) {
  const int kinds =
      !t.prompt.empty() + !t.prompt_file.empty() + !t.tokens.empty() + !t.tokens_file.empty();
  if (kinds > 1)
    throw InputError("give one of --prompt, --prompt-file, --tokens and --tokens-file");
  PromptTokens p;
  p.sequences = id_sequences(t, vocab);
  // Ids need no tokenizer, but one that is named or beside the config labels them.
  const bool beside =
      !config.empty() && fs::exists(fs::path(config).parent_path() / "tokenizer.json");
  if (wants_text(t) || !t.tokenizer.empty() || beside)
    p.tokenizer = load_tokenizer(tokenizer_path(t, config));
  if (!t.prompt_file.empty())
    p.sequences.push_back(
        encode_prompt(*p.tokenizer, t, read_text_file(t.prompt_file, "prompt file"), vocab));
  for (const std::string& text : t.prompt)
    p.sequences.push_back(encode_prompt(*p.tokenizer, t, text, vocab));
  return p;
}

fs::path tokenizer_path(const TextInput& t, const std::string& config) {
  if (!t.tokenizer.empty()) return t.tokenizer;
  if (config.empty()) throw InputError("--tokenizer is needed to read a prompt");
  return fs::path(config).parent_path() / "tokenizer.json";
}

int generate_command(const Options& f) {
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  if (!std::cout) throw std::runtime_error("stdout is closed: the text has nowhere to go");
  const auto t0 = std::chrono::steady_clock::now();
  fs::path config;
  const ModelArgs args = generate_args(f, config);
  // The tokenizer is needed for text; used, if there is one, to print ids as text.
  PromptTokens p = prompt_tokens(f.text, config.string(), args.vocab_size);
  const std::optional<Tokenizer>& tok = p.tokenizer;
  if (tok && tok->vocab_size() > args.vocab_size)
    throw InputError(tok->source + ": " + std::to_string(tok->vocab_size()) +
                     " tokens, more than the model's vocab_size " +
                     std::to_string(args.vocab_size));
  const std::vector<std::int32_t> prompt = one_sequence(std::move(p.sequences));
  if (prompt.empty() && f.load_session.empty())
    throw InputError("generate needs a prompt: --prompt, --prompt-file, --tokens or --tokens-file");
  if (std::int64_t(prompt.size()) + f.run.steps > args.max_seq_len && f.load_session.empty())
    throw InputError("the prompt's " + std::to_string(prompt.size()) + " tokens and " +
                     std::to_string(f.run.steps) + " steps need more than --max-seq-len (-c) " +
                     std::to_string(args.max_seq_len) + " positions");
  if (!f.save_session.empty()) check_output(f.save_session, "session");
  const std::int64_t rows = std::max<std::int64_t>(1, std::int64_t(prompt.size()));
  RunShape shape{1,    std::int64_t(prompt.size()),         f.run.steps,
                 rows, f.threads < 1 ? cores() : f.threads, false};
  shape.compute = parse_compute(f.compute);
  std::optional<WeightsSource> source;  // headers read, nothing mapped: the estimate comes first
  if (!f.weights.empty()) {
    source = open_weights(fs::path(f.weights));
    shape.matrices = matrix_types(args, *source);
  }
  check_memory(memory_parts(args, shape, {}), available_memory(), args.source);
  TransformerWeights w =
      source ? load_weights(args, std::move(*source)) : seeded_weights(args, f.sampling.seed);
  Transformer m = make_transformer(args, std::move(w), rows,
                                   make_runtime(shape.threads, kParallelFlops, "", shape.compute));
  Generation g;
  if (!f.load_session.empty()) load_session(f.load_session, m, g);
  std::vector<std::int32_t> stop = f.ignore_eos || !tok ? std::vector<std::int32_t>{} : tok->eos;
  std::optional<TextStream> stream;  // a loaded session's text was printed by its own run
  if (tok)
    stream.emplace(
        TextStream{*tok, g.tokens, TextStream::settled(decode(*tok, g.tokens, {false, false}))});
  const std::int64_t before = std::int64_t(g.tokens.size());  // a loaded session's positions
  if (f.json) {
    print_config_json(std::cout, args);
  } else if (stream) {
    for (const std::int32_t id : prompt) std::cout << stream->next(id);
  }
  std::cout.flush();
  generate(
      m, g, prompt, f.run.steps, f.sampling, stop, !f.save_session.empty(),
      [&](const Generated& t) {
        const std::string piece = stream ? stream->next(t.id) : std::to_string(t.id) + " ";
        if (f.json && t.step == 0) print_prefill_json(args, prompt, before, g.prompt_seconds);
        if (f.json)
          std::cout << json{{"event", "token"},
                            {"step", t.step + 1},
                            {"id", t.id},
                            {"text", tok ? decode(*tok, {t.id}, {false, false}) : ""},
                            {"top", top_logits(t.logits.data(), std::int64_t(t.logits.size()), 5)}}
                           .dump(-1, ' ', false, json::error_handler_t::replace)
                    << '\n';
        else
          std::cout << piece;
        std::cout.flush();
      });
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (f.json)
    std::cout << json{{"event", "summary"},
                      {"prompt_tokens", g.prompt_tokens},
                      {"prompt_seconds", g.prompt_seconds},
                      {"eval_tokens", g.eval_tokens},
                      {"eval_seconds", g.eval_seconds},
                      {"threads", m.rt.threads},
                      {"blas_core", blas_core()}}
                     .dump()
              << '\n';
  else
    std::cout << '\n';
  std::cout.flush();
  if (!std::cout) throw std::runtime_error("cannot write the text to stdout");
  print_timing(g, total);
  if (!f.save_session.empty()) {
    OutputFile out = stage_session(f.save_session, m, g);
    out.commit();
    spdlog::info("session: {} ({} positions)", escape(f.save_session), g.tokens.size());
  }
  return 0;
}

int tokenize_command(const Options& f) {
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  const Tokenizer tok = load_tokenizer(tokenizer_path(f.text, ""));
  if (f.decode) {
    const std::vector<std::int32_t> ids = one_sequence(id_sequences(f.text, tok.vocab_size()));
    const std::string text = decode(tok, ids, {false, false});
    if (f.json)
      std::cout << json{{"ids", ids}, {"text", text}}.dump() << '\n';
    else
      std::cout << text << '\n';
    return 0;
  }
  if (!wants_text(f.text))
    throw InputError("tokenize needs --prompt or --prompt-file (or --decode --tokens)");
  if (f.text.prompt.size() > 1) throw InputError("one --prompt at a time here");
  const std::string text = f.text.prompt_file.empty()
                               ? f.text.prompt[0]
                               : read_text_file(f.text.prompt_file, "prompt file");
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
