#include "attn/text/added_tokens.hpp"

#include <algorithm>
#include <cctype>
#include <tuple>
#include <unordered_map>

#include "attn/text/tokenizer.hpp"

namespace attn {

namespace {

bool is_word_byte(unsigned char c) {
  return c >= 0x80 || std::isalnum(c) || c == '_';
}

}  // namespace

AddedTokenIndex::AddedTokenIndex(const std::vector<AddedToken>& added) {
  std::vector<std::string_view> contents;
  contents.reserve(added.size());
  for (const AddedToken& a : added) contents.push_back(a.content);
  single_word_.resize(added.size());
  for (std::size_t k = 0; k < added.size(); ++k) single_word_[k] = added[k].single_word;
  build(contents);
}

AddedTokenIndex::AddedTokenIndex(const std::vector<std::string_view>& contents) {
  single_word_.resize(contents.size());
  build(contents);
}

void AddedTokenIndex::build(const std::vector<std::string_view>& added) {
  // The trie of the contents reversed: node 0 is the root, depth[node] its bytes.
  std::uint64_t& work = text_work();
  std::vector<std::int32_t> depth{0};
  std::unordered_map<std::uint64_t, std::int32_t> edges;
  std::vector<std::pair<std::int32_t, std::int32_t>> ends;  // (node, token)
  for (std::size_t k = 0; k < added.size(); ++k) {
    std::int32_t node = 0;
    work += added[k].size() + 1;
    for (auto it = added[k].rbegin(); it != added[k].rend(); ++it) {
      const auto key = std::uint64_t(node) << 8 | static_cast<unsigned char>(*it);
      const auto [at, is_new] = edges.try_emplace(key, std::int32_t(depth.size()));
      if (is_new) depth.push_back(depth[std::size_t(node)] + 1);
      node = at->second;
    }
    ends.emplace_back(node, std::int32_t(k));
  }
  const std::size_t n = depth.size();
  // Children and tokens as ranges of two flat arrays, in node order (CSR).
  std::vector<std::tuple<std::int32_t, unsigned char, std::int32_t>> list;
  list.reserve(edges.size());
  for (const auto& [key, child] : edges)
    list.emplace_back(std::int32_t(key >> 8), static_cast<unsigned char>(key & 255), child);
  edges = {};
  std::sort(list.begin(), list.end());
  std::sort(ends.begin(), ends.end());
  nodes_.resize(n + 1);
  for (std::size_t v = 0; v < n; ++v) nodes_[v].depth = depth[v];
  for (const auto& [parent, c, child] : list) ++nodes_[std::size_t(parent) + 1].first_edge;
  for (const auto& [node, token] : ends) ++nodes_[std::size_t(node) + 1].first_token;
  for (std::size_t v = 1; v <= n; ++v) {
    nodes_[v].first_edge += nodes_[v - 1].first_edge;
    nodes_[v].first_token += nodes_[v - 1].first_token;
  }
  for (const auto& [parent, c, child] : list) {
    edge_byte_.push_back(c);
    edge_child_.push_back(child);
  }
  for (const auto& [node, token] : ends) tokens_.push_back(token);
  std::fill(std::begin(root_), std::end(root_), -1);
  for (std::int32_t e = nodes_[0].first_edge; e < nodes_[1].first_edge; ++e)
    root_[edge_byte_[std::size_t(e)]] = edge_child_[std::size_t(e)];
  // Failure links breadth first (a node's fail is shallower, so already done), and with them
  // the nearest node on each fail chain that ends a token.
  std::vector<std::int32_t> order{0};
  order.reserve(n);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::int32_t u = order[k];
    for (std::int32_t e = nodes_[std::size_t(u)].first_edge;
         e < nodes_[std::size_t(u) + 1].first_edge; ++e) {
      const unsigned char c = edge_byte_[std::size_t(e)];
      const std::int32_t v = edge_child_[std::size_t(e)];
      order.push_back(v);
      std::int32_t fail = 0;
      for (std::int32_t f = u; f != 0;) {
        ++work;
        f = nodes_[std::size_t(f)].fail;
        if (const std::int32_t w = child(f, c); w >= 0) {
          fail = w;
          break;
        }
      }
      Node& node = nodes_[std::size_t(v)];
      node.fail = fail;
      const bool ends_here = node.first_token < nodes_[std::size_t(v) + 1].first_token;
      node.terminal = ends_here ? v : nodes_[std::size_t(fail)].terminal;
      node.plain = taken(v, false) >= 0 ? v : nodes_[std::size_t(fail)].plain;
    }
  }
}

std::int32_t AddedTokenIndex::child(std::int32_t node, unsigned char c) const {
  if (node == 0) return root_[c];
  const auto begin = edge_byte_.begin() + nodes_[std::size_t(node)].first_edge;
  const auto end = edge_byte_.begin() + nodes_[std::size_t(node) + 1].first_edge;
  const auto it = std::lower_bound(begin, end, c);
  return it != end && *it == c ? edge_child_[std::size_t(it - edge_byte_.begin())] : -1;
}

std::int32_t AddedTokenIndex::taken(std::int32_t node, bool single_word_holds) const {
  for (std::int32_t k = nodes_[std::size_t(node)].first_token;
       k < nodes_[std::size_t(node) + 1].first_token; ++k) {
    const std::int32_t token = tokens_[std::size_t(k)];
    if (single_word_holds || !single_word_[std::size_t(token)]) return token;
  }
  return -1;
}

std::vector<std::pair<std::size_t, std::int32_t>> AddedTokenIndex::longest_at(
    std::string_view s) const {
  std::vector<std::pair<std::size_t, std::int32_t>> out;
  if (nodes_.size() <= 2) return out;  // no tokens
  const auto word = [&](std::size_t k) { return is_word_byte(static_cast<unsigned char>(s[k])); };
  std::uint64_t& work = text_work();
  std::int32_t q = 0;  // the longest text from i on that a reversed content ends with
  for (std::size_t i = s.size(); i-- > 0;) {
    const auto c = static_cast<unsigned char>(s[i]);
    ++work;
    std::int32_t next = child(q, c);
    while (next < 0 && q != 0) {
      ++work;
      q = nodes_[std::size_t(q)].fail;
      next = child(q, c);
    }
    q = next < 0 ? 0 : next;
    std::int32_t token = -1;
    if (i > 0 && word(i - 1)) {  // a single_word token cannot start here
      if (const std::int32_t node = nodes_[std::size_t(q)].plain; node >= 0)
        token = taken(node, false);
    } else {
      // Longest first; the walk ends at the latest where a token without single_word ends.
      for (std::int32_t node = nodes_[std::size_t(q)].terminal; node >= 0 && token < 0;
           node = nodes_[std::size_t(nodes_[std::size_t(node)].fail)].terminal) {
        ++work;
        const std::size_t e = i + std::size_t(nodes_[std::size_t(node)].depth);
        token = taken(node, e >= s.size() || !word(e));
      }
    }
    if (token >= 0) out.emplace_back(i, token);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace attn
