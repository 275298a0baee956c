#include "attn/text/tokenizer.hpp"

#include <algorithm>
#include <unordered_map>

#include "attn/error.hpp"
#include "attn/text/added_tokens.hpp"
#include "attn/text/llama_vocab.hpp"
#include "attn/text/regex.hpp"
#include "attn/text/unicode.hpp"

namespace attn {

namespace {

using Words = std::vector<std::string>;
using Behavior = TextStep::Behavior;

// A piece of the input between added tokens (added < 0), or one added token.
struct Segment {
  std::string_view text;
  std::int32_t added = -1;
  bool at_start = false;  // begins at the input's first byte (Metaspace's prepend_scheme first)
};

bool white_before(std::string_view s, std::size_t i, std::size_t& begin) {
  // The code point ending at i, if it is white space: begin moves to its start.
  std::size_t b = i;
  while (b > 0 && (static_cast<unsigned char>(s[b - 1]) & 0xC0) == 0x80) --b;
  if (b == 0) return false;
  --b;
  std::size_t k = b;
  if (!is_white_space(next_code_point(s, k))) return false;
  begin = b;
  return true;
}

// The input cut at its added tokens, leftmost-longest (Hugging Face's Aho-Corasick split), each
// token taking the white space around it its lstrip/rstrip ask for.
std::vector<Segment> split_added(const Tokenizer& t, std::string_view s) {
  std::vector<Segment> out;
  std::size_t from = 0;
  if (!t.added.empty()) {
    // A loader that made no index (none of this library's): one for this call.
    const std::shared_ptr<const AddedTokenIndex> index =
        t.added_index ? t.added_index : std::make_shared<const AddedTokenIndex>(t.added);
    for (const auto& [i, which] : index->longest_at(s)) {
      if (i < from) continue;  // inside a token taken, or the white space it took
      const AddedToken& a = t.added[std::size_t(which)];
      std::size_t b = i, e = i + a.content.size();
      if (a.lstrip)
        while (b > from && white_before(s, b, b)) {
        }
      if (a.rstrip)
        for (std::size_t k = e; k < s.size() && is_white_space(next_code_point(s, k));) e = k;
      if (b > from) out.push_back({s.substr(from, b - from), -1, from == 0});
      out.push_back({s.substr(b, e - b), a.id, false});
      from = e;
    }
  }
  if (from < s.size()) out.push_back({s.substr(from), -1, from == 0});
  return out;
}

// Normalizer and decoder steps may lengthen a text (Replace " " -> "▁" triples it), but chained,
// or with a long content, they would multiply it past any memory: what the steps make is
// bounded by this multiple of the text they start from, plus a little (Prepend's "▁").
constexpr std::size_t kMaxGrowth = 16, kGrowthSlack = 64;

void check_growth(const TextStep& st, std::size_t made, std::size_t from) {
  if (made > kMaxGrowth * from + kGrowthSlack)
    throw InputError(st.where + ": makes " + std::to_string(made) + " bytes of " +
                     std::to_string(from) + " (at most " + std::to_string(kMaxGrowth) +
                     " a byte): its content is too long for its pattern");
}

std::string normalize(const Tokenizer& t, std::string_view text) {
  std::string s(text);
  for (const TextStep& st : t.normalizer) {
    if (st.kind == TextStep::Kind::prepend && !s.empty()) s.insert(0, st.text);
    if (st.kind == TextStep::Kind::replace) replace_all(s, st.text, st.content);
    check_growth(st, s.size(), text.size());
  }
  return s;
}

// s cut into spans, each a match of the pattern or not: the pieces Split's behavior keeps.
void split_word(const TextStep& st, const std::string& s, RegexBudget& budget, Words& out) {
  struct Span {
    std::size_t b, e;
    bool match;
  };
  std::vector<Span> spans;
  std::size_t at = 0;
  for (const auto& [b, e] : st.regex->find_all(s, budget, st.where)) {
    if (b > at) spans.push_back({at, b, st.invert});
    spans.push_back({b, e, !st.invert});
    at = e;
  }
  if (at < s.size()) spans.push_back({at, s.size(), st.invert});
  std::vector<Span> kept;
  bool previous = false;
  const auto visit = [&](const Span& sp, bool extend_last, bool extend_start) {
    if (extend_last && !kept.empty()) {
      (extend_start ? kept.back().b : kept.back().e) = extend_start ? sp.b : sp.e;
    } else {
      kept.push_back(sp);
    }
  };
  if (st.behavior == Behavior::merged_with_next) {
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
      visit(*it, it->match && !previous, true);
      previous = it->match;
    }
    std::reverse(kept.begin(), kept.end());
  } else {
    for (const Span& sp : spans) {
      if (st.behavior == Behavior::removed && sp.match) continue;
      const bool extend =
          (st.behavior == Behavior::merged_with_previous && sp.match && !previous) ||
          (st.behavior == Behavior::contiguous && sp.match && previous);
      visit(sp, extend, false);
      previous = sp.match;
    }
  }
  for (const Span& sp : kept)
    if (sp.e > sp.b) out.push_back(s.substr(sp.b, sp.e - sp.b));
}

std::string to_byte_level(std::string_view w) {
  std::string out;
  out.reserve(w.size() * 2);
  for (const char c : w) out += byte_to_unicode(static_cast<unsigned char>(c));
  return out;
}

void metaspace(const TextStep& st, std::string w, bool at_start, Words& out) {
  replace_all(w, " ", st.text);
  const bool starts = w.compare(0, st.text.size(), st.text) == 0;
  if (!starts &&
      (st.scheme == TextStep::Scheme::always || (st.scheme == TextStep::Scheme::first && at_start)))
    w.insert(0, st.text);
  if (!st.split_words) {
    out.push_back(std::move(w));
    return;
  }
  std::size_t from = 0;  // each word keeps the "▁" before it (MergedWithNext)
  for (std::size_t k = w.find(st.text, st.text.size()); k != std::string::npos;
       k = w.find(st.text, k + st.text.size())) {
    if (k > from) out.push_back(w.substr(from, k - from));
    from = k;
  }
  if (from < w.size()) out.push_back(w.substr(from));
}

// s cut before each run of t.word_start that follows another character.
Words word_starts(const Tokenizer& t, std::string s) {
  const std::string& m = t.word_start;
  Words words;
  std::size_t from = 0;
  for (std::size_t k = s.find(m, 1); k != std::string::npos; k = s.find(m, k + m.size()))
    if (!follows(s, k, m)) {
      words.push_back(s.substr(from, k - from));
      from = k;
    }
  words.push_back(s.substr(from));
  return words;
}

Words pre_tokenize(const Tokenizer& t, std::string s, bool at_start, RegexBudget& budget) {
  if (!t.word_start.empty()) return word_starts(t, std::move(s));
  Words words;
  words.push_back(std::move(s));
  for (const TextStep& st : t.pre_tokenizer) {
    Words next;
    for (std::size_t i = 0; i < words.size(); ++i) {
      std::string& w = words[i];
      if (st.kind == TextStep::Kind::split) {
        split_word(st, w, budget, next);
      } else if (st.kind == TextStep::Kind::metaspace) {
        metaspace(st, std::move(w), at_start && i == 0, next);
      } else if (st.kind == TextStep::Kind::byte_level) {
        if (st.add_prefix_space && w.compare(0, 1, " ") != 0) w = " " + w;
        Words parts;
        if (st.use_regex)
          split_word(st, w, budget, parts);
        else
          parts.push_back(std::move(w));
        for (const std::string& p : parts) next.push_back(to_byte_level(p));
      } else {
        throw InputError(t.source + ": this step cannot be a pre-tokenizer");
      }
    }
    words = std::move(next);
  }
  return words;
}

using WordCache = std::unordered_map<std::string, std::vector<std::int32_t>>;

void encode_segment(const Tokenizer& t, const Segment& seg, WordCache& cache, RegexBudget& budget,
                    std::vector<std::int32_t>& ids) {
  for (const std::string& w : pre_tokenize(t, normalize(t, seg.text), seg.at_start, budget)) {
    if (w.empty()) continue;
    auto it = cache.find(w);
    if (it == cache.end()) {
      std::vector<std::int32_t> word;
      t.bpe.encode_word(w, word);
      it = cache.emplace(w, std::move(word)).first;
    }
    ids.insert(ids.end(), it->second.begin(), it->second.end());
  }
}

// <0xNN> as its byte, or -1.
int fallback_byte(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  const auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
  };
  const int hi = hex(piece[3]), lo = hex(piece[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

void byte_fallback(Words& tokens, bool repair = true) {
  Words out;
  std::string bytes;
  std::size_t count = 0;
  const auto flush = [&] {
    if (!count) return;
    const bool ok = !repair || valid_utf8(bytes) == bytes;
    if (ok) {
      out.push_back(bytes);
    } else {
      std::string r;
      for (std::size_t k = 0; k < count; ++k) r += "\xEF\xBF\xBD";
      out.push_back(r);
    }
    bytes.clear();
    count = 0;
  };
  for (std::string& tok : tokens) {
    if (const int b = fallback_byte(tok); b >= 0) {
      bytes += char(b);
      ++count;
      continue;
    }
    flush();
    out.push_back(std::move(tok));
  }
  flush();
  tokens = std::move(out);
}

void from_byte_level(Words& tokens, bool repair = true) {
  std::string bytes;
  for (const std::string& tok : tokens) {
    std::string mapped;
    bool all = true;
    for (std::size_t i = 0; i < tok.size() && all;) {
      const int b = unicode_to_byte(next_code_point(tok, i));
      all = b >= 0;
      mapped += char(b);
    }
    bytes += all ? mapped : tok;
  }
  tokens.assign(1, repair ? valid_utf8(bytes) : bytes);
}

void strip(const TextStep& st, std::string& tok) {
  const std::string& c = st.content;
  for (std::int64_t k = 0; k < st.start && !c.empty() && tok.compare(0, c.size(), c) == 0; ++k)
    tok.erase(0, c.size());
  for (std::int64_t k = 0; k < st.stop && !c.empty() && tok.size() >= c.size() &&
                           tok.compare(tok.size() - c.size(), c.size(), c) == 0;
       ++k)
    tok.erase(tok.size() - c.size());
}

std::size_t total_size(const Words& tokens) {
  std::size_t n = 0;
  for (const std::string& tok : tokens) n += tok.size();
  return n;
}

void run_decoder(const Tokenizer& t, Words& tokens, bool repair = true) {
  using K = TextStep::Kind;
  const std::size_t from = total_size(tokens);
  for (const TextStep& st : t.decoder) {
    if (st.kind == K::replace) {
      for (std::string& tok : tokens) replace_all(tok, st.text, st.content);
    } else if (st.kind == K::byte_fallback) {
      byte_fallback(tokens, repair);
    } else if (st.kind == K::fuse) {
      std::string all;
      for (const std::string& tok : tokens) all += tok;
      tokens.assign(1, all);
    } else if (st.kind == K::strip) {
      for (std::string& tok : tokens) strip(st, tok);
    } else if (st.kind == K::byte_level) {
      from_byte_level(tokens, repair);
    } else if (st.kind == K::metaspace) {
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        replace_all(tokens[i], st.text, " ");
        if (i == 0 && st.scheme != TextStep::Scheme::never && tokens[i].compare(0, 1, " ") == 0)
          tokens[i].erase(0, 1);
      }
    } else {
      throw InputError(t.source + ": this step cannot be a decoder");
    }
    check_growth(st, total_size(tokens), from);
  }
}

// transformers' clean_up_tokenization: no space before punctuation and English contractions.
void clean_up(std::string& s) {
  for (const auto& [from, to] : {std::pair{" .", "."},
                                 {" ?", "?"},
                                 {" !", "!"},
                                 {" ,", ","},
                                 {" ' ", "'"},
                                 {" n't", "n't"},
                                 {" 'm", "'m"},
                                 {" 's", "'s"},
                                 {" 've", "'ve"},
                                 {" 're", "'re"}})
    replace_all(s, from, to);
}

}  // namespace

std::vector<std::int32_t> encode(const Tokenizer& t, std::string_view text,
                                 const EncodeOptions& o) {
  if (t.llama) return encode_llama(t, text, o);
  const std::string s = valid_utf8(text);
  std::vector<std::int32_t> ids;
  if (o.add_special_tokens) ids = t.prefix;
  const std::optional<bool> bos = o.bos ? o.bos : o.add_special_tokens ? t.add_bos : std::nullopt;
  if (bos && *bos && t.bos >= 0 && (ids.empty() || ids.front() != t.bos))
    ids.insert(ids.begin(), t.bos);
  if (bos && !*bos) std::erase(ids, t.bos);
  WordCache cache;
  RegexBudget budget(s.size());  // every search of this text, every step
  for (const Segment& seg : split_added(t, s)) {
    if (seg.added >= 0)
      ids.push_back(seg.added);
    else
      encode_segment(t, seg, cache, budget, ids);
  }
  if (!o.add_special_tokens) return ids;
  std::vector<std::int32_t> suffix = t.suffix;
  const std::int32_t eos = t.eos.empty() ? -1 : t.eos.front();
  if (t.add_eos && *t.add_eos && eos >= 0 && (suffix.empty() || suffix.back() != eos))
    suffix.push_back(eos);
  if (t.add_eos && !*t.add_eos) std::erase(suffix, eos);
  ids.insert(ids.end(), suffix.begin(), suffix.end());
  return ids;
}

std::string decode(const Tokenizer& t, const std::vector<std::int32_t>& ids,
                   const DecodeOptions& o) {
  if (t.llama) return decode_llama(t, ids, o);
  Words tokens;
  tokens.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int32_t id = ids[i];
    if (id < 0 || id >= t.vocab_size())
      throw InputError("token id " + std::to_string(id) + " at index " + std::to_string(i) +
                       " is outside the vocabulary [0, " + std::to_string(t.vocab_size()) +
                       ") of " + t.source);
    if (o.skip_special_tokens && t.special[std::size_t(id)]) continue;
    tokens.push_back(t.pieces[std::size_t(id)]);
  }
  std::string text;
  if (t.decoder.empty()) {
    for (std::size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
  } else {
    run_decoder(t, tokens);
    for (const std::string& tok : tokens) text += tok;
  }
  text = valid_utf8(text);
  if (o.clean_up_spaces.value_or(t.clean_up_spaces)) clean_up(text);
  return text;
}

std::string token_bytes(const Tokenizer& t, std::int32_t id) {
  if (id < 0 || id >= t.vocab_size())
    throw InputError("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                     std::to_string(t.vocab_size()) + ") of " + t.source);
  if (t.llama) return token_bytes_llama(t, id);
  Words tokens = {t.pieces[std::size_t(id)]};
  run_decoder(t, tokens, /*repair=*/false);
  std::string text;
  for (const std::string& tok : tokens) text += tok;
  return text;
}

}  // namespace attn
