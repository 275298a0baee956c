// The seeded draw of a tensor over 4 M values, the size drawn on several threads (issue 52: on
// the draw's own pool, no longer OpenMP's team): the same bits at 1, 2 and 3 threads, in F32 and
// stored as BF16, and in F32 the bits of the generator's definition (tests/golden/draw,
// make_draw.py's numpy).
#include <doctest/doctest.h>

#include <array>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "attn/model/weights.hpp"
#include "test_support.hpp"

namespace {

nlohmann::json fixture() {
  std::ifstream in(test::golden_dir() / "draw" / "embeddings.json");
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

attn::ModelArgs draw_args(const nlohmann::json& c) {
  attn::ModelArgs a;
  a.dim = c.at("dim");
  a.vocab_size = c.at("vocab_size");
  a.n_layers = c.at("n_layers");
  a.n_heads = c.at("n_heads");
  a.n_kv_heads = c.at("n_kv_heads");
  REQUIRE(c.at("block") == "attention");
  a.block = attn::Block::attention;
  return a;
}

// zlib's CRC-32 (reflected 0xEDB88320), as make_draw.py's zlib.crc32.
std::uint32_t crc32(const void* data, std::size_t n) {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

// The embeddings' bytes as drawn on `threads` threads, stored in `type`.
std::vector<std::uint8_t> embeddings(const nlohmann::json& f, attn::WeightType type, int threads) {
  const attn::ModelArgs a = draw_args(f.at("config"));
  const attn::TransformerWeights w =
      attn::seeded_weights(a, f.at("config").at("seed"), {}, type, {true, false}, threads);
  const attn::Matrix& m = w.tokens.tok_embeddings;
  REQUIRE(m.type == type);
  const std::size_t bytes =
      std::size_t(a.vocab_size * a.dim) * (type == attn::WeightType::f32 ? 4 : 2);
  const auto* p = static_cast<const std::uint8_t*>(m.data);
  return {p, p + bytes};
}

}  // namespace

TEST_CASE("draw: a tensor over 4 M values has the generator's bits on 1, 2 and 3 threads") {
  const nlohmann::json f = fixture();
  const std::int64_t n = f.at("numel");
  REQUIRE(n > (std::int64_t(1) << 22));  // drawn on the pool, not the caller alone
  for (const int threads : {1, 2, 3}) {
    CAPTURE(threads);
    const std::vector<std::uint8_t> got = embeddings(f, attn::WeightType::f32, threads);
    REQUIRE(got.size() == std::size_t(n) * 4);
    CHECK(crc32(got.data(), got.size()) == f.at("crc32").get<std::uint32_t>());
    for (const auto& s : f.at("samples")) {
      const std::size_t i = s.at(0);
      std::uint32_t bits = 0;
      std::memcpy(&bits, got.data() + 4 * i, 4);
      CAPTURE(i);
      CHECK(bits == s.at(1).get<std::uint32_t>());
    }
  }
}

TEST_CASE(
    "draw: a tensor over 4 M values stored as BF16 has the same bytes on 1, 2 and 3 threads") {
  const nlohmann::json f = fixture();
  const std::vector<std::uint8_t> one = embeddings(f, attn::WeightType::bf16, 1);
  for (const int threads : {2, 3}) {
    CAPTURE(threads);
    CHECK(embeddings(f, attn::WeightType::bf16, threads) == one);
  }
}
