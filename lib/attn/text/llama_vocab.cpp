#include "attn/text/llama_vocab.hpp"

#include <algorithm>
#include <cctype>

#include "attn/text/added_tokens.hpp"
#include "attn/text/regex.hpp"
#include "attn/text/unicode.hpp"

namespace attn {

namespace {

namespace A = token_attr;
using Kind = LlamaVocab::Kind;

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // "▁", SentencePiece's space

// A piece of the input: text [begin, begin + size), or one matched token (id >= 0).
struct Fragment {
  std::size_t begin, size;
  std::int32_t id = -1;
};

bool is_space(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}

// The text cut at its typed tokens, each taking the spaces its lstrip/rstrip ask for: in one
// pass however many there are (AddedTokenIndex), leftmost first and the longest at a start, the
// lowest id of equal pieces. llama.cpp's tokenizer_st_partition instead lets each token in turn
// (longest first) cut every fragment, one scan of the text per token: the same cuts unless two
// tokens overlap in the text, the shorter one starting first ("ab" and "bcd" in "abcd": "ab" here,
// "bcd" there).
std::vector<Fragment> partition(const LlamaVocab& v, std::string_view text, bool parse_special) {
  std::vector<Fragment> frags;
  const AddedTokenIndex* index = parse_special ? v.special_index.get() : v.user_index.get();
  const std::vector<std::int32_t>& ids = parse_special ? v.specials : v.user_specials;
  std::size_t from = 0;
  if (index) {
    for (const auto& [at, k] : index->longest_at(text)) {
      if (at < from) continue;  // inside a token taken, or the spaces it took
      const std::int32_t id = ids[std::size_t(k)];
      const std::uint16_t attr = v.attrs[std::size_t(id)];
      std::size_t left = at;
      if (attr & A::lstrip)
        while (left > from && is_space(text[left - 1])) --left;
      if (left > from) frags.push_back({from, left - from});
      frags.push_back({at, v.pieces[std::size_t(id)].size(), id});
      from = at + v.pieces[std::size_t(id)].size();
      if (attr & A::rstrip)
        while (from < text.size() && is_space(text[from])) ++from;
    }
  }
  if (from < text.size()) frags.push_back({from, text.size() - from});
  return frags;
}

// llama.cpp's unicode_cpts_from_utf8 and back: a byte that does not start a well-formed
// sequence becomes U+FFFD. (llama.cpp also lets overlong forms and surrogates through; these
// become U+FFFD here, so the regular expressions only ever see valid UTF-8.)
std::string llama_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    // The length the first byte announces (0: not a first byte), if its continuations follow.
    std::size_t n = c < 0x80 ? 1 : c < 0xC0 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF8 ? 4 : 0;
    for (std::size_t k = 1; k < n; ++k)
      if (i + k >= s.size() || (static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) n = 0;
    const std::string_view seq = s.substr(i, std::max<std::size_t>(n, 1));
    // One replacement for a sequence llama.cpp decodes as one code point, one per other byte.
    out.append(n > 0 && valid_utf8(seq) == seq ? seq : "\xEF\xBF\xBD");
    i += seq.size();
  }
  return out;
}

// The pre-tokenizer's words: each expression in turn splits every word into its matches and
// the text between them (llama.cpp's unicode_regex_split), then GPT-2's byte map.
std::vector<std::string> bpe_words(const LlamaVocab& v, const std::string& text) {
  std::vector<std::pair<std::size_t, std::size_t>> spans = {{0, text.size()}};
  RegexBudget budget(text.size());  // every search of this text, every expression
  for (const auto& re : v.splits) {
    std::vector<std::pair<std::size_t, std::size_t>> next;
    for (const auto& [b, e] : spans) {
      std::size_t at = b;
      for (const auto& [mb, me] :
           re->find_all(std::string_view(text).substr(b, e - b), budget, v.splits_where)) {
        if (b + mb > at) next.emplace_back(at, b + mb);
        next.emplace_back(b + mb, b + me);
        at = b + me;
      }
      if (e > at) next.emplace_back(at, e);
    }
    spans = std::move(next);
  }
  std::vector<std::string> words;
  words.reserve(spans.size());
  for (const auto& [b, e] : spans) {
    std::string w;
    for (std::size_t k = b; k < e; ++k) w += byte_to_unicode(static_cast<unsigned char>(text[k]));
    words.push_back(std::move(w));
  }
  return words;
}

void encode_text(const LlamaVocab& v, std::string_view text, bool prefix,
                 std::vector<std::int32_t>& ids) {
  if (v.kind == Kind::bpe) {
    for (const std::string& w : bpe_words(v, llama_utf8(text))) v.bpe.encode_word(w, ids);
    return;
  }
  std::string s = prefix ? " " : "";
  s.append(text);
  if (v.kind == Kind::spm) replace_all(s, " ", kSpaceMark);
  v.spm.encode(s, ids);
}

int hex_digit(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                : -1;
}

// A byte token's byte, from the hex digits of its "<0xNN>" (strtol, as token_to_byte).
char token_byte(const std::string& piece) {
  int b = 0;
  for (std::size_t k = 3; k < 5 && k < piece.size() && hex_digit(piece[k]) >= 0; ++k)
    b = b * 16 + hex_digit(piece[k]);
  return char(b);
}

// llama_decode_text: GPT-2's printable characters back to bytes. A character outside GPT-2's
// map stands for itself (its UTF-8 bytes), so the text is never longer than the piece;
// llama.cpp writes "[UNK_BYTE_0x<hex>" + the whole piece + "]" for each such character instead,
// which for a piece of n of them is n times the piece (90 KB of CJK: 2.7 GB).
std::string from_byte_level(const std::string& piece) {
  std::string out;
  out.reserve(piece.size());
  for (std::size_t i = 0; i < piece.size();) {
    const std::size_t at = i;
    const int b = unicode_to_byte(next_code_point(piece, i));
    if (b >= 0)
      out += char(b);
    else
      out.append(piece, at, i - at);
  }
  return out;
}

// detokenize's clean-up for BPE vocabularies: no space before ? ! . , ; " ' " -> "'"; no space
// before 's 'm 're 've.
void clean_spaces(std::string& t) {
  std::string out;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const char x = t[i];
    if (i > 0 && t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) out.pop_back();
    out += x;
  }
  t.swap(out);
  out.clear();
  for (std::size_t i = 0; i < t.size(); ++i) {
    const char x = t[i];
    if (i > 0 && x == '\'' && i + 1 < t.size() && t[i - 1] == ' ' && t[i + 1] == ' ') {
      out.pop_back();
      out += x;
      ++i;  // and the space after it
      continue;
    }
    out += x;
  }
  t.swap(out);
  out.clear();
  for (std::size_t i = 0; i < t.size(); ++i) {
    const char x = t[i];
    if (i > 0 && t[i - 1] == ' ' && x == '\'' && i + 1 < t.size()) {
      const char x1 = t[i + 1];
      const char x2 = i + 2 < t.size() ? t[i + 2] : '\0';
      if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e'))
        out.pop_back();
    }
    out += x;
  }
  t.swap(out);
}

std::string run_c_piece(const LlamaVocab& v, std::int32_t prev, std::int32_t id) {
  std::string piece = v.pieces[std::size_t(id)];
  if (prev == 1 && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
  if (v.attrs[std::size_t(id)] & A::byte) return std::string(1, token_byte(piece));
  return piece;
}

}  // namespace

std::vector<std::int32_t> llama_tokenize(const LlamaVocab& v, std::string_view text,
                                         bool add_special, bool parse_special) {
  std::vector<std::int32_t> ids;
  if (add_special && v.add_bos && v.bos >= 0) ids.push_back(v.bos);
  if (v.kind == Kind::llama2c) {
    text = text.substr(0, text.find('\0'));  // run.c reads a C string
    if (!text.empty()) encode_text(v, text, true, ids);
  } else {
    bool after_special = true;  // the first text fragment gets the space prefix too
    for (const Fragment& f : partition(v, text, parse_special)) {
      if (f.id >= 0) {
        ids.push_back(f.id);
        after_special = true;
        continue;
      }
      encode_text(v, text.substr(f.begin, f.size), v.add_space_prefix && after_special, ids);
      after_special = false;
    }
  }
  if (add_special && v.add_eos && v.eos >= 0) ids.push_back(v.eos);
  return ids;
}

std::string llama_token_to_piece(const LlamaVocab& v, std::int32_t id, bool special) {
  const std::uint16_t attr = v.attrs[std::size_t(id)];
  const std::string& piece = v.pieces[std::size_t(id)];
  if (!special && (attr & (A::unknown | A::control))) return {};
  if (attr & (A::unknown | A::control | A::user_defined)) return piece;
  if (attr & A::normal) {
    if (v.kind == Kind::bpe) return from_byte_level(piece);
    std::string s = piece;
    if (v.kind == Kind::spm) replace_all(s, kSpaceMark, " ");
    return s;
  }
  if (attr & A::byte) return std::string(1, token_byte(piece));
  return {};
}

std::string llama_detokenize(const LlamaVocab& v, const std::vector<std::int32_t>& ids,
                             bool remove_special, bool unparse_special, bool clean) {
  std::string text;
  if (v.kind == Kind::llama2c) {  // run.c's decode: no space after BOS, bytes as bytes
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::uint16_t attr = v.attrs[std::size_t(ids[i])];
      if (!unparse_special && (attr & (A::unknown | A::control))) continue;
      text += run_c_piece(v, i ? ids[i - 1] : -1, ids[i]);
    }
    return text;
  }
  std::size_t first = 0, last = ids.size();
  bool remove_space = v.add_space_prefix;
  if (remove_special && v.add_bos && last > first && ids[first] == v.bos) {
    remove_space = false;
    ++first;
  }
  if (remove_special && v.add_eos && last > first && ids[last - 1] == v.eos) --last;
  for (std::size_t i = first; i < last; ++i) {
    std::string piece = llama_token_to_piece(v, ids[i], unparse_special);
    if (remove_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    remove_space = false;
    text += piece;
  }
  if (clean) clean_spaces(text);
  return text;
}

namespace {

// The tokens llama.cpp recognises by their text (llama-vocab.cpp, "auto-detect special
// tokens"): each id it picks becomes a control token.
constexpr const char* kEot[] = {
    "<|eot_id|>",        "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>",   "<EOT>",      "_<EOT>",  "[EOT]",         "<｜end▁of▁sentence｜>",
    "<end_of_utterance>"};
constexpr const char* kEom[] = {"<|eom_id|>"};
constexpr const char* kFimPre[] = {"<|fim_prefix|>",  "<fim-prefix>", "<fim_prefix>",
                                   "<｜fim▁begin｜>", "<PRE>",        "▁<PRE>",
                                   "<|code_prefix|>", "<|prefix|>"};
constexpr const char* kFimSuf[] = {"<|fim_suffix|>",  "<fim-suffix>", "<fim_suffix>",
                                   "<｜fim▁hole｜>",  "<SUF>",        "▁<SUF>",
                                   "<|code_suffix|>", "<|suffix|>"};
constexpr const char* kFimMid[] = {"<|fim_middle|>",  "<fim-middle>", "<fim_middle>",
                                   "<｜fim▁end｜>",   "<MID>",        "▁<MID>",
                                   "<|code_middle|>", "<|middle|>"};
constexpr const char* kFimPad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr const char* kFimRep[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                                   "<reponame>"};
constexpr const char* kFimSep[] = {"<|file_sep|>"};
// Every token with one of these texts ends a generation (and is made a control token).
constexpr const char* kEog[] = {"<|eot_id|>",
                                "<|im_end|>",
                                "<|end|>",
                                "<|return|>",
                                "<|call|>",
                                "<|flush|>",
                                "<|calls|>",
                                "<end_of_turn>",
                                "<|endoftext|>",
                                "</s>",
                                "<|eom_id|>",
                                "<EOT>",
                                "_<EOT>",
                                "[EOT]",
                                "[EOS]",
                                "<|end_of_text|>",
                                "<end_of_utterance>",
                                "<eos>",
                                "<turn|>",
                                "<|tool_response>",
                                "<｜end▁of▁sentence｜>",
                                "[e~["};

template <std::size_t N>
std::int32_t first_named(const LlamaVocab& v, const char* const (&names)[N]) {
  std::int32_t best = -1;
  for (const char* n : names)
    if (const std::int32_t id = v.spm.find(n); id >= 0 && (best < 0 || id < best)) best = id;
  return best;
}

// The matchers of the typed tokens (empty pieces never match; run.c parses none).
void make_matchers(LlamaVocab& v) {
  v.user_specials.clear();
  v.special_index = v.user_index = nullptr;
  if (v.kind == Kind::llama2c) return;
  std::vector<std::string_view> all, user;
  for (const std::int32_t id : v.specials) {
    const std::string_view piece = v.pieces[std::size_t(id)];
    all.push_back(piece);
    if (!(v.attrs[std::size_t(id)] & (A::control | A::unknown))) {
      user.push_back(piece);
      v.user_specials.push_back(id);
    }
  }
  if (!all.empty()) v.special_index = std::make_shared<const AddedTokenIndex>(all);
  if (!user.empty()) v.user_index = std::make_shared<const AddedTokenIndex>(user);
}

void add_eog(LlamaVocab& v, std::int32_t id) {
  if (id >= 0 && std::find(v.eog.begin(), v.eog.end(), id) == v.eog.end()) v.eog.push_back(id);
}

}  // namespace

void finish_llama_vocab(LlamaVocab& v, const std::string& model_name) {
  const std::size_t n = v.pieces.size();
  v.attrs.resize(n, A::normal);
  v.spm.scores.resize(n, 0.0f);
  v.spm.vocab.clear();
  v.spm.vocab.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (v.pieces[i].empty() && v.kind != Kind::llama2c)
      v.pieces[i] = "[EMPTY_" + std::to_string(i) + "]";
    // A repeated piece keeps the last id (llama.cpp aborts on one).
    v.spm.vocab[v.pieces[i]] = std::int32_t(i);
  }
  char name[] = "<0x00>";  // byte b's piece, written without snprintf (256 calls per load)
  for (int b = 0; b < 256; ++b) {
    name[3] = "0123456789ABCDEF"[b >> 4];
    name[4] = "0123456789ABCDEF"[b & 15];
    std::int32_t id = v.spm.find(name);
    if (id < 0 && v.kind != Kind::llama2c) id = v.spm.find(std::string(1, char(b)));
    v.spm.bytes[std::size_t(b)] = id;
  }
  v.spm.unk = v.unk;
  v.spm.run_c = v.kind == Kind::llama2c;
  if (v.kind == Kind::bpe) {
    v.bpe.vocab = v.spm.vocab;
    v.bpe.bytes.fill(-1);
  }
  // Control by name, and the ids that end a generation.
  const auto control = [&](std::int32_t id) {
    if (id >= 0) v.attrs[std::size_t(id)] |= A::control;
  };
  std::int32_t eot = -1;
  if (v.kind != Kind::llama2c) {
    for (const std::int32_t id :
         {eot = first_named(v, kEot), first_named(v, kEom), first_named(v, kFimPre),
         first_named(v, kFimSuf), first_named(v, kFimMid)})
      control(id);
    for (const std::int32_t id :
         {first_named(v, kFimPad), first_named(v, kFimRep), first_named(v, kFimSep)}) {
      control(id);
      add_eog(v, id);
    }
    for (const char* name : kEog)
      if (const std::int32_t id = v.spm.find(name); id >= 0) {
        control(id);
        add_eog(v, id);
      }
    for (const char* name : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})
      if (const std::int32_t id = v.spm.find(name); id >= 0)
        v.attrs[std::size_t(id)] = A::user_defined;
  }
  add_eog(v, v.eos);
  add_eog(v, eot);
  v.specials.clear();
  for (std::size_t i = 0; i < n; ++i)
    if (v.attrs[i] & (A::control | A::user_defined | A::unknown))
      v.specials.push_back(std::int32_t(i));
  std::stable_sort(v.specials.begin(), v.specials.end(), [&](std::int32_t a, std::int32_t b) {
    return v.pieces[std::size_t(a)].size() > v.pieces[std::size_t(b)].size();
  });
  // Phi-3's special tokens take the spaces after them (llama.cpp sets it by the model's name).
  std::string lower = model_name;
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("phi-3") != std::string::npos || lower.find("phi3") != std::string::npos) {
    for (const std::int32_t id : v.specials) v.attrs[std::size_t(id)] |= A::rstrip;
    if (const std::int32_t id = v.spm.find("</s>"); id >= 0) v.attrs[std::size_t(id)] |= A::rstrip;
    for (const char* t : {"<unk>", "<s>", "<|endoftext|>"})
      if (const std::int32_t id = v.spm.find(t); id >= 0)
        v.attrs[std::size_t(id)] &= std::uint16_t(~A::rstrip);
  }
  make_matchers(v);
}

namespace {

// llama.cpp's pre-tokenizer expressions (llm_tokenizer_bpe in src/llama-vocab.cpp), written for
// Oniguruma. Where llama.cpp runs its own code for an expression (unicode_regex_split_custom:
// GPT-2's, Llama 3's, Qwen2's, Qwen3.5's, "[^\n]+|[\n]+") the expression here is what that code
// does: GPT-2's gains its last `\s+`. Elsewhere llama.cpp runs std::regex on the text with each
// non-ASCII code point collapsed to one byte per Unicode category: its \p{Lu}, \p{Ll}, \p{Lt},
// \p{Lm} and \p{Lo} each match every letter (written \p{L} here), and its `(?=[\p{L}])([^a-z])`
// is "a letter other than a-z", as Oniguruma reads it on the real text.
#define ATTN_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3 = ATTN_CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 = ATTN_CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen35 = ATTN_CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kJais2 = ATTN_CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+)"
    R"(|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S))"
    R"(|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})";
constexpr const char* kMiniCpm5 = ATTN_CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kSeedCoder = ATTN_CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kExaoneMoe = ATTN_CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?)"
    R"(|\s*[\r\n]|\s+(?!\S)|\s+)";
constexpr const char* kBailing =
    R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
constexpr const char* kUfakzeka =
    R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Mistral's Tekken and GPT-4o's: a word's upper-case run then its lower-case one.
#define ATTN_UPPER_LOWER(L) "[^\\r\\n\\p{L}\\p{N}]?((?=[" L "])([^a-z]))*((?=[" L "])([^A-Z]))+"
#define ATTN_UPPER_THEN(L) "[^\\r\\n\\p{L}\\p{N}]?((?=[" L "])([^a-z]))+((?=[" L "])([^A-Z]))*"
constexpr const char* kTekken = ATTN_UPPER_LOWER("\\p{L}") "|" ATTN_UPPER_THEN(
    "\\p{L}") R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kGpt4o =
    ATTN_UPPER_LOWER("\\p{L}") ATTN_CONTRACTIONS "?|" ATTN_UPPER_THEN("\\p{L}") ATTN_CONTRACTIONS
    R"(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kGraniteEmbMulti =
    ATTN_UPPER_LOWER("\\p{L}\\p{M}") ATTN_CONTRACTIONS "?|" ATTN_UPPER_THEN("\\p{L}\\p{M}")
        ATTN_CONTRACTIONS R"(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
#undef ATTN_UPPER_LOWER
#undef ATTN_UPPER_THEN
// Youtu's: Tekken's words with GPT-4o's contractions, single digits, \p{Lu} etc. as llama.cpp
// reads them (every letter).
constexpr const char* kYoutu = R"([^\r\n\p{L}\p{N}]?[\p{L}\p{M}]*[\p{L}\p{M}]+)" ATTN_CONTRACTIONS
                               R"(?|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+[\p{L}\p{M}]*)" ATTN_CONTRACTIONS
                               R"(?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
#undef ATTN_CONTRACTIONS
// DeepSeek V3's: ASCII punctuation opening a word, letters with their marks.
constexpr const char* kDeepseek3 =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)"
    R"(| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kSpark =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)"
    R"(| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)";
// Non-ASCII ranges escaped as llama.cpp writes them (no normalization of the source).
constexpr const char* kHanKana = "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+";
constexpr const char* kBloom = " ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+";
constexpr const char* kYoutuCjk =
    "[\uAC00-\uD7A3\u3131-\u318E]+|[\uFF01\u2026\u201C\u201D\u2018\u2019\u2014\uFF1A\uFF1B"
    "\uFF0C\u3001-\u303F\uFE30-\uFE4F]+|[\u3105-\u312F]+|[\u4E00-\u9FA5\u3040-\u309F\u30A0-"
    "\u30FF]+";

// One row per group of tokenizer.ggml.pre values llama.cpp treats alike (llama_vocab::impl::
// load): its expressions and the flags it sets with them. Values llama.cpp reads with more than
// expressions (its own digit and Han splitters, SEP tokens, "▁" for spaces without GPT-2's byte
// map, empty matches) have no row: refused, named, as an unknown value is.
struct PreTokenizer {
  std::vector<std::string_view> names;
  std::vector<const char*> regexes;
  bool ignore_merges = false;  // a word that is a piece is that piece, unmerged
  bool clean_spaces = true;    // detokenize drops " " before . , ! ? and such
  bool add_bos = false;
  bool no_bos = false;  // ChatGLM's: no BOS token at all
};

const std::vector<PreTokenizer>& pre_tokenizers() {
  static const std::vector<PreTokenizer> table = {
      {.names = {"default"},
       .regexes = {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {.names = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
                 "lfm2", "jina-v5-nano"},
       .regexes = {kLlama3},
       .ignore_merges = true,
       .add_bos = true},
      {.names = {"dbrx", "smaug-bpe"}, .regexes = {kLlama3}},
      {.names = {"glm4", "chatglm-bpe"}, .regexes = {kLlama3}, .no_bos = true},
      {.names = {"jais-2"}, .regexes = {kJais2}},
      {.names = {"minicpm5"}, .regexes = {R"(\p{N}{1,3})", kMiniCpm5}, .ignore_merges = true},
      {.names = {"deepseek-llm"},
       .regexes =
           {
               "[\r\n]",
               "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-"
               "\u0293\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-"
               "\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556"
               "\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B"
               "\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D"
               "\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE"
               "\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4"
               "\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128"
               "\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184"
               "\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B"
               "\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17"
               "\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-"
               "\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF"
               "\U0001E900-\U0001E943]+",
               "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+",
               "\\s+$",
               "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+",
               "\\p{N}+",
           },
       .clean_spaces = false},
      {.names = {"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
       .regexes = {R"(\p{N}{1,3})", kHanKana, kDeepseek3},
       .clean_spaces = false},
      {.names = {"spark2_5"},
       .regexes = {R"(\p{N}{1,3})", kHanKana, kSpark, R"(\p{N})"},
       .clean_spaces = false},
      {.names = {"youtu"},
       .regexes = {kYoutuCjk, kYoutu},
       .ignore_merges = true,
       .clean_spaces = false},
      {.names = {"deepseek-coder"},
       .regexes = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
                   "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+", "\\p{N}"},
       .clean_spaces = false},
      {.names = {"falcon"}, .regexes = {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}},
      {.names = {"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"},
       .regexes = {R"(\p{N})", kGpt2}},
      {.names = {"command-r", "smollm"}, .regexes = {R"(\p{N})", kGpt2}, .clean_spaces = false},
      {.names = {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
                 "a.x-4.0", "mellum", "modern-bert", "mpt", "olmo", "jais", "exaone4"},
       .regexes = {kGpt2}},
      {.names = {"trillion", "granite-docling"}, .regexes = {kGpt2}, .clean_spaces = false},
      {.names = {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open"},
       .regexes = {kQwen2},
       .clean_spaces = false},
      {.names = {"stablelm2", "megrez"}, .regexes = {kQwen2}},
      {.names = {"grok-2"}, .regexes = {kQwen2}, .clean_spaces = false},
      {.names = {"qwen35"}, .regexes = {kQwen35}, .clean_spaces = false},
      {.names = {"poro-chat"}, .regexes = {kBloom}, .clean_spaces = false},
      {.names = {"bloom", "gpt3-finnish"}, .regexes = {kBloom}},
      {.names = {"viking"}, .regexes = {kBloom, R"(\p{N})"}, .clean_spaces = false},
      {.names = {"tekken"},
       .regexes = {kTekken},
       .ignore_merges = true,
       .clean_spaces = false,
       .add_bos = true},
      {.names = {"chameleon"},
       .regexes = {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )",
                   R"(\p{N})", R"([\p{P}!-/:-@\[-`{-~])", kGpt2},
       .clean_spaces = false,
       .add_bos = true},
      {.names = {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"},
       .regexes = {kGpt4o},
       .clean_spaces = false},
      {.names = {"granite-embed-multi-97m"},
       .regexes = {kGraniteEmbMulti},
       .ignore_merges = true,
       .clean_spaces = false},
      {.names = {"bailingmoe", "bailingmoe2", "llada-moe"},
       .regexes = {kBailing},
       .clean_spaces = false},
      {.names = {"seed-coder"}, .regexes = {kSeedCoder}, .clean_spaces = false},
      {.names = {"ufakzeka"}, .regexes = {kUfakzeka}, .clean_spaces = false},
      {.names = {"laguna"}, .regexes = {"[^\\n]+|[\\n]+", kQwen2}, .clean_spaces = false},
      {.names = {"exaone-moe"}, .regexes = {kExaoneMoe}},
  };
  return table;
}

}  // namespace

bool set_pre_tokenizer(LlamaVocab& v, std::string_view pre, bool& ignore_merges) {
  for (const PreTokenizer& p : pre_tokenizers()) {
    if (std::find(p.names.begin(), p.names.end(), pre) == p.names.end()) continue;
    v.splits.clear();
    for (const char* re : p.regexes)
      v.splits.push_back(
          std::make_shared<const Regex>(re, "attn-cli", "llama.cpp's pre-tokenizer"));
    ignore_merges = p.ignore_merges;
    v.clean_spaces = p.clean_spaces;
    v.add_bos = p.add_bos;
    if (p.no_bos) v.bos = -1;
    return true;
  }
  return false;
}

}  // namespace attn
