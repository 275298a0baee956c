// Sizes read from files (issue 47, cause 1): the one checked multiply-and-add every reader
// computes its byte counts and offsets with (attn/checked_size.hpp), and a crafted file per
// reader whose sizes wrap past 2^64, each refused naming the file and the tensor. GGUF's own
// cases are in test_gguf.cpp ("sizes whose byte count wraps").
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "attn/checked_size.hpp"
#include "attn/error.hpp"
#include "attn/io/llama2c.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/io/tensor_source.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kMax = ~std::uint64_t{0};
constexpr std::int64_t k2to31 = std::int64_t{1} << 31;

std::string refusal_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const attn::InputError& e) {
    return e.what();
  }
  return "accepted";
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  REQUIRE(out.good());
}

// A safetensors file of one tensor as given: its header's JSON then `data` bytes.
std::string safetensors_bytes(const std::string& header, std::size_t data) {
  std::string b(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(b.data(), &n, 8);
  return b + header + std::string(data, '\0');
}

}  // namespace

TEST_CASE("sizes: mul_add and size_product refuse every wrap, at the edges") {
  CHECK(attn::mul_add(3, 4, 5) == 17u);
  CHECK(attn::mul_add(kMax, 1) == kMax);
  CHECK_FALSE(attn::mul_add(kMax, 1, 1));
  CHECK_FALSE(attn::mul_add(std::uint64_t{1} << 32, std::uint64_t{1} << 32));  // 2^64 -> 0
  CHECK_FALSE(attn::mul_add(std::uint64_t{1} << 63, 2));
  CHECK(attn::mul_add(std::uint64_t{1} << 62, 3) == 3 * (std::uint64_t{1} << 62));
  CHECK_FALSE(attn::mul_add((std::uint64_t{1} << 62) + 1, 4));  // 2^64 + 4 -> 4
  CHECK_FALSE(attn::add_size(kMax, 1));
  CHECK(attn::size_product({}) == 1u);
  CHECK(attn::size_product({k2to31, k2to31, 3}) == 3 * (std::uint64_t{1} << 62));
  CHECK_FALSE(attn::size_product({k2to31, k2to31, 4}));  // 2^64 -> 0
  CHECK_FALSE(attn::size_product({-1, 4}));
  CHECK_FALSE(attn::size_product({std::int64_t{1} << 40, std::int64_t{1} << 40, 0}));
  attn::SizeSum s;
  s.add({std::int64_t{1} << 62, 3});
  CHECK(s.value() == 3 * (std::uint64_t{1} << 62));
  s.add({std::int64_t{1} << 62});  // 2^64: wraps to 0
  CHECK_FALSE(s.value());
  s.add({1});  // and stays wrapped
  CHECK_FALSE(s.value());
}

TEST_CASE("sizes: safetensors shapes whose bytes wrap are refused naming the tensor") {
  const fs::path p = test::temp_path("wrap.safetensors");
  // 2^62 + 1 F32 elements: 2^64 + 4 bytes, as GGUF's case.
  write_bytes(
      p, safetensors_bytes(
             R"({"w":{"dtype":"F32","shape":[4611686018427387905],"data_offsets":[0,4]}})", 4));
  CHECK(refusal_of([&] { attn::open_safetensors(p); })
            .find("wrap.safetensors: tensor 'w': shape [4611686018427387905] x F32 overflows 64 "
                  "bits") != std::string::npos);
  // [2^31, 2^31 + 1] F32, the wrap through an outer dimension.
  write_bytes(
      p, safetensors_bytes(
             R"({"w":{"dtype":"F32","shape":[2147483648,2147483649],"data_offsets":[0,4]}})", 4));
  CHECK(refusal_of([&] { attn::open_safetensors(p); }).find("tensor 'w': shape") !=
        std::string::npos);
}

TEST_CASE("sizes: a tensor's element count made by hand that wraps is refused naming the file") {
  attn::SourceTensor t;
  t.file = "m.gguf";
  t.shape = {std::int64_t{1} << 32, std::int64_t{1} << 31};
  CHECK(refusal_of([&] { (void)t.numel(); }) ==
        "m.gguf: shape [4294967296, 2147483648] has more than 2^63 elements");
  t.shape = {std::int64_t{1} << 31, std::int64_t{1} << 31};
  CHECK(t.numel() == std::int64_t{1} << 62);
}

TEST_CASE("sizes: llama2.c headers whose sum of sizes wraps are refused") {
  // Each product fits 64 bits, their sum does and its bytes do not: 8192 layers of 2^24 x 2^24
  // matrices, 3 * 2^62 floats in all.
  const std::int32_t header[7] = {
      std::int32_t{1} << 24, std::int32_t{1} << 24, 8192, 2, 1, std::int32_t{1} << 24, 1};
  std::string bytes(reinterpret_cast<const char*>(header), sizeof header);
  bytes += std::string(4096, '\0');
  CHECK_FALSE(attn::llama2c_header({reinterpret_cast<const std::uint8_t*>(bytes.data()), 28},
                                   bytes.size()));
  const fs::path p = test::temp_path("wrap.bin");
  write_bytes(p, bytes);
  CHECK(refusal_of([&] {
          attn::read_llama2c_header(p);
        }).find("wrap.bin: not a llama2.c checkpoint: the header's sizes overflow 64 bits") !=
        std::string::npos);
}

TEST_CASE("sizes: diff's dumps and a loaded session whose shapes wrap are refused naming them") {
  // The wrap of GGUF's case in the safetensors files attn-cli writes and reads back.
  const fs::path dump = test::temp_path("wrap dump.safetensors");
  write_bytes(
      dump, safetensors_bytes(
                R"({"x":{"dtype":"F32","shape":[4611686018427387905],"data_offsets":[0,4]}})", 4));
  const std::string needle =
      "wrap dump.safetensors: tensor 'x': shape [4611686018427387905] x "
      "F32 overflows 64 bits";
  test::CliResult r = test::run_cli("diff '" + dump.string() + "' '" + dump.string() + "'");
  CHECK(r.status == 2);
  CHECK_MESSAGE(r.err.find(needle) != std::string::npos, r.err);
  const fs::path stories = test::source_dir() / "weights" / "stories260K.gguf";
  r = test::run_cli("generate -m '" + stories.string() + "' --load-session '" + dump.string() +
                    "' -n 1");
  CHECK(r.status == 2);
  CHECK_MESSAGE(r.err.find(needle) != std::string::npos, r.err);
}
