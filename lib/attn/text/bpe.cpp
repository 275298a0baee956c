#include "attn/text/bpe.hpp"

#include <queue>

#include "attn/text/unicode.hpp"
#include "attn/text/work.hpp"

namespace attn {

namespace {

struct Symbol {
  std::int32_t id;
  std::int32_t prev, next;  // neighbours still alive, or -1
  bool alive = true;
};

struct Candidate {
  std::int32_t rank, pos, id;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

// The word's characters as symbols: a character the vocabulary lacks becomes its bytes' tokens
// (byte_fallback) or the unknown token, consecutive unknowns fused into one (fuse_unk).
std::vector<Symbol> initial_symbols(const Bpe& bpe, std::string_view word) {
  std::vector<Symbol> syms;
  bool last_unk = false;
  const auto push = [&](std::int32_t id) {
    syms.push_back({id, std::int32_t(syms.size()) - 1, -1});
  };
  for (std::size_t i = 0; i < word.size();) {
    const std::size_t n = code_point_bytes(word, i);
    const std::string_view ch = word.substr(i, n);
    i += n;
    if (const std::int32_t id = bpe.find(ch); id >= 0) {
      push(id);
      last_unk = false;
      continue;
    }
    if (bpe.byte_fallback) {
      bool all = true;
      for (const char c : ch) all = all && bpe.bytes[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        for (const char c : ch) push(bpe.bytes[static_cast<unsigned char>(c)]);
        last_unk = false;
        continue;
      }
    }
    if (bpe.unk < 0) continue;  // Rust's BPE drops it too
    if (!(bpe.fuse_unk && last_unk)) push(bpe.unk);
    last_unk = true;
  }
  for (std::size_t k = 0; k + 1 < syms.size(); ++k) syms[k].next = std::int32_t(k + 1);
  return syms;
}

}  // namespace

void Bpe::encode_word(std::string_view word, std::vector<std::int32_t>& ids) const {
  if (ignore_merges)
    if (const std::int32_t id = find(word); id >= 0) {
      ids.push_back(id);
      return;
    }
  std::vector<Symbol> syms = initial_symbols(*this, word);
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto consider = [&](std::int32_t pos) {
    if (pos < 0 || syms[std::size_t(pos)].next < 0) return;
    const std::uint64_t key = std::uint64_t(std::uint32_t(syms[std::size_t(pos)].id)) << 32 |
                              std::uint32_t(syms[std::size_t(syms[std::size_t(pos)].next)].id);
    if (const auto it = merges.find(key); it != merges.end())
      queue.push({it->second.rank, pos, it->second.id});
  };
  for (std::size_t k = 0; k + 1 < syms.size(); ++k) consider(std::int32_t(k));
  std::uint64_t& work = text_work();
  work += syms.size();
  while (!queue.empty()) {
    ++work;
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = syms[std::size_t(c.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = syms[std::size_t(left.next)];
    const auto it =
        merges.find(std::uint64_t(std::uint32_t(left.id)) << 32 | std::uint32_t(right.id));
    if (it == merges.end() || it->second.id != c.id) continue;  // stale: a neighbour changed
    left.id = c.id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) syms[std::size_t(right.next)].prev = c.pos;
    consider(left.prev);
    consider(c.pos);
  }
  for (const Symbol& s : syms)
    if (s.alive) ids.push_back(s.id);
}

}  // namespace attn
