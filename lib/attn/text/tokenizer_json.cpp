// Reading tokenizer.json, tokenizer_config.json and generation_config.json into a Tokenizer.
#include <nlohmann/json.hpp>

#include <algorithm>

#include "attn/error.hpp"
#include "attn/io/detail/json_checks.hpp"
#include "attn/io/files.hpp"
#include "attn/io/text.hpp"
#include "attn/text/added_tokens.hpp"
#include "attn/text/regex.hpp"
#include "attn/text/tokenizer.hpp"
#include "attn/text/unicode.hpp"
#include "attn/text/vocab_checks.hpp"

namespace attn {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// A real vocabulary's file is 2-20 MB (Llama 3's: 9 MB, 280,147 merges, 128,256 pieces).
constexpr std::uint64_t kMaxTokenizerBytes = std::uint64_t(1) << 28;
constexpr JsonLimits kTokenizerLimits{64, std::size_t(1) << 24, std::size_t(1) << 22};
// Ids up to 2^22 (the largest real vocabularies hold about 2^18): a file's ids size the table
// of pieces, so a stray large one must not cost gigabytes.
constexpr std::int64_t kMaxId = std::int64_t(1) << 22;

// A view of one value of the file, for messages naming the key's full path. Every read checks
// the value's type first: a mismatch names the key, never the JSON library's own text.
struct Node {
  const json& j;
  std::string path;  // "model.merges", keys as the file spells them (escaped when printed)
  const std::string& source;

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(source + ": key " + attn::quoted(path) + ": " + what);
  }
  bool has(const std::string& key) const {
    return j.is_object() && j.contains(key) && !j[key].is_null();
  }
  Node at(const std::string& key) const {
    const std::string p = path.empty() ? key : path + "." + key;
    if (!j.is_object()) fail("expected an object");
    if (!has(key)) Node{j, p, source}.fail("is missing");
    return {j[key], p, source};
  }
  // The array's elements (after checking that it is one).
  std::size_t size() const {
    if (!j.is_array()) fail("expected an array, got " + quoted(j.dump(), 60));
    return j.size();
  }
  Node at(std::size_t i) const {
    if (i >= size()) fail("has no element " + std::to_string(i));
    return {j[i], path + "[" + std::to_string(i) + "]", source};
  }
  std::string text() const {
    if (!j.is_string()) fail("expected a string, got " + quoted(j.dump(), 60));
    return j.get<std::string>();
  }
  bool flag(const std::string& key, bool otherwise) const {
    if (!has(key)) return otherwise;
    if (!j[key].is_boolean())
      at(key).fail("expected true or false, got " + quoted(j[key].dump(), 60));
    return j[key].get<bool>();
  }
  std::int64_t integer() const {
    if (!j.is_number_integer() ||
        (j.is_number_unsigned() && j.get<std::uint64_t>() > std::uint64_t(INT64_MAX)))
      fail("expected an integer, got " + quoted(j.dump(), 60));
    return j.get<std::int64_t>();
  }
  std::string type() const { return at("type").text(); }
};

json parse_text(const std::string& text, const std::string& source) {
  check_json_structure(
      text, kTokenizerLimits,
      [&](const JsonStructure&) { throw InputError(source + ": nested too deeply"); },
      [&](const JsonStructure&, const std::string& key) {
        throw InputError(source + ": duplicate key " + quoted(key, 60));
      },
      [&](const JsonStructure&, const std::string& what) {
        throw InputError(source + ": " + what);
      });
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    // The parser's own words ("parse error at line 1, column 1: ..."), not its tag.
    std::string_view what = e.what();
    if (what.starts_with("[json.exception."))
      what.remove_prefix(std::min(what.size(), what.find("] ") + 2));
    throw InputError(source + ": not valid JSON: " + escape(what, 160));
  }
}

json parse_file(const fs::path& path, const std::string& source) {
  return parse_text(read_small_file(path, "tokenizer", kMaxTokenizerBytes), source);
}

std::int32_t checked_id(const Node& n, std::int64_t vocab_limit) {
  const std::int64_t id = n.integer();
  if (id < 0 || id >= vocab_limit)
    n.fail("id " + std::to_string(id) + " is outside [0, " + std::to_string(vocab_limit) + ")");
  return std::int32_t(id);
}

void read_vocab(Tokenizer& t, const Node& model) {
  const Node vocab = model.at("vocab");
  if (!vocab.j.is_object()) vocab.fail("expected an object of piece: id");
  t.bpe.vocab.reserve(vocab.j.size());
  for (const auto& [piece, id] : vocab.j.items()) {
    const std::int32_t i =
        id.is_number_unsigned() && id.get<std::uint64_t>() < std::uint64_t(kMaxId)
            ? id.get<std::int32_t>()
            : checked_id({id, vocab.path + "." + piece, t.source}, kMaxId);
    t.bpe.vocab.emplace(piece, i);
    if (std::size_t(i) >= t.pieces.size()) t.pieces.resize(std::size_t(i) + 1);
    t.pieces[std::size_t(i)] = piece;
  }
}

// A merge as "left right" or [left, right], or false.
bool merge_pair(const json& m, std::string_view& left, std::string_view& right) {
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    left = m[0].get_ref<const std::string&>();
    right = m[1].get_ref<const std::string&>();
    return true;
  }
  return m.is_string() && split_merge(m.get_ref<const std::string&>(), left, right);
}

void read_merges(Tokenizer& t, const Node& model) {
  const Node merges = model.at("merges");
  if (!merges.j.is_array()) merges.fail("expected an array");
  t.bpe.merges.reserve(merges.j.size());
  for (std::size_t r = 0; r < merges.j.size(); ++r) {
    std::string_view left, right;
    if (!merge_pair(merges.j[r], left, right))
      merges.at(r).fail("expected \"left right\" or [left, right], got " +
                        quoted(merges.j[r].dump(), 60));
    if (const std::string what = add_merge(t.bpe, left, right, std::int32_t(r)); !what.empty())
      merges.at(r).fail(what);
  }
}

void read_model(Tokenizer& t, const Node& model) {
  if (model.type() != "BPE")
    model.at("type").fail("only \"BPE\" models are supported, got " + quoted(model.type(), 60));
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.has(key) && !model.at(key).text().empty()) model.at(key).fail("is not supported");
  read_vocab(t, model);
  read_merges(t, model);
  t.bpe.byte_fallback = model.flag("byte_fallback", false);
  t.bpe.fuse_unk = model.flag("fuse_unk", false);
  t.bpe.ignore_merges = model.flag("ignore_merges", false);
  if (model.has("unk_token")) t.bpe.unk = t.bpe.find(model.at("unk_token").text());
  char name[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    t.bpe.bytes[std::size_t(b)] = t.bpe.find(name);
  }
}

void read_added(Tokenizer& t, const Node& list) {
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Node a = list.at(i);
    AddedToken tok{a.at("content").text(),   checked_id(a.at("id"), kMaxId),
                   a.flag("special", false), a.flag("lstrip", false),
                   a.flag("rstrip", false),  a.flag("single_word", false)};
    if (tok.content.empty()) a.at("content").fail("is empty");
    if (std::size_t(tok.id) >= t.pieces.size()) t.pieces.resize(std::size_t(tok.id) + 1);
    t.pieces[std::size_t(tok.id)] = tok.content;
    t.added.push_back(std::move(tok));
  }
  std::stable_sort(t.added.begin(), t.added.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  t.special.assign(t.pieces.size(), false);
  for (const AddedToken& a : t.added) t.special[std::size_t(a.id)] = a.special;
}

std::string pattern_text(const Node& step, bool& is_regex) {
  const Node p = step.at("pattern");
  is_regex = p.has("Regex");
  if (is_regex) return p.at("Regex").text();
  return p.at("String").text();
}

// A String pattern matched literally by the regex engine: every character escaped.
std::string escaped_pattern(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}-/").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

TextStep::Behavior behavior(const Node& step) {
  const std::string b = step.at("behavior").text();
  if (b == "Isolated") return TextStep::Behavior::isolated;
  if (b == "Removed") return TextStep::Behavior::removed;
  if (b == "MergedWithPrevious") return TextStep::Behavior::merged_with_previous;
  if (b == "MergedWithNext") return TextStep::Behavior::merged_with_next;
  if (b == "Contiguous") return TextStep::Behavior::contiguous;
  step.at("behavior").fail("unknown behavior " + quoted(b, 60));
}

TextStep::Scheme scheme(const Node& step) {
  if (!step.has("prepend_scheme"))
    return step.flag("add_prefix_space", true) ? TextStep::Scheme::always : TextStep::Scheme::never;
  const std::string s = step.at("prepend_scheme").text();
  if (s == "always") return TextStep::Scheme::always;
  if (s == "first") return TextStep::Scheme::first;
  if (s == "never") return TextStep::Scheme::never;
  step.at("prepend_scheme").fail("unknown scheme " + quoted(s, 60));
}

// ByteLevel's own split (use_regex): GPT-2's pattern, compiled once.
std::shared_ptr<const Regex> gpt2_regex() {
  static const auto re = std::make_shared<const Regex>(
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", "attn-cli",
      "GPT-2's pattern");
  return re;
}

// The three lists of steps, and which steps each runs (tokenizer.cpp's normalize, pre_tokenize
// and run_decoder): a step in another list is refused, naming its key, not skipped.
enum List { kNormalizer, kPreTokenizer, kDecoder };
constexpr const char* kListNames[] = {"normalizer", "pre-tokenizer", "decoder"};

struct StepType {
  const char* name;
  TextStep::Kind kind;
  bool in[3];  // normalizer, pre-tokenizer, decoder
};
constexpr StepType kStepTypes[] = {
    {"Prepend", TextStep::Kind::prepend, {true, false, false}},
    {"Replace", TextStep::Kind::replace, {true, false, true}},
    {"Split", TextStep::Kind::split, {false, true, false}},
    {"ByteLevel", TextStep::Kind::byte_level, {false, true, true}},
    {"Metaspace", TextStep::Kind::metaspace, {false, true, true}},
    {"ByteFallback", TextStep::Kind::byte_fallback, {false, false, true}},
    {"Fuse", TextStep::Kind::fuse, {false, false, true}},
    {"Strip", TextStep::Kind::strip, {false, false, true}},
};

TextStep::Kind step_kind(const Node& n, List list) {
  const std::string type = n.type();
  const char* what = kListNames[list];
  for (const StepType& st : kStepTypes) {
    if (type != st.name) continue;
    if (!st.in[list]) n.at("type").fail(quoted(type, 60) + " cannot be a " + what);
    return st.kind;
  }
  n.at("type").fail(std::string("the ") + what + " " + quoted(type, 60) + " is not supported");
}

TextStep read_step(const Node& n, List list) {
  using K = TextStep::Kind;
  TextStep s{};
  s.kind = step_kind(n, list);
  s.where = n.source + ": key " + attn::quoted(n.path);
  if (s.kind == K::prepend) {
    s.text = n.at("prepend").text();
  } else if (s.kind == K::replace) {
    bool is_regex = false;
    s.text = pattern_text(n, is_regex);
    s.content = n.at("content").text();
    if (is_regex) n.at("pattern").fail("a Regex pattern is not supported here, only a String");
  } else if (s.kind == K::split) {
    bool is_regex = false;
    const std::string p = pattern_text(n, is_regex);
    s.where = n.source + ": key " + attn::quoted(n.path + ".pattern");
    s.regex = std::make_shared<Regex>(is_regex ? p : escaped_pattern(p), n.source,
                                      "key " + attn::quoted(n.path + ".pattern"));
    s.behavior = behavior(n);
    s.invert = n.flag("invert", false);
  } else if (s.kind == K::byte_level) {
    s.add_prefix_space = n.flag("add_prefix_space", true);
    s.use_regex = n.flag("use_regex", true);
    if (s.use_regex) s.regex = gpt2_regex();
    s.where += " (ByteLevel's GPT-2 pattern)";
  } else if (s.kind == K::metaspace) {
    s.text = n.at("replacement").text();
    // Hugging Face's replacement is one character; an empty one would never advance a search.
    if (s.text.empty()) n.at("replacement").fail("must be a character, got an empty string");
    std::size_t end = 0;  // more would multiply the text by its length
    next_code_point(s.text, end);
    if (end != s.text.size())
      n.at("replacement").fail("must be one character, got " + quoted(s.text, 60));
    s.scheme = scheme(n);
    s.split_words = n.flag("split", true);
  } else if (s.kind == K::strip) {
    s.content = n.at("content").text();
    s.start = n.at("start").integer();
    s.stop = n.at("stop").integer();
  }
  return s;
}

void read_steps(const Node& n, List list, std::vector<TextStep>& out) {
  if (n.j.is_null()) return;
  if (n.type() != "Sequence") {
    out.push_back(read_step(n, list));
    return;
  }
  const Node steps = n.at(list == kNormalizer     ? "normalizers"
                          : list == kPreTokenizer ? "pretokenizers"
                                                  : "decoders");
  for (std::size_t i = 0; i < steps.size(); ++i) read_steps(steps.at(i), list, out);
}

std::int32_t token_id(const Tokenizer& t, const std::string& piece) {
  for (const AddedToken& a : t.added)
    if (a.content == piece) return a.id;
  return t.bpe.find(piece);
}

void read_template(Tokenizer& t, const Node& p) {
  const Node single = p.at("single");
  const Node special = p.at("special_tokens");
  bool before = true;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const Node item = single.at(i);
    if (item.has("Sequence")) {
      before = false;
      continue;
    }
    const Node ids = special.at(item.at("SpecialToken").at("id").text()).at("ids");
    for (std::size_t k = 0; k < ids.size(); ++k)
      (before ? t.prefix : t.suffix).push_back(checked_id(ids.at(k), t.vocab_size()));
  }
}

void read_post_processor(Tokenizer& t, const Node& p) {
  if (p.j.is_null()) return;
  const std::string type = p.type();
  if (type == "Sequence") {
    const Node list = p.at("processors");
    for (std::size_t i = 0; i < list.size(); ++i) read_post_processor(t, list.at(i));
  } else if (type == "TemplateProcessing") {
    read_template(t, p);
  } else if (type != "ByteLevel") {  // ByteLevel's post-processing changes offsets, not ids
    p.at("type").fail("the post-processor " + quoted(type, 60) + " is not supported");
  }
}

// bos_token / eos_token: a string, or an AddedToken object with its content.
std::int32_t named_token(const Tokenizer& t, const Node& cfg, const char* key) {
  if (!cfg.has(key)) return -1;
  const Node n = cfg.at(key);
  const std::string piece = n.j.is_object() ? n.at("content").text() : n.text();
  const std::int32_t id = token_id(t, piece);
  if (id < 0) n.fail("names " + quoted(piece, 60) + ", which the vocabulary lacks");
  return id;
}

// chat_template: one template, or a list of {"name", "template"} (transformers' named templates).
void read_chat_templates(Tokenizer& t, const Node& n) {
  if (!n.j.is_array()) {
    t.chat_templates.emplace_back("default", n.text());
    return;
  }
  for (std::size_t i = 0; i < n.size(); ++i) {
    const Node entry = n.at(i);
    std::string name = entry.at("name").text();
    const auto where = name == "default" ? t.chat_templates.begin() : t.chat_templates.end();
    t.chat_templates.emplace(where, std::move(name), entry.at("template").text());
  }
}

void read_config(Tokenizer& t, const fs::path& dir) {
  const fs::path cfg_path = dir / "tokenizer_config.json";
  if (fs::is_regular_file(cfg_path)) {
    const std::string source = escape(cfg_path.string());
    const json j = parse_file(cfg_path, source);
    if (!j.is_object()) throw InputError(source + ": expected a JSON object");
    const Node cfg{j, "", source};
    t.bos = named_token(t, cfg, "bos_token");
    if (const std::int32_t eos = named_token(t, cfg, "eos_token"); eos >= 0) t.eos.push_back(eos);
    t.clean_up_spaces = cfg.flag("clean_up_tokenization_spaces", false);
    if (cfg.has("add_bos_token")) t.add_bos = cfg.flag("add_bos_token", false);
    if (cfg.has("add_eos_token")) t.add_eos = cfg.flag("add_eos_token", false);
    if (cfg.has("chat_template")) read_chat_templates(t, cfg.at("chat_template"));
  }
  const fs::path gen_path = dir / "generation_config.json";
  if (!fs::is_regular_file(gen_path)) return;
  const std::string source = escape(gen_path.string());
  const json j = parse_file(gen_path, source);
  if (!j.is_object()) throw InputError(source + ": expected a JSON object");
  const Node gen{j, "", source};
  if (!gen.has("eos_token_id")) return;
  const Node e = gen.at("eos_token_id");
  t.eos.clear();
  if (e.j.is_array())
    for (std::size_t i = 0; i < e.size(); ++i) t.eos.push_back(checked_id(e.at(i), t.vocab_size()));
  else
    t.eos.push_back(checked_id(e, t.vocab_size()));
}

// The space mark ("▁") of a file without a pre-tokenizer that puts it only at the start of pieces.
std::string word_start(const Tokenizer& t) {
  std::string mark;
  for (const TextStep& st : t.normalizer)
    if (st.kind == TextStep::Kind::replace && st.text == " ") mark = st.content;
  if (mark.empty() || !t.pre_tokenizer.empty()) return {};
  for (const auto& [piece, id] : t.bpe.vocab)
    for (std::size_t k = piece.find(mark, 1); k != std::string::npos; k = piece.find(mark, k + 1))
      if (!follows(piece, k, mark)) return {};
  return mark;
}

void read_tokenizer(Tokenizer& t, const json& j) {
  const Node root{j, "", t.source};
  if (!j.is_object()) root.fail("expected an object");
  read_model(t, root.at("model"));
  if (root.has("added_tokens")) read_added(t, root.at("added_tokens"));
  t.special.resize(t.pieces.size(), false);
  if (root.has("normalizer")) read_steps(root.at("normalizer"), kNormalizer, t.normalizer);
  if (root.has("pre_tokenizer"))
    read_steps(root.at("pre_tokenizer"), kPreTokenizer, t.pre_tokenizer);
  if (root.has("decoder")) read_steps(root.at("decoder"), kDecoder, t.decoder);
  if (root.has("post_processor")) read_post_processor(t, root.at("post_processor"));
}

void finish(Tokenizer& t) {
  if (t.bos < 0 && !t.prefix.empty()) t.bos = t.prefix.front();  // the template's first token
  t.word_start = word_start(t);
  t.added_index = std::make_shared<const AddedTokenIndex>(t.added);
}

}  // namespace

Tokenizer parse_tokenizer(const std::string& json_text, const std::string& source) {
  Tokenizer t;
  t.source = source;
  try {
    read_tokenizer(t, parse_text(json_text, source));
  } catch (const json::exception&) {  // every read checks its type: a bug, still the file's
    throw InputError(source + ": a value of an unexpected type");
  }
  finish(t);
  return t;
}

Tokenizer load_tokenizer_json(const fs::path& path) {
  Tokenizer t;
  t.source = escape(path.string());
  try {
    read_tokenizer(t, parse_file(path, t.source));
    read_config(t, path.parent_path());
  } catch (const json::exception&) {  // every read checks its type: a bug, still the file's
    throw InputError(t.source + ": a value of an unexpected type");
  }
  finish(t);
  return t;
}

}  // namespace attn
