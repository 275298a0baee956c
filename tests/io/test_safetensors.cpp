#include <doctest/doctest.h>

#include <stdlib.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/io/safetensors.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using attn::Dtype;
using Bytes = std::vector<std::uint8_t>;

namespace {

const std::string kSrc = "t.safetensors";

Bytes le64(std::uint64_t v) {
  Bytes out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(v >> (8 * i));
  return out;
}

// A file image whose 8-byte length prefix is `n`, followed by `rest` verbatim.
// "{" + inner + "}", by appending: GCC 12 warns falsely (-Wrestrict) on "{" + std::string.
std::string braces(const std::string& inner) {
  std::string out(1, '{');
  out += inner;
  out += '}';
  return out;
}

Bytes image_len(std::uint64_t n, const std::string& rest, const Bytes& data = {}) {
  Bytes out = le64(n);
  out.reserve(out.size() + rest.size() + data.size());
  out.insert(out.end(), rest.begin(), rest.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Bytes image(const std::string& header, const Bytes& data = {}) {
  return image_len(header.size(), header, data);
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  std::uint64_t begin, std::uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
}

Bytes floats_le(const std::vector<float>& v) {
  Bytes out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

Bytes halves_le(const std::vector<std::uint16_t>& v) {
  Bytes out;
  for (std::uint16_t h : v) {
    out.push_back(static_cast<std::uint8_t>(h));
    out.push_back(static_cast<std::uint8_t>(h >> 8));
  }
  return out;
}

// The InputError message `f` throws; fails the check if it throws none.
template <class F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const attn::InputError& e) {
    const std::string msg = e.what();
    CHECK_MESSAGE(msg.find('\n') == std::string::npos, "got: " << msg);
    return msg;
  }
  FAIL_CHECK("no InputError thrown");
  return {};
}

std::string parse_refusal(const Bytes& file) {
  const std::string msg = refusal([&] { attn::parse_safetensors(file, kSrc); });
  CHECK_MESSAGE(msg.rfind(kSrc + ": ", 0) == 0, "got: " << msg);
  return msg;
}

std::string header_refusal(const std::string& header, const Bytes& data = {}) {
  return parse_refusal(image(header, data));
}

// Evaluates `msg` once: doctest evaluates message expressions lazily, when reporting.
#define CHECK_HAS(msg, part)                                                      \
  do {                                                                            \
    const std::string has_msg_ = (msg);                                           \
    CHECK_MESSAGE(has_msg_.find(part) != std::string::npos, "got: " << has_msg_); \
  } while (false)

using test::TempDir;

void write_file(const fs::path& p, const Bytes& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  REQUIRE(f.good());
}

Bytes read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

// Whether the process has a mapping of `p` (the kernel lists mapped files in /proc/self/maps).
bool is_mapped(const fs::path& p) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find(p.string()) != std::string::npos) return true;
  }
  return false;
}

bool has_temp_file(const TempDir& d) {
  for (const std::string& n : d.names()) {
    if (n.find(".tmp.") != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("safetensors: dtype names and sizes") {
  const std::vector<std::tuple<Dtype, std::string, std::uint64_t>> all = {
      {Dtype::BOOL, "BOOL", 1},       {Dtype::U8, "U8", 1},           {Dtype::I8, "I8", 1},
      {Dtype::F8_E5M2, "F8_E5M2", 1}, {Dtype::F8_E4M3, "F8_E4M3", 1}, {Dtype::I16, "I16", 2},
      {Dtype::U16, "U16", 2},         {Dtype::F16, "F16", 2},         {Dtype::BF16, "BF16", 2},
      {Dtype::I32, "I32", 4},         {Dtype::U32, "U32", 4},         {Dtype::F32, "F32", 4},
      {Dtype::F64, "F64", 8},         {Dtype::I64, "I64", 8},         {Dtype::U64, "U64", 8}};
  for (const auto& [d, name_, size] : all) {
    const auto& name = name_;  // clang 14 lambdas (doctest INFO) cannot capture a binding
    CAPTURE(name);
    CHECK(attn::dtype_name(d) == name);
    CHECK(attn::dtype_size(d) == size);
    // Every dtype name is accepted by the reader with the matching size.
    const std::string shape = "[3]";
    const auto h = attn::parse_safetensors(
        image(braces(entry("t", name, shape, 0, 3 * size)), Bytes(3 * size)), kSrc);
    CHECK(h.tensors.at("t").dtype == d);
  }
}

TEST_CASE("safetensors: write then open round trip") {
  TempDir dir;
  const fs::path p = dir.path / "w.safetensors";
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f};
  const std::vector<float> b = {42.0f};
  attn::write_safetensors(p, {{"layers.0.a", {2, 3}, a.data()}, {"b", {}, b.data()}},
                          {{"format", "pt"}, {"note", "x"}});
  CHECK_FALSE(has_temp_file(dir));
  CHECK(dir.names().size() == 1);
  CHECK((fs::status(p).permissions() & fs::perms::others_read) != fs::perms::none);

  attn::SafetensorsFile f = attn::open_safetensors(p);
  CHECK(f.path == p.string());
  CHECK(f.header.data_start % 8 == 0);
  CHECK(f.header.metadata == std::map<std::string, std::string>{{"format", "pt"}, {"note", "x"}});
  REQUIRE(f.header.tensors.size() == 2);
  const attn::TensorInfo& ta = f.info("layers.0.a");
  CHECK(ta.shape == std::vector<std::int64_t>{2, 3});
  CHECK(ta.numel() == 6);
  CHECK(ta.begin == 0);  // data in the order given
  CHECK(ta.end == 24);
  CHECK(f.info("b").shape.empty());
  CHECK(f.info("b").numel() == 1);
  CHECK(f.info("b").begin == 24);
  CHECK(f.size == f.header.data_start + 28);

  std::vector<float> storage;
  const float* pa = attn::tensor_as_f32(f, "layers.0.a", storage);
  CHECK(storage.empty());  // aligned F32 is the mapping itself
  CHECK(reinterpret_cast<const std::uint8_t*>(pa) == f.bytes(ta));
  CHECK(std::vector<float>(pa, pa + 6) == a);
  CHECK(*attn::tensor_as_f32(f, "b", storage) == 42.0f);
}

TEST_CASE("safetensors: writer output matches the reference writer byte for byte") {
  TempDir dir;
  const fs::path p = dir.path / "w.safetensors";
  const std::vector<float> v = {0, 1, 2, 3, 4, 5};
  const Bytes data = floats_le(v);
  SUBCASE("no padding needed") {  // tensor.rs test_serialization
    attn::write_safetensors(p, {{"attn.0", {1, 2, 3}, v.data()}});
    CHECK(read_file(p) ==
          image(R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})", data));
  }
  SUBCASE("padded with spaces") {  // tensor.rs test_serialization_forced_alignement
    attn::write_safetensors(p, {{"attn0", {1, 1, 2, 3}, v.data()}});
    CHECK(
        read_file(p) ==
        image(std::string(R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})") +
                  "       ",
              data));
  }
  SUBCASE("empty, with and without metadata") {  // tensor.rs test_empty
    attn::write_safetensors(p, {});
    CHECK(read_file(p) == image("{}      "));
    attn::write_safetensors(p, {}, {{"framework", "pt"}});
    CHECK(read_file(p) == image(R"({"__metadata__":{"framework":"pt"}}     )"));
  }
}

TEST_CASE("safetensors: valid headers are accepted") {
  SUBCASE("empty header object and no data") {
    const auto h = attn::parse_safetensors(image("{}"), kSrc);
    CHECK(h.tensors.empty());
    CHECK(h.data_start == 10);
  }
  SUBCASE("whitespace around the header") {
    const auto h = attn::parse_safetensors(
        image(" \t\r\n{" + entry("w", "F32", "[1]", 0, 4) + "} \r\n\t ", Bytes(4)), kSrc);
    CHECK(h.tensors.count("w") == 1);
  }
  SUBCASE("unknown keys in a tensor entry are ignored, as serde does") {
    const auto h = attn::parse_safetensors(
        image(
            R"({"w":{"extra":{"a":[1,{"b":null}]},"dtype":"U8","shape":[2],"data_offsets":[0,2]}})",
            Bytes(2)),
        kSrc);
    CHECK(h.tensors.at("w").end == 2);
  }
  SUBCASE("null __metadata__ means none") {
    const auto h = attn::parse_safetensors(image(R"({"__metadata__":null})"), kSrc);
    CHECK(h.metadata.empty());
  }
  SUBCASE("tensors listed out of data order") {
    const auto h = attn::parse_safetensors(
        image(braces(entry("a", "F32", "[2]", 8, 16) + "," + entry("b", "I64", "[1]", 0, 8)),
              Bytes(16)),
        kSrc);
    CHECK(h.tensors.at("a").begin == 8);
    CHECK(h.tensors.at("b").dtype == Dtype::I64);
  }
  SUBCASE("empty tensors, including two at one offset and one between others") {
    const auto h = attn::parse_safetensors(
        image(braces(entry("z1", "F32", "[0]", 0, 0) + "," + entry("a", "U8", "[4]", 0, 4) + "," +
                     entry("z2", "F32", "[3,0]", 4, 4) + "," + entry("z3", "BF16", "[0,5]", 4, 4) +
                     "," + entry("b", "U8", "[2]", 4, 6)),
              Bytes(6)),
        kSrc);
    CHECK(h.tensors.at("z2").numel() == 0);
    CHECK(h.tensors.at("z3").shape == std::vector<std::int64_t>{0, 5});
  }
  SUBCASE("a lone empty tensor in an empty data section") {
    const auto h = attn::parse_safetensors(image(braces(entry("z", "F32", "[2,0]", 0, 0))), kSrc);
    CHECK(h.tensors.at("z").numel() == 0);
  }
}

TEST_CASE("safetensors: file too short for the header length") {
  for (std::size_t n = 0; n < 8; ++n) {
    CAPTURE(n);
    const std::string msg = parse_refusal(Bytes(n, 0));
    CHECK_HAS(msg, "too short for the 8-byte header length");
  }
}

TEST_CASE("safetensors: header length over the bound") {
  CHECK_HAS(parse_refusal(image_len(100'000'001, "{}")), "exceeds the limit of 100000000");
  CHECK_HAS(parse_refusal(image_len(~0ull, "{}")), "exceeds the limit");
  // The bound itself is allowed: that file fails only for being short.
  CHECK_HAS(parse_refusal(image_len(100'000'000, "{}")), "runs past the end");
}

TEST_CASE("safetensors: header length past the end of the file") {
  const std::string msg = parse_refusal(image_len(3, "{}"));
  CHECK_HAS(msg, "header length 3 runs past the end of the file (10 bytes)");
  CHECK_HAS(parse_refusal(le64(1)), "runs past the end");
}

TEST_CASE("safetensors: header that is not UTF-8") {
  // Each is a JSON string key holding bytes that Rust's str::from_utf8 refuses.
  for (const std::string bad :
       {"\xFF", "\x80", "\xC0\xAF", "\xC1\xBF", "\xE0\x80\xAF", "\xE0\x9F\xBF", "\xED\xA0\x80",
        "\xED\xBF\xBF", "\xF0\x8F\xBF\xBF", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xE2\x82",
        "\xE2\x28\xA1"}) {
    CAPTURE(bad);
    CHECK_HAS(header_refusal("{\"" + bad + "\":1}"), "header is not valid UTF-8 (byte 2 of");
  }
  CHECK_HAS(header_refusal("{}\xE2\x82"), "header is not valid UTF-8 (byte 2 of");
}

TEST_CASE("safetensors: UTF-8 at the edges of the valid ranges is accepted") {
  for (const std::string name :
       {"\xC2\x80", "\xDF\xBF", "\xE0\xA0\x80", "\xED\x9F\xBF", "\xEE\x80\x80", "\xEF\xBF\xBF",
        "\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF", "\xC3\xA9\xE2\x82\xAC"}) {
    CAPTURE(name);
    const auto h =
        attn::parse_safetensors(image(braces(entry(name, "U8", "[1]", 0, 1)), Bytes(1)), kSrc);
    CHECK(h.tensors.count(name) == 1);
  }
}

TEST_CASE("safetensors: header that is not JSON") {
  for (const std::string h : {"", "{", "{} x", "{}{}", "{\"a\":1,}", "/**/{}", "{'a':1}",
                              "\xEF\xBB\xBF{}", "{\"__metadata__\":{\"a\":\"\\ud800\"}}"}) {
    CAPTURE(h);
    CHECK_HAS(header_refusal(h), "header is not valid JSON");
  }
}

TEST_CASE("safetensors: header that is not an object") {
  for (const std::string h : {"[]", "1", "\"s\"", "null"}) {
    CAPTURE(h);
    CHECK_HAS(header_refusal(h), "header is not a JSON object");
  }
}

TEST_CASE("safetensors: duplicate keys are refused") {
  const std::string w = entry("w", "U8", "[1]", 0, 1);
  SUBCASE("tensor name at top level") {
    const std::string msg = header_refusal(braces(w + "," + w), Bytes(1));
    CHECK_HAS(msg, "duplicate key 'w' at top level");
  }
  SUBCASE("inside a tensor entry") {
    const std::string msg = header_refusal(
        R"({"w":{"dtype":"U8","shape":[1],"dtype":"U8","data_offsets":[0,1]}})", Bytes(1));
    CHECK_HAS(msg, "duplicate key 'dtype' in 'w'");
  }
  SUBCASE("__metadata__ twice") {
    CHECK_HAS(header_refusal(R"({"__metadata__":{},"__metadata__":{}})"),
              "duplicate key '__metadata__'");
  }
  SUBCASE("inside __metadata__") {
    CHECK_HAS(header_refusal(R"({"__metadata__":{"a":"1","a":"1"}})"),
              "duplicate key 'a' in '__metadata__'");
  }
  SUBCASE("nested in an ignored value") {
    CHECK_HAS(header_refusal(
                  R"({"w":{"x":[{"k":1,"k":2}],"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
                  Bytes(1)),
              "duplicate key 'k' in 'w' > 'x' > []");
  }
  SUBCASE("same key in sibling objects is fine") {
    CHECK_NOTHROW(attn::parse_safetensors(
        image(R"({"w":{"x":[{"k":1},{"k":2}],"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
              Bytes(1)),
        kSrc));
  }
}

TEST_CASE("safetensors: JSON nesting beyond serde_json's limit") {
  // The top-level object and the tensor entry are two levels; serde_json allows 127.
  auto nested = [](int levels) {
    return R"({"w":{"x":)" + std::string(levels - 2, '[') + std::string(levels - 2, ']') +
           R"(,"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  };
  CHECK_NOTHROW(attn::parse_safetensors(image(nested(127), Bytes(1)), kSrc));
  CHECK_HAS(header_refusal(nested(128), Bytes(1)), "header nests JSON deeper than 127 levels");
}

TEST_CASE("safetensors: __metadata__ must map strings to strings") {
  CHECK_HAS(header_refusal(R"({"__metadata__":{"a":1}})"),
            "'__metadata__' entry 'a' must be a string, found number");
  CHECK_HAS(header_refusal(R"({"__metadata__":{"a":{}}})"), "entry 'a' must be a string");
  CHECK_HAS(header_refusal(R"({"__metadata__":["a"]})"),
            "'__metadata__' must be an object of strings, found array");
  CHECK_HAS(header_refusal(R"({"__metadata__":"a"})"), "'__metadata__' must be an object");
}

TEST_CASE("safetensors: malformed tensor entries") {
  SUBCASE("not an object") {
    CHECK_HAS(header_refusal(R"({"w":["U8",[1],[0,1]]})", Bytes(1)),
              "tensor 'w': entry must be an object, found array");
  }
  SUBCASE("missing fields") {
    CHECK_HAS(header_refusal(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", Bytes(1)),
              "tensor 'w': missing 'dtype'");
    CHECK_HAS(header_refusal(R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", Bytes(1)),
              "tensor 'w': missing 'shape'");
    CHECK_HAS(header_refusal(R"({"w":{"dtype":"U8","shape":[1]}})", Bytes(1)),
              "tensor 'w': missing 'data_offsets'");
  }
  SUBCASE("names with control characters stay on one line") {
    const std::string msg = header_refusal("{\"a\\nb\":{}}");
    CHECK_HAS(msg, "tensor 'a\\x0ab'");
  }
}

TEST_CASE("safetensors: bad dtype") {
  CHECK_HAS(header_refusal(braces(entry("w", "F33", "[1]", 0, 4)), Bytes(4)),
            "tensor 'w': unknown dtype 'F33' (expected one of BOOL, U8,");
  CHECK_HAS(header_refusal(braces(entry("w", "f32", "[1]", 0, 4)), Bytes(4)),
            "unknown dtype 'f32'");
  CHECK_HAS(header_refusal(R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", Bytes(4)),
            "tensor 'w': dtype must be a string, found number");
}

TEST_CASE("safetensors: shape must be a list of non-negative integers") {
  for (const std::string shape : {"[-1]", "[2.0]", "[\"2\"]", "2", "[[2]]", "[-0]", "[1e1]",
                                  "[18446744073709551616]", "null"}) {
    CAPTURE(shape);
    const std::string msg = header_refusal(braces(entry("w", "U8", shape, 0, 2)), Bytes(2));
    CHECK_HAS(msg, "tensor 'w': shape must be a list of non-negative integers, found");
  }
}

TEST_CASE("safetensors: overflowing shape product") {
  SUBCASE("element count") {
    CHECK_HAS(
        header_refusal(braces(entry("w", "I32", "[2,18446744073709551614]", 0, 16)), Bytes(16)),
        "tensor 'w': shape [2, 18446744073709551614] x I32 overflows 64 bits");
  }
  SUBCASE("byte count") {
    CHECK_HAS(
        header_refusal(braces(entry("w", "I32", "[2,9223372036854775807]", 0, 16)), Bytes(16)),
        "overflows 64 bits");
  }
  SUBCASE("a later zero does not save it, as in the reference") {
    CHECK_HAS(header_refusal(braces(entry("w", "U8", "[4294967296,4294967296,0]", 0, 0))),
              "overflows 64 bits");
  }
  SUBCASE("a dimension above 2^63 - 1 after a zero") {
    CHECK_HAS(header_refusal(braces(entry("w", "U8", "[0,9223372036854775808]", 0, 0))),
              "tensor 'w': shape dimension 9223372036854775808 exceeds 2^63 - 1");
  }
}

TEST_CASE("safetensors: bad data_offsets") {
  for (const std::string offsets :
       {"[0]", "[0,1,2]", "[-1,1]", "[0,1.0]", "[\"0\",1]", "{}", "[0,18446744073709551616]"}) {
    CAPTURE(offsets);
    const std::string msg = header_refusal(
        R"({"w":{"dtype":"U8","shape":[1],"data_offsets":)" + offsets + "}}", Bytes(1));
    CHECK_HAS(msg, "tensor 'w': data_offsets must be [begin, end] with non-negative integers");
  }
  SUBCASE("end before begin") {
    CHECK_HAS(header_refusal(braces(entry("w", "U8", "[0]", 4, 0)), Bytes(4)),
              "tensor 'w': data_offsets [4, 0] end before they begin");
  }
}

TEST_CASE("safetensors: byte length must equal shape product x dtype size") {
  const std::string name = "layers.0.attention.wq.weight";
  const std::string msg = header_refusal(braces(entry(name, "F32", "[4,6]", 0, 100)), Bytes(100));
  CHECK(msg ==
        "t.safetensors: tensor 'layers.0.attention.wq.weight': data_offsets [0, 100] give "
        "100 bytes, expected 96 (shape [4, 6] x F32)");
}

TEST_CASE("safetensors: tensors must tile the data section") {
  SUBCASE("hole before the first tensor") {
    CHECK_HAS(header_refusal(braces(entry("w", "U8", "[4]", 4, 8)), Bytes(8)),
              "tensor 'w': data_offsets [4, 8] leave a hole: the bytes before begin at 0");
  }
  SUBCASE("hole between tensors") {
    const std::string msg = header_refusal(
        braces(entry("a", "U8", "[4]", 0, 4) + "," + entry("b", "U8", "[4]", 6, 10)), Bytes(10));
    CHECK_HAS(msg, "tensor 'b': data_offsets [6, 10] leave a hole");
    CHECK_HAS(msg, "(end of tensor 'a')");
  }
  SUBCASE("overlap") {
    const std::string msg = header_refusal(
        braces(entry("a", "U8", "[8]", 0, 8) + "," + entry("b", "U8", "[8]", 4, 12)), Bytes(12));
    CHECK_HAS(msg, "tensor 'b': data_offsets [4, 12] overlap tensor 'a', which ends at 8");
  }
  SUBCASE("two tensors on the same bytes") {
    const std::string msg = header_refusal(
        braces(entry("a", "U8", "[8]", 0, 8) + "," + entry("b", "U8", "[8]", 0, 8)), Bytes(16));
    CHECK_HAS(msg, "tensor 'b': data_offsets [0, 8] overlap tensor 'a'");
  }
  SUBCASE("trailing bytes") {
    CHECK_HAS(header_refusal(braces(entry("w", "U8", "[4]", 0, 4)), Bytes(7)),
              "data section is 7 bytes but the tensors end at 4: 3 trailing bytes");
    CHECK_HAS(header_refusal("{}", Bytes(1)), "1 trailing bytes");
  }
  SUBCASE("data section too short") {
    CHECK_HAS(header_refusal(braces(entry("w", "U8", "[4]", 0, 4)), Bytes(3)),
              "data section is 3 bytes but the tensors need 4: the file is truncated");
  }
}

TEST_CASE("safetensors: open_safetensors refusals name the file") {
  TempDir dir;
  SUBCASE("missing file") {
    const fs::path p = dir.path / "missing.safetensors";
    const std::string msg = refusal([&] { attn::open_safetensors(p); });
    CHECK_HAS(msg, p.string() + ": cannot open the safetensors file: No such file or directory");
  }
  SUBCASE("empty file") {
    const fs::path p = dir.path / "empty.safetensors";
    write_file(p, {});
    CHECK_HAS(refusal([&] { attn::open_safetensors(p); }), p.string() + ": file is empty");
  }
  SUBCASE("directory") {
    CHECK_HAS(refusal([&] { attn::open_safetensors(dir.path); }), "not a regular file");
  }
  SUBCASE("invalid content") {
    const fs::path p = dir.path / "bad.safetensors";
    write_file(p, image(braces(entry("w", "U8", "[4]", 0, 4)), Bytes(5)));
    CHECK_HAS(refusal([&] { attn::open_safetensors(p); }), p.string() + ": data section is 5");
  }
}

TEST_CASE("safetensors: SafetensorsFile moves and lookups") {
  TempDir dir;
  const fs::path p = dir.path / "m.safetensors";
  const float one = 1.0f, two = 2.0f;
  attn::write_safetensors(p, {{"x", {1}, &one}});
  attn::SafetensorsFile a = attn::open_safetensors(p);
  const std::uint8_t* base = a.base;
  attn::SafetensorsFile b(std::move(a));
  CHECK(a.base == nullptr);
  CHECK(a.size == 0);
  CHECK(b.base == base);
  std::vector<float> s;
  CHECK(*attn::tensor_as_f32(b, "x", s) == 1.0f);

  const fs::path q = dir.path / "n.safetensors";
  attn::write_safetensors(q, {{"y", {1}, &two}});
  attn::SafetensorsFile c = attn::open_safetensors(q);
  CHECK(is_mapped(q));
  c = std::move(b);
  CHECK_FALSE(is_mapped(q));
  CHECK(b.base == nullptr);
  CHECK(c.path == p.string());
  CHECK(*attn::tensor_as_f32(c, "x", s) == 1.0f);

  const std::string msg = refusal([&] { c.info("nope"); });
  CHECK(msg == p.string() + ": no tensor 'nope'");
  CHECK_HAS(refusal([&] { attn::tensor_as_f32(c, "nope", s); }), "no tensor 'nope'");

  { attn::SafetensorsFile gone = std::move(c); }
  CHECK_FALSE(is_mapped(p));  // the destructor unmapped it
}

TEST_CASE("safetensors: f16 conversion") {
  CHECK(attn::f16_to_f32(0x3C00) == 1.0f);
  CHECK(attn::f16_to_f32(0xC000) == -2.0f);
  CHECK(attn::f16_to_f32(0x7C00) == INFINITY);
  CHECK(attn::f16_to_f32(0xFC00) == -INFINITY);
  CHECK(attn::f16_to_f32(0x0001) == 5.960464477539063e-08f);
  CHECK(attn::f16_to_f32(0x03FF) == std::ldexp(1023.0f, -24));
  CHECK(attn::f16_to_f32(0x0400) == std::ldexp(1.0f, -14));
  CHECK(attn::f16_to_f32(0x7BFF) == 65504.0f);
  CHECK(std::signbit(attn::f16_to_f32(0x8000)));
  CHECK(attn::f16_to_f32(0x8000) == 0.0f);
  CHECK(std::isnan(attn::f16_to_f32(0x7E00)));
  CHECK(std::isnan(attn::f16_to_f32(0x7C01)));
  // Every pattern against the textbook definition.
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const int exp = (h >> 10) & 0x1F;
    const double mant = h & 0x3FF;
    if (exp == 31) continue;
    const double mag = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
    const double want = (h & 0x8000) ? -mag : mag;
    if (attn::f16_to_f32(static_cast<std::uint16_t>(h)) != static_cast<float>(want)) {
      FAIL_CHECK("f16 pattern " << h);
      break;
    }
  }
}

TEST_CASE("safetensors: bf16 conversion") {
  CHECK(attn::bf16_to_f32(0x3F80) == 1.0f);
  CHECK(attn::bf16_to_f32(0xC000) == -2.0f);
  CHECK(attn::bf16_to_f32(0x7F80) == INFINITY);
  CHECK(attn::bf16_to_f32(0xFF80) == -INFINITY);
  CHECK(attn::bf16_to_f32(0x0001) == std::ldexp(1.0f, -133));  // subnormal
  CHECK(std::isnan(attn::bf16_to_f32(0x7FC0)));
  CHECK(std::signbit(attn::bf16_to_f32(0x8000)));
}

TEST_CASE("safetensors: tensor_as_f32 converts F16 and BF16 from a file") {
  TempDir dir;
  const fs::path p = dir.path / "h.safetensors";
  // One byte of U8 first puts both 2-byte tensors at odd addresses.
  Bytes data = {7};
  const Bytes h16 = halves_le({0x3C00, 0xC000, 0x7C00, 0x0001});
  const Bytes b16 = halves_le({0x3F80, 0xC000});
  data.insert(data.end(), h16.begin(), h16.end());
  data.insert(data.end(), b16.begin(), b16.end());
  write_file(p,
             image(braces(entry("pad", "U8", "[1]", 0, 1) + "," + entry("h", "F16", "[2,2]", 1, 9) +
                          "," + entry("b", "BF16", "[2]", 9, 13)),
                   data));
  const attn::SafetensorsFile f = attn::open_safetensors(p);
  std::vector<float> s;
  const float* h = attn::tensor_as_f32(f, "h", s);
  CHECK(h == s.data());
  CHECK(std::vector<float>(h, h + 4) ==
        std::vector<float>{1.0f, -2.0f, INFINITY, 5.960464477539063e-08f});
  const float* b = attn::tensor_as_f32(f, "b", s);
  CHECK(std::vector<float>(b, b + 2) == std::vector<float>{1.0f, -2.0f});
}

TEST_CASE("safetensors: misaligned F32 is copied with the right values") {
  TempDir dir;
  const fs::path p = dir.path / "odd.safetensors";
  const std::vector<float> v = {1.5f, -3.0f, 1e-40f, 123456.789f};
  // An 11-byte header puts the data section at file offset 19, misaligned for float.
  const std::string header = braces(entry("w", "F32", "[4]", 0, 16));
  const std::string padded = header + std::string((11 - header.size() % 8 + 8) % 8, ' ');
  REQUIRE(padded.size() % 8 == 3);
  write_file(p, image(padded, floats_le(v)));
  const attn::SafetensorsFile f = attn::open_safetensors(p);
  REQUIRE(f.header.data_start % 4 != 0);
  std::vector<float> s;
  const float* w = attn::tensor_as_f32(f, "w", s);
  CHECK(w == s.data());
  CHECK(std::vector<float>(w, w + 4) == v);
}

TEST_CASE("safetensors: tensor_as_f32 refuses other dtypes") {
  TempDir dir;
  const fs::path p = dir.path / "i.safetensors";
  write_file(p, image(braces(entry("ids", "I32", "[2]", 0, 8)), Bytes(8)));
  const attn::SafetensorsFile f = attn::open_safetensors(p);
  std::vector<float> s;
  const std::string msg = refusal([&] { attn::tensor_as_f32(f, "ids", s); });
  CHECK(msg == p.string() +
                   ": tensor 'ids': expected F32, BF16, F16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, Q4_1, "
                   "Q5_0, Q5_1, Q2_K, Q3_K, IQ4_NL or IQ4_XS, got I32");
}

TEST_CASE("safetensors: write_safetensors leaves nothing behind") {
  TempDir dir;
  const float x = 1.0f;
  SUBCASE("replacing an existing file") {
    const fs::path p = dir.path / "w.safetensors";
    write_file(p, Bytes{'o', 'l', 'd'});
    attn::write_safetensors(p, {{"x", {1}, &x}});
    CHECK(dir.names() == std::vector<std::string>{"w.safetensors"});
    CHECK(attn::open_safetensors(p).info("x").end == 4);
  }
  SUBCASE("directory does not exist") {
    const fs::path p = dir.path / "no_such_dir" / "w.safetensors";
    try {
      attn::write_safetensors(p, {{"x", {1}, &x}});
      FAIL_CHECK("no error");
    } catch (const std::runtime_error& e) {
      CHECK_HAS(e.what(), p.string() + ": cannot write the output: directory");
    }
    CHECK(dir.names().empty());
  }
  SUBCASE("a directory is refused before anything is written") {
    const fs::path p = dir.path / "target";
    fs::create_directory(p);
    try {
      attn::write_safetensors(p, {{"x", {1}, &x}});
      FAIL_CHECK("no error");
    } catch (const std::runtime_error& e) {
      CHECK_HAS(e.what(), p.string() + ": cannot write the output: it is a directory");
    }
    CHECK(dir.names() == std::vector<std::string>{"target"});
  }
  SUBCASE("invalid tensors") {
    const fs::path p = dir.path / "w.safetensors";
    CHECK_THROWS_AS(attn::write_safetensors(p, {{"x", {1}, &x}, {"x", {1}, &x}}),
                    std::runtime_error);
    CHECK_THROWS_AS(attn::write_safetensors(p, {{"__metadata__", {1}, &x}}), std::runtime_error);
    CHECK_THROWS_AS(attn::write_safetensors(p, {{"x", {-1}, &x}}), std::runtime_error);
    CHECK_THROWS_AS(attn::write_safetensors(p, {{"x", {1}, nullptr}}), std::runtime_error);
    CHECK_THROWS_AS(attn::write_safetensors(p, {{"x", {1ll << 62, 4}, &x}}), std::runtime_error);
    CHECK(dir.names().empty());
  }
}

TEST_CASE("tensor source: a file and a checkpoint describe and give each tensor alike") {
  const auto path = test::golden_dir() / "bf16_llama_mqa_half" / "weights.safetensors";
  attn::SafetensorsFile file = attn::open_safetensors(path);
  const std::unique_ptr<attn::TensorSource> source = attn::open_tensor_source(path);
  CHECK(source->source() == path.string());
  REQUIRE(source->names() == file.names());
  REQUIRE(!file.names().empty());
  for (const std::string& name : file.names()) {
    CAPTURE(name);
    const attn::SourceTensor described = source->describe(name), given = source->tensor(name);
    CHECK(described.data == nullptr);  // the header alone
    CHECK(file.describe(name).data == nullptr);
    for (const attn::SourceTensor& t : {described, given, file.tensor(name)}) {
      CHECK(t.dtype == attn::dtype_name(file.info(name).dtype));
      CHECK(t.shape == file.info(name).shape);
      CHECK(t.size == file.info(name).end - file.info(name).begin);
      CHECK(t.type == attn::weight_type_of_safetensors(t.dtype));
    }
    CHECK(given.data != nullptr);
    CHECK(std::memcmp(given.data, file.bytes(file.info(name)), given.size) == 0);
  }
  CHECK_THROWS_WITH_AS(source->tensor("no.such.tensor"),
                       (path.string() + ": tensor 'no.such.tensor' is missing").c_str(),
                       attn::InputError);
}

TEST_CASE("tensor source: an index describes from the shards' headers and names the shard") {
  const auto dir = test::golden_dir() / "hf" / "llama31_gqa_bf16";
  const std::unique_ptr<attn::TensorSource> source =
      attn::open_tensor_source(dir / "model.safetensors.index.json");
  REQUIRE(!source->names().empty());
  for (const std::string& name : source->names()) {
    CAPTURE(name);
    const attn::SourceTensor d = source->describe(name);
    CHECK(d.data == nullptr);
    CHECK(d.file.starts_with((dir / "model-0000").string()));
    const attn::SourceTensor t = source->tensor(name);
    CHECK(t.data != nullptr);
    CHECK(t.shape == d.shape);
    CHECK(t.dtype == d.dtype);
    CHECK(t.file == d.file);
  }
}
