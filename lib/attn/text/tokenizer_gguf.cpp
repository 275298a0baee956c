// A GGUF file's tokenizer: its tokenizer.ggml.* metadata read as llama.cpp's llama_vocab::load
// reads it (defaults by model, ids out of range ignored, the pre-tokenizer by name).
#include "attn/error.hpp"
#include "attn/io/gguf.hpp"
#include "attn/io/text.hpp"
#include "attn/text/llama_vocab.hpp"
#include "attn/text/vocab_checks.hpp"

namespace attn {

namespace {

// The largest real vocabularies hold about 2^18 pieces; ids index tables sized by the count.
constexpr std::size_t kMaxTokens = std::size_t(1) << 22;

[[noreturn]] void fail(const GgufFile& f, std::string_view key, const std::string& what) {
  throw InputError(f.path + ": key '" + std::string(key) + "': " + what);
}

// An element's fault, "FILE: key 'K'[i]: what", when `what` is not empty.
void check_at(const GgufFile& f, std::string_view key, std::size_t i, const std::string& what) {
  if (!what.empty())
    throw InputError(f.path + ": key '" + std::string(key) + "'[" + std::to_string(i) +
                     "]: " + what);
}

std::vector<float> scores(const GgufFile& f, std::size_t n) {
  constexpr std::string_view key = "tokenizer.ggml.scores";
  const GgufValue* v = f.find(key);
  if (!v) return std::vector<float>(n, 0.0f);
  std::vector<float> s;
  if (v->type == GgufValueType::array && v->element == GgufValueType::i32) {
    for (const std::int64_t x : f.integers(key)) s.push_back(float(x));
  } else {
    s = f.floats(key);
  }
  if (s.size() < n)
    fail(f, key, std::to_string(s.size()) + " scores for " + std::to_string(n) + " tokens");
  s.resize(n);
  for (std::size_t i = 0; i < n; ++i) check_at(f, key, i, bad_score(s[i]));
  return s;
}

std::vector<std::uint16_t> attrs(const GgufFile& f, std::size_t n) {
  constexpr std::string_view key = "tokenizer.ggml.token_type";
  if (!f.find(key)) return std::vector<std::uint16_t>(n, token_attr::normal);
  const std::vector<std::int64_t> types = f.integers(key);
  if (types.size() < n)
    fail(f, key, std::to_string(types.size()) + " types for " + std::to_string(n) + " tokens");
  namespace A = token_attr;
  constexpr std::uint16_t by_type[] = {
      0, A::normal, A::unknown, A::control, A::user_defined, A::unused, A::byte};
  std::vector<std::uint16_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    check_at(f, key, i, bad_token_type(types[i]));
    out[i] = by_type[std::size_t(types[i])];
  }
  return out;
}

// A special token's id from its key, or `fallback` when absent or outside the vocabulary
// (llama.cpp warns and keeps its default).
std::int32_t token_id(const GgufFile& f, std::string_view key, std::int32_t fallback,
                      std::size_t n) {
  if (fallback >= 0 && std::size_t(fallback) >= n) fallback = -1;
  const GgufValue* v = f.find(key);
  if (!v || v->type == GgufValueType::array || v->type == GgufValueType::string) return fallback;
  const std::optional<std::int64_t> id = f.integer(key);
  return id && *id >= 0 && std::uint64_t(*id) < n ? std::int32_t(*id) : fallback;
}

// tokenizer.ggml.merges ("left right") as the Bpe's ranked merges, by tokenizer.json's rules.
void read_merges(const GgufFile& f, LlamaVocab& v) {
  constexpr std::string_view key = "tokenizer.ggml.merges";
  if (!f.find(key)) fail(f, key, "is missing (a \"gpt2\" tokenizer needs its merges)");
  const std::vector<std::string_view> merges = f.strings(key);
  v.bpe.merges.reserve(merges.size());
  for (std::size_t r = 0; r < merges.size(); ++r) {
    std::string_view left, right;
    if (!split_merge(merges[r], left, right))
      check_at(f, key, r, "expected \"left right\", got " + quoted(merges[r], 60));
    check_at(f, key, r, add_merge(v.bpe, left, right, std::int32_t(r)));
  }
}

// tokenizer.chat_template (the default), then each tokenizer.chat_template.NAME in file order:
// the named templates (tool_use, rag, ...) llama.cpp's converter writes from tokenizer_config.json,
// read as llama_model_chat_template(model, NAME) reads them.
void read_chat_templates(const GgufFile& f, Tokenizer& t) {
  constexpr std::string_view key = "tokenizer.chat_template";
  if (auto chat = f.string(key)) t.chat_templates.emplace_back("default", *chat);
  for (const auto& [k, value] : f.kv) {
    if (k.size() <= key.size() + 1 || !k.starts_with(key) || k[key.size()] != '.') continue;
    std::string name = k.substr(key.size() + 1);
    if (name == "default") fail(f, k, "\"default\" is tokenizer.chat_template's name");
    t.chat_templates.emplace_back(std::move(name), *f.string(k));
  }
}

}  // namespace

Tokenizer tokenizer_from_gguf(const GgufFile& f) {
  constexpr std::string_view model_key = "tokenizer.ggml.model";
  const std::optional<std::string> model = f.string(model_key);
  if (!model) fail(f, model_key, "is missing: the file holds no tokenizer");
  auto v = std::make_shared<LlamaVocab>();
  const bool spm = *model == "llama";
  if (!spm && *model != "gpt2")
    fail(f, model_key,
         "the tokenizer " + quoted(*model, 60) + " is not supported (\"llama\" or \"gpt2\")");
  v->kind = spm ? LlamaVocab::Kind::spm : LlamaVocab::Kind::bpe;
  constexpr std::string_view tokens_key = "tokenizer.ggml.tokens";
  if (!f.find(tokens_key)) fail(f, tokens_key, "is missing");
  const std::vector<std::string_view> tokens = f.strings(tokens_key);
  if (tokens.empty() || tokens.size() > kMaxTokens)
    fail(f, tokens_key,
         std::to_string(tokens.size()) + " tokens (1 to " + std::to_string(kMaxTokens) + ")");
  const std::size_t n = tokens.size();
  v->pieces.assign(tokens.begin(), tokens.end());
  v->spm.scores = scores(f, n);
  v->attrs = attrs(f, n);
  v->bos = token_id(f, "tokenizer.ggml.bos_token_id", spm ? 1 : 11, n);
  v->eos = token_id(f, "tokenizer.ggml.eos_token_id", spm ? 2 : 11, n);
  v->unk = token_id(f, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, n);
  v->add_bos = spm;
  v->add_space_prefix = spm;
  bool ignore_merges = false;
  if (!spm) {
    constexpr std::string_view pre_key = "tokenizer.ggml.pre";
    const std::string pre = f.string(pre_key).value_or("default");
    if (!set_pre_tokenizer(*v, pre, ignore_merges))
      fail(f, pre_key, "the pre-tokenizer " + quoted(pre, 60) + " is not supported");
    v->splits_where = f.path + ": key '" + std::string(pre_key) + "' (" + quoted(pre, 60) + ")";
  }
  if (const auto b = f.boolean("tokenizer.ggml.add_space_prefix")) v->add_space_prefix = *b;
  if (const auto b = f.boolean("tokenizer.ggml.add_bos_token")) v->add_bos = *b;
  if (const auto b = f.boolean("tokenizer.ggml.add_eos_token")) v->add_eos = *b;
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (const std::int32_t id = token_id(f, key, -1, n); id >= 0) v->eog.push_back(id);
  const std::string name = f.string("general.name").value_or("");
  finish_llama_vocab(*v, name);
  if (!spm) {
    read_merges(f, *v);
    v->bpe.ignore_merges = ignore_merges;
  }
  Tokenizer t = tokenizer_from_vocab(std::move(v), f.path);
  read_chat_templates(f, t);
  return t;
}

}  // namespace attn
