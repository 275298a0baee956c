#include "attn/text/spm.hpp"

#include <queue>

#include "attn/text/work.hpp"

namespace attn {

namespace {

struct Symbol {
  std::size_t begin, size;  // bytes of the text; size 0: merged into its left neighbour
  std::int32_t prev, next;  // neighbours still alive, or -1
};

struct Bigram {
  float score;
  std::int32_t left, right;
  std::size_t size;  // both symbols' bytes when it was queued: a different sum means stale
  std::int32_t id;
  // The heap's top: the highest score, then the leftmost (llama_bigram_spm::comparator).
  bool operator<(const Bigram& o) const {
    return score != o.score ? score < o.score : left > o.left;
  }
};

// llama.cpp's unicode_len_utf8: a character's length from its first byte alone.
std::size_t utf8_length(char c) {
  static constexpr std::size_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[static_cast<unsigned char>(c) >> 4];
}

// run.c's: the byte at i and the continuation bytes after it, at most 4 in all.
std::size_t run_c_length(std::string_view s, std::size_t i) {
  std::size_t n = 1;
  while (n < 4 && i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) ++n;
  return n;
}

}  // namespace

void Spm::encode(std::string_view text, std::vector<std::int32_t>& ids) const {
  std::vector<Symbol> syms;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t n =
        run_c ? run_c_length(text, at) : std::min(utf8_length(text[at]), text.size() - at);
    syms.push_back({at, n, std::int32_t(syms.size()) - 1, -1});
    at += n;
  }
  for (std::size_t k = 0; k + 1 < syms.size(); ++k) syms[k].next = std::int32_t(k + 1);
  std::priority_queue<Bigram> queue;
  const auto consider = [&](std::int32_t left, std::int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = syms[std::size_t(left)];
    const std::size_t size = l.size + syms[std::size_t(right)].size;
    const std::int32_t id = find(text.substr(l.begin, size));
    if (id >= 0 && !(run_c && scores[std::size_t(id)] <= -1e10f))
      queue.push({scores[std::size_t(id)], left, right, size, id});
  };
  for (std::size_t k = 1; k < syms.size(); ++k) consider(std::int32_t(k - 1), std::int32_t(k));
  std::uint64_t& work = text_work();
  work += syms.size();
  while (!queue.empty()) {
    ++work;
    const Bigram b = queue.top();
    queue.pop();
    Symbol& left = syms[std::size_t(b.left)];
    Symbol& right = syms[std::size_t(b.right)];
    if (left.size == 0 || right.size == 0 || left.size + right.size != b.size) continue;
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) syms[std::size_t(right.next)].prev = b.left;
    consider(left.prev, b.left);
    consider(b.left, left.next);
  }
  // Only pieces merge, so a symbol that is not a piece is one character: its bytes.
  for (std::int32_t k = syms.empty() ? -1 : 0; k >= 0; k = syms[std::size_t(k)].next) {
    const std::string_view s = text.substr(syms[std::size_t(k)].begin, syms[std::size_t(k)].size);
    if (const std::int32_t id = find(s); id >= 0) {
      ids.push_back(id);
      continue;
    }
    for (const char c : s) {
      const std::int32_t id = bytes[static_cast<unsigned char>(c)];
      if (id >= 0)
        ids.push_back(id);
      else if (unk >= 0)
        ids.push_back(unk);
    }
  }
}

}  // namespace attn
