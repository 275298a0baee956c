// The GGUF reader (lib/attn/io/gguf.hpp) against llama.cpp's gguf-py: fixtures written by its
// GGUFWriter and read back by its GGUFReader (tests/golden/make_gguf.py, expected.json); then
// hostile files made by a small writer here, one per check of the reader, each refused with an
// InputError naming the file and the field; then ggml-org's stories260K.gguf when present.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/io/gguf.hpp"
#include "attn/io/tensor_source.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;
using attn::GgufValueType;

namespace {

const fs::path kStoriesGguf = test::source_dir() / "weights" / "stories260K.gguf";

fs::path fixture(const std::string& name) {
  return test::golden_dir() / "gguf" / name;
}

Bytes from_hex(const std::string& hex) {
  Bytes out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(std::uint8_t(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::string as_string(const Bytes& b) {
  return {b.begin(), b.end()};
}

// gguf-py's GGUFValueType names, as expected.json writes them.
GgufValueType type_of(const std::string& name) {
  static const std::map<std::string, GgufValueType> kTypes = {
      {"uint8", GgufValueType::u8},      {"int8", GgufValueType::i8},
      {"uint16", GgufValueType::u16},    {"int16", GgufValueType::i16},
      {"uint32", GgufValueType::u32},    {"int32", GgufValueType::i32},
      {"float32", GgufValueType::f32},   {"bool", GgufValueType::boolean},
      {"string", GgufValueType::string}, {"array", GgufValueType::array},
      {"uint64", GgufValueType::u64},    {"int64", GgufValueType::i64},
      {"float64", GgufValueType::f64}};
  return kTypes.at(name);
}

bool is_float(GgufValueType t) {
  return t == GgufValueType::f32 || t == GgufValueType::f64;
}

// One scalar value of the fixture against gguf-py's.
void check_scalar(const attn::GgufFile& f, const std::string& key, const nlohmann::json& e) {
  const GgufValueType t = type_of(e["type"]);
  if (t == GgufValueType::string) {
    CHECK(f.string(key) == as_string(from_hex(e["hex"][0])));
  } else if (t == GgufValueType::boolean) {
    CHECK(f.boolean(key) == e["value"].get<bool>());
  } else if (is_float(t)) {
    CHECK(f.number(key) == e["value"].get<double>());
  } else if (e["value"].is_number_unsigned() &&
             e["value"].get<std::uint64_t>() > std::uint64_t(INT64_MAX)) {
    CHECK_THROWS_WITH_AS(f.integer(key), doctest::Contains("is out of range"), attn::InputError);
  } else {
    CHECK(f.integer(key) == e["value"].get<std::int64_t>());
    CHECK(f.number(key) == double(e["value"].get<std::int64_t>()));
  }
}

// One array value of the fixture against gguf-py's.
void check_array(const attn::GgufFile& f, const std::string& key, const nlohmann::json& e) {
  const GgufValueType element = type_of(e["element"]);
  const attn::GgufValue* v = f.find(key);
  REQUIRE(v != nullptr);
  CHECK(v->element == element);
  CHECK(v->count == e["count"].get<std::uint64_t>());
  if (element == GgufValueType::string) {
    const std::vector<std::string_view> got = f.strings(key);
    REQUIRE(got.size() == e["hex"].size());
    for (std::size_t i = 0; i < got.size(); ++i)
      CHECK(std::string(got[i]) == as_string(from_hex(e["hex"][i])));
  } else if (element == GgufValueType::f32) {
    const std::vector<float> got = f.floats(key);
    REQUIRE(got.size() == e["value"].size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == e["value"][i].get<double>());
  } else if (element == GgufValueType::f64 || element == GgufValueType::boolean) {
    // No typed read: the element bytes as the file holds them.
    for (std::size_t i = 0; i < e["value"].size(); ++i) {
      if (element == GgufValueType::boolean) {
        CHECK(v->data[i] == (e["value"][i].get<bool>() ? 1 : 0));
      } else {
        double d = 0;
        std::memcpy(&d, v->data + 8 * i, 8);
        CHECK(d == e["value"][i].get<double>());
      }
    }
    CHECK_THROWS_AS(f.integers(key), attn::InputError);
  } else {
    const std::vector<std::int64_t> got = f.integers(key);
    REQUIRE(got.size() == e["value"].size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == e["value"][i].get<std::int64_t>());
  }
}

// ---- A small GGUF writer for hostile files ----

void put32(Bytes& b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(std::uint8_t(v >> (8 * i)));
}
void put64(Bytes& b, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(std::uint8_t(v >> (8 * i)));
}
void put_str(Bytes& b, const std::string& s) {
  put64(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

struct Tensor {
  std::string name;
  std::vector<std::uint64_t> ne;  // ggml's order, innermost first
  std::uint32_t type = 0;         // F32
  std::uint64_t offset = 0;       // in the data section
};

// A valid file unless a test changes a field: two keys, two F32 tensors, alignment 32.
struct Gguf {
  std::uint32_t version = 3;
  std::optional<std::uint64_t> n_tensors, n_kv;  // overrides of the counts
  std::vector<Bytes> kvs;                        // each key, type and value as written
  std::vector<Tensor> tensors = {{"a", {4, 2}, 0, 0}, {"b", {8}, 0, 32}};
  std::uint64_t data_bytes = 64;
  std::uint64_t alignment = 32;  // the padding the writer uses

  Gguf() {
    kv_u32("general.alignment", 32);
    kv_string("general.name", "x");
  }
  void kv_u32(const std::string& key, std::uint32_t v) {
    Bytes b;
    put_str(b, key);
    put32(b, 4);
    put32(b, v);
    kvs.push_back(b);
  }
  void kv_string(const std::string& key, const std::string& v) {
    Bytes b;
    put_str(b, key);
    put32(b, 8);
    put_str(b, v);
    kvs.push_back(b);
  }
  // A key with its type and value bytes given raw.
  void kv_raw(const std::string& key, const Bytes& type_and_value) {
    Bytes b;
    put_str(b, key);
    b.insert(b.end(), type_and_value.begin(), type_and_value.end());
    kvs.push_back(b);
  }
  Bytes bytes() const {
    Bytes b = {'G', 'G', 'U', 'F'};
    put32(b, version);
    put64(b, n_tensors.value_or(tensors.size()));
    put64(b, n_kv.value_or(kvs.size()));
    for (const Bytes& kv : kvs) b.insert(b.end(), kv.begin(), kv.end());
    for (const Tensor& t : tensors) {
      put_str(b, t.name);
      put32(b, std::uint32_t(t.ne.size()));
      for (std::uint64_t d : t.ne) put64(b, d);
      put32(b, t.type);
      put64(b, t.offset);
    }
    b.resize((b.size() + alignment - 1) / alignment * alignment);
    b.resize(b.size() + data_bytes, 0x5A);
    return b;
  }
};

const std::string kName = "h.gguf";

// The reader's refusal of `g`: an InputError naming the file, whose text is returned.
std::string refusal(const Bytes& b) {
  try {
    attn::parse_gguf(b, kName);
  } catch (const attn::InputError& e) {
    const std::string msg = e.what();
    CHECK(msg.rfind(kName + ": ", 0) == 0);
    return msg;
  }
  FAIL("accepted");
  return {};
}

std::string refusal(const Gguf& g) {
  return refusal(g.bytes());
}

// The refusal is taken before the check: doctest's reporter must not run refusal's own checks
// while it prints this one.
#define CHECK_REFUSED(g, text)                                         \
  do {                                                                 \
    const std::string refused_ = refusal(g);                           \
    CHECK_MESSAGE(refused_.find(text) != std::string::npos, refused_); \
  } while (0)

}  // namespace

TEST_CASE("gguf: the fixtures read as llama.cpp's gguf-py reads them") {
  std::ifstream in(fixture("expected.json"));
  REQUIRE(in);
  const nlohmann::json expected = nlohmann::json::parse(in);
  for (const auto& item : expected.items()) {
    const std::string file = item.key();  // clang 14 cannot capture structured bindings
    const nlohmann::json& e = item.value();
    CAPTURE(file);
    const auto f = attn::open_gguf(fixture(file));
    CHECK(f->path == fixture(file).string());
    CHECK(f->version == e["version"].get<std::uint32_t>());
    CHECK(f->alignment == e["alignment"].get<std::uint64_t>());
    CHECK(f->bytes.size() == e["file_size"].get<std::uint64_t>());
    REQUIRE(f->kv.size() == e["kv"].size());
    for (std::size_t i = 0; i < f->kv.size(); ++i) {
      const nlohmann::json& kv = e["kv"][i];
      const std::string key = kv["key"];
      CAPTURE(key);
      CHECK(f->kv[i].first == key);  // in file order
      CHECK(f->kv[i].second.type == type_of(kv["type"]));
      if (kv["type"] == "array")
        check_array(*f, key, kv);
      else
        check_scalar(*f, key, kv);
    }
    REQUIRE(f->tensors.size() == e["tensors"].size());
    const auto source = attn::gguf_tensor_source(f);
    CHECK(source->source() == fixture(file).string());
    CHECK(source->names().size() == f->tensors.size());
    CHECK(attn::open_tensor_source(fixture(file))->names() == source->names());
    for (std::size_t i = 0; i < f->tensors.size(); ++i) {
      const nlohmann::json& t = e["tensors"][i];
      const attn::GgufTensorInfo& got = f->tensors[i];
      CAPTURE(got.name);
      CHECK(got.name == t["name"].get<std::string>());
      CHECK(got.ggml_type == t["ggml_type"].get<std::uint32_t>());
      CHECK(attn::ggml_type_name(got.ggml_type) == t["type_name"].get<std::string>());
      CHECK(got.shape == t["shape"].get<std::vector<std::int64_t>>());
      CHECK(got.offset == t["offset"].get<std::uint64_t>());
      CHECK(got.size == t["size"].get<std::uint64_t>());
      CHECK(got.offset % f->alignment == 0);
      const Bytes data = from_hex(t["hex"]);
      REQUIRE(data.size() == got.size);
      // The source's view is the mapped file's bytes, not a copy.
      const attn::SourceTensor s = source->tensor(got.name);
      CHECK(s.data == f->bytes.data() + got.offset);
      CHECK(s.dtype == t["type_name"].get<std::string>());
      CHECK(s.shape == got.shape);
      CHECK(s.size == got.size);
      CHECK(std::memcmp(s.data, data.data(), data.size()) == 0);
      CHECK(s.type == attn::weight_type_of_ggml(got.ggml_type));
      const attn::SourceTensor d = source->describe(got.name);
      CHECK(d.data == nullptr);
      CHECK(d.shape == got.shape);
    }
  }
}

TEST_CASE("gguf: tensors as a TensorSource") {
  const auto source = attn::open_tensor_source(fixture("v3_align32.gguf"));
  CHECK(source->names() == std::vector<std::string>{"t.f16", "t.f32_1d", "t.f32_2d", "t.f32_3d",
                                                    "t.f32_4d", "t.i32", "t.q4_k", "t.q8_0"});
  CHECK(source->tensor("t.f32_2d").type == attn::WeightType::f32);
  CHECK(source->tensor("t.f16").type == attn::WeightType::f16);
  // No weight type reads I32: the weights layer refuses it naming the tensor and "I32".
  CHECK(source->tensor("t.i32").dtype == "I32");
  CHECK(!source->tensor("t.i32").type);
  CHECK(source->tensor("t.q4_k").dtype == "Q4_K");
  CHECK(source->contains("t.q8_0"));
  CHECK(!source->contains("t.missing"));
  CHECK_THROWS_WITH_AS(source->tensor("t.missing"),
                       doctest::Contains("v3_align32.gguf: tensor 't.missing' is missing"),
                       attn::InputError);
  std::vector<float> storage;
  const float* f = attn::tensor_as_f32(source->tensor("t.f16"), "t.f16", storage);
  CHECK(std::isfinite(f[0]));
}

TEST_CASE("gguf: typed reads refuse another type, naming the file and the key") {
  const auto f = attn::open_gguf(fixture("v3_align32.gguf"));
  auto refused = [&](auto read, const std::string& text) {
    try {
      read();
    } catch (const attn::InputError& e) {
      CHECK_MESSAGE(std::string(e.what()).find(text) != std::string::npos, e.what());
      CHECK(std::string(e.what()).find("v3_align32.gguf: key '") != std::string::npos);
      return;
    }
    FAIL("accepted: " << text);
  };
  refused([&] { f->integer("test.string"); }, "'test.string': expected an integer, found string");
  refused([&] { f->integer("test.f32"); }, "expected an integer, found f32");
  refused([&] { f->number("test.bool_true"); }, "expected a number, found bool");
  refused([&] { f->boolean("test.u8"); }, "expected a bool, found u8");
  refused([&] { f->string("test.arr_string"); }, "expected a string, found array of string");
  refused([&] { f->strings("test.string"); }, "expected an array of string, found string");
  refused([&] { f->strings("test.arr_u8"); }, "expected an array of string, found array of u8");
  refused([&] { f->floats("test.arr_f64"); }, "expected an array of f32, found array of f64");
  refused([&] { f->integers("test.arr_f32"); }, "expected an array of integers");
  refused([&] { f->integer("test.u64_big"); },
          "'test.u64_big': 18446744073709551615 is out of range");
  // Absent keys are not errors.
  CHECK(!f->integer("absent"));
  CHECK(!f->number("absent"));
  CHECK(!f->boolean("absent"));
  CHECK(!f->string("absent"));
  CHECK(f->strings("absent").empty());
  CHECK(f->floats("absent").empty());
  CHECK(f->integers("absent").empty());
  CHECK(f->find("absent") == nullptr);
  CHECK(f->find_tensor("absent") == nullptr);
}

TEST_CASE("gguf: the writer here makes valid files (the hostile cases' base)") {
  const Bytes bytes = Gguf().bytes();  // outlives the file, which points into it
  const attn::GgufFile f = attn::parse_gguf(bytes, kName);
  REQUIRE(f.tensors.size() == 2);
  CHECK(f.tensors[0].shape == std::vector<std::int64_t>{2, 4});
  CHECK(f.tensors[1].offset == f.data_start + 32);
  CHECK(f.string("general.name") == "x");
  SUBCASE("no tensors, no data section") {
    Gguf g;
    g.tensors.clear();
    g.data_bytes = 0;
    CHECK(attn::parse_gguf(g.bytes(), kName).tensors.empty());
  }
  SUBCASE("version 2") {
    Gguf g;
    g.version = 2;
    CHECK(attn::parse_gguf(g.bytes(), kName).version == 2);
  }
  SUBCASE("alignment 1 and 64, and none (32)") {
    for (std::uint32_t a : {1u, 64u, 0u}) {
      Gguf g;
      g.kvs.erase(g.kvs.begin());
      if (a != 0) g.kv_u32("general.alignment", a);
      g.alignment = a == 0 ? 32 : a;
      g.tensors[1].offset = 64;
      g.data_bytes = 96;
      CHECK(attn::parse_gguf(g.bytes(), kName).alignment == (a == 0 ? 32 : a));
    }
  }
  SUBCASE("an empty array, a Q8_0 tensor, a 4-D tensor") {
    Gguf g;
    Bytes arr;
    put32(arr, 9);
    put32(arr, 6);
    put64(arr, 0);
    g.kv_raw("empty", arr);
    g.tensors = {{"q", {64, 1}, 8, 0}, {"d4", {1, 2, 3, 1}, 0, 96}};
    g.data_bytes = 128;
    const Bytes bytes = g.bytes();  // outlives the file, which points into it
    const attn::GgufFile q = attn::parse_gguf(bytes, kName);
    CHECK(q.floats("empty").empty());
    CHECK(q.tensors[0].size == 68);
    CHECK(q.tensors[1].shape == std::vector<std::int64_t>{1, 3, 2, 1});
  }
}

TEST_CASE("gguf: hostile headers are refused naming the file and the field") {
  Gguf g;
  SUBCASE("magic") {
    Bytes b = g.bytes();
    b[0] = 'g';
    CHECK(refusal(b).find("not a GGUF file") != std::string::npos);
  }
  SUBCASE("version 1, 4 and big-endian") {
    g.version = 1;
    CHECK_REFUSED(g, "header: version 1 is not supported (2 or 3)");
    g.version = 4;
    CHECK_REFUSED(g, "version 4 is not supported");
    g.version = 3u << 24;
    CHECK_REFUSED(g, "a big-endian GGUF file");
  }
  SUBCASE("counts larger than the file could hold fail at once") {
    g.n_tensors = std::uint64_t{1} << 60;
    const auto start = std::chrono::steady_clock::now();
    CHECK_REFUSED(g, "header: tensor count 1152921504606846976 is more than the file's");
    g.n_tensors.reset();
    g.n_kv = ~std::uint64_t{0};
    CHECK_REFUSED(g, "header: kv count 18446744073709551615 is more than the file's");
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  }
  SUBCASE("counts one more than the file holds") {
    g.n_kv = 3;
    refusal(g);
  }
  SUBCASE("every truncation") {
    const Bytes full = g.bytes();
    for (std::size_t n = 0; n < full.size(); ++n) {
      CAPTURE(n);
      refusal(Bytes(full.begin(), full.begin() + std::ptrdiff_t(n)));
    }
  }
}

TEST_CASE("gguf: hostile metadata is refused naming the file and the key") {
  Gguf g;
  SUBCASE("key length past the end") {
    Bytes b;
    put64(b, std::uint64_t{1} << 63);
    g.kvs.push_back(b);
    CHECK_REFUSED(g, "kv 2: key length 9223372036854775808 at offset");
    CHECK_REFUSED(g, "runs past the end of the file");
  }
  SUBCASE("string value length past the end") {
    Bytes v;
    put32(v, 8);
    put64(v, 1000000);
    g.kv_raw("s", v);
    CHECK_REFUSED(g, "key 's': string length 1000000 at offset");
  }
  SUBCASE("arrays whose count times size overflows or runs past the end") {
    for (std::uint64_t count : {std::uint64_t{1} << 62, ~std::uint64_t{0}, std::uint64_t{1000}}) {
      Gguf h;
      Bytes v;
      put32(v, 9);
      put32(v, 4);  // u32 elements
      put64(v, count);
      h.kv_raw("arr", v);
      CHECK_REFUSED(h, "key 'arr': array of " + std::to_string(count) + " u32 values");
    }
  }
  SUBCASE("an array of strings longer than the file") {
    Bytes v;
    put32(v, 9);
    put32(v, 8);
    put64(v, std::uint64_t{1} << 61);
    g.kv_raw("toks", v);
    CHECK_REFUSED(g, "key 'toks': array of 2305843009213693952 string values");
  }
  SUBCASE("an array of strings with one string past the end") {
    Bytes v;
    put32(v, 9);
    put32(v, 8);
    put64(v, 2);
    put_str(v, "ok");
    put64(v, 99999);
    g.kv_raw("toks", v);
    CHECK_REFUSED(g, "key 'toks': array element 1 length 99999");
  }
  SUBCASE("nested arrays") {
    Bytes v;
    put32(v, 9);
    put32(v, 9);
    put64(v, 1);
    g.kv_raw("nest", v);
    CHECK_REFUSED(g, "key 'nest': arrays of arrays are not supported");
  }
  SUBCASE("unknown value types") {
    Bytes v;
    put32(v, 13);
    g.kv_raw("u", v);
    CHECK_REFUSED(g, "key 'u': unknown value type 13");
    Gguf h;
    Bytes w;
    put32(w, 9);
    put32(w, 0xFFFFFFFF);
    h.kv_raw("u", w);
    CHECK_REFUSED(h, "key 'u': unknown array element type 4294967295");
  }
  SUBCASE("a duplicate key") {
    g.kv_string("general.name", "y");
    CHECK_REFUSED(g, "key 'general.name': appears twice");
  }
  SUBCASE("a key's name is escaped") {
    g.kv_string("k\x1b[31m", "y");
    g.kv_string("k\x1b[31m", "y");
    CHECK_REFUSED(g, "key 'k\\x1b[31m': appears twice");
  }
  SUBCASE("an alignment of the wrong type") {
    g.kvs.erase(g.kvs.begin());
    Bytes v;
    put32(v, 10);
    put64(v, 32);
    g.kv_raw("general.alignment", v);
    CHECK_REFUSED(g, "key 'general.alignment': expected u32, found u64");
  }
  SUBCASE("an alignment that is not a power of two") {
    for (std::uint32_t a : {0u, 3u, 48u, 0x80000001u}) {
      Gguf h;
      h.kvs.erase(h.kvs.begin());
      h.kv_u32("general.alignment", a);
      CHECK_REFUSED(h, "key 'general.alignment': " + std::to_string(a) + " is not a power of two");
    }
  }
  SUBCASE("a bool that is neither 0 nor 1") {
    Bytes v;
    put32(v, 7);
    v.push_back(2);
    g.kv_raw("b", v);
    const Bytes bytes = g.bytes();  // outlives the file, which points into it
    const attn::GgufFile f = attn::parse_gguf(bytes, kName);
    CHECK_THROWS_WITH_AS(f.boolean("b"), "h.gguf: key 'b': bool byte 2 is not 0 or 1",
                         attn::InputError);
  }
  SUBCASE("an integer array with a u64 past int64") {
    Bytes v;
    put32(v, 9);
    put32(v, 10);
    put64(v, 2);
    put64(v, 1);
    put64(v, ~std::uint64_t{0});
    g.kv_raw("ints", v);
    const Bytes bytes = g.bytes();  // outlives the file, which points into it
    const attn::GgufFile f = attn::parse_gguf(bytes, kName);
    CHECK_THROWS_WITH_AS(f.integers("ints"),
                         "h.gguf: key 'ints': element 1 (18446744073709551615) is out of range",
                         attn::InputError);
  }
}

TEST_CASE("gguf: hostile tensor infos are refused naming the file and the tensor") {
  Gguf g;
  SUBCASE("n_dims 0 and 5") {
    g.tensors[0].ne = {};
    CHECK_REFUSED(g, "tensor 'a': n_dims 0 is not 1 to 4");
    g.tensors[0].ne = {1, 1, 1, 1, 1};
    CHECK_REFUSED(g, "tensor 'a': n_dims 5 is not 1 to 4");
  }
  SUBCASE("zero, negative and huge dimensions") {
    g.tensors[1].ne = {0};
    CHECK_REFUSED(g, "tensor 'b': dimension 0 is 0");
    g.tensors[1].ne = {8, ~std::uint64_t{0}};
    CHECK_REFUSED(g, "tensor 'b': dimension 1 is -1");
    g.tensors[1].ne = {std::uint64_t{1} << 32, std::uint64_t{1} << 31};
    CHECK_REFUSED(g, "tensor 'b': the product of its dimensions overflows 64 bits");
  }
  SUBCASE("a size in bytes that overflows") {
    g.tensors[1].ne = {std::uint64_t{1} << 31, std::uint64_t{1} << 31};  // 2^62 F32
    CHECK_REFUSED(g, "tensor 'b': its size in bytes overflows 64 bits");
  }
  SUBCASE("sizes whose byte count wraps past 2^64 (issue 47)") {
    // 2^62 + 1 F32 elements are 2^64 + 4 bytes: wrapped, they were 4 and the file was accepted.
    g.tensors[1].ne = {(std::uint64_t{1} << 62) + 1};
    CHECK_REFUSED(g, "tensor 'b': its size in bytes overflows 64 bits");
    // The same for 2^61 + 1 F64 elements (a block of 8 bytes).
    g.tensors[1].ne = {(std::uint64_t{1} << 61) + 1};
    g.tensors[1].type = 28;
    CHECK_REFUSED(g, "tensor 'b': its size in bytes overflows 64 bits");
    // And through an outer dimension: [2^31, 2^31 + 1] F32, 2^64 + 2^33 bytes.
    g.tensors[1].ne = {std::uint64_t{1} << 31, (std::uint64_t{1} << 31) + 1};
    g.tensors[1].type = 0;
    CHECK_REFUSED(g, "tensor 'b': its size in bytes overflows 64 bits");
  }
  SUBCASE("a huge tensor past the end") {
    g.tensors[1].ne = {std::uint64_t{1} << 40};
    CHECK_REFUSED(g, "tensor 'b': offset 32 + 4398046511104 bytes past the end of the file");
  }
  SUBCASE("unknown ggml types") {
    for (std::uint32_t t : {4u, 31u, 43u, 0xFFFFFFFFu}) {
      g.tensors[0].type = t;
      CHECK_REFUSED(g, "tensor 'a': unknown ggml type " + std::to_string(t));
    }
  }
  SUBCASE("rows that are not whole blocks") {
    g.tensors[0] = {"q", {33, 1}, 8, 0};  // Q8_0: blocks of 32
    CHECK_REFUSED(g, "tensor 'q': rows of 33 Q8_0 elements are not whole blocks of 32");
    g.tensors[0] = {"k", {128}, 12, 0};  // Q4_K: blocks of 256
    CHECK_REFUSED(g, "tensor 'k': rows of 128 Q4_K elements are not whole blocks of 256");
  }
  SUBCASE("an offset not aligned") {
    g.tensors[1].offset = 36;
    CHECK_REFUSED(g, "tensor 'b': offset 36 is not a multiple of the alignment 32");
  }
  SUBCASE("offsets past the end, and an offset whose sum overflows") {
    g.tensors[1].offset = 64;
    CHECK_REFUSED(g, "tensor 'b': offset 64 + 32 bytes past the end of the file");
    g.tensors[1].offset = ~std::uint64_t{31};
    CHECK_REFUSED(g, "tensor 'b': offset 18446744073709551584 + 32 bytes past the end");
  }
  SUBCASE("the data section truncated by one byte") {
    g.data_bytes = 63;
    CHECK_REFUSED(g, "tensor 'b': offset 32 + 32 bytes past the end of the file");
  }
  SUBCASE("overlapping tensors") {
    g.tensors[1].offset = 0;
    CHECK_REFUSED(g, "its bytes overlap tensor");
  }
  SUBCASE("a duplicate tensor name") {
    g.tensors[1].name = "a";
    CHECK_REFUSED(g, "tensor 'a': appears twice");
  }
  SUBCASE("a tensor name past the end") {
    g.tensors[1].name = "b";
    Bytes b = g.bytes();
    // The second name's length field: after the first tensor's info.
    const std::string needle = "b";
    const auto at = std::search(b.begin(), b.end(), needle.begin(), needle.end()) - 8;
    for (int i = 0; i < 8; ++i) at[i] = 0xFF;
    CHECK(refusal(b).find("tensor 1: name length 18446744073709551615") != std::string::npos);
  }
}

TEST_CASE("gguf: open_gguf names the path, and refuses what is not a regular file") {
  test::TempDir dir;
  const fs::path p = dir.path / "bad\nname.gguf";
  {
    std::ofstream out(p, std::ios::binary);
    const Bytes b = Gguf().bytes();
    out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size() - 1));
  }
  CHECK_THROWS_WITH_AS(
      attn::open_gguf(p),
      doctest::Contains("bad\\x0aname.gguf: a GGUF file cut short at byte 255: tensor 'b'"),
      attn::InputError);
  CHECK_THROWS_AS(attn::open_gguf(dir.path), attn::InputError);
  CHECK_THROWS_AS(attn::open_gguf(dir.path / "absent.gguf"), attn::InputError);
  // An empty file: not mapped, refused.
  std::ofstream(dir.path / "empty.gguf").close();
  CHECK_THROWS_WITH_AS(attn::open_gguf(dir.path / "empty.gguf"),
                       doctest::Contains("empty.gguf: not a GGUF file"), attn::InputError);
}

TEST_CASE("gguf: llama.cpp's test vocabularies read as gguf-py reads them") {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const fs::path models = (xdg && *xdg ? fs::path(xdg) : fs::path(home ? home : "/") / ".cache") /
                          "attn-cli" / "llama.cpp" / "3.22.1" / "src" / "models";
  if (!fs::is_directory(models)) {
    MESSAGE("skipped: " << models << " is absent (bash bench/llama_cpp.sh --src unpacks it)");
    return;
  }
  std::ifstream in(fixture("vocab.json"));
  REQUIRE(in);
  const nlohmann::json expected = nlohmann::json::parse(in);
  int read = 0;
  for (const auto& item : expected.items()) {
    const std::string file = item.key();
    const nlohmann::json& e = item.value();
    CAPTURE(file);
    const fs::path path = models / file;
    if (!fs::exists(path) || fs::file_size(path) != e["file_size"].get<std::uint64_t>()) continue;
    ++read;
    const auto f = attn::open_gguf(path);
    CHECK(f->version == e["version"].get<std::uint32_t>());
    REQUIRE(f->kv.size() == e["kv"].size());
    for (std::size_t i = 0; i < f->kv.size(); ++i) {
      const nlohmann::json& kv = e["kv"][i];
      const attn::GgufValue& v = f->kv[i].second;
      CAPTURE(f->kv[i].first);
      CHECK(f->kv[i].first == kv["key"].get<std::string>());
      CHECK(v.type == type_of(kv["type"]));
      if (v.type != GgufValueType::array) continue;
      CHECK(v.element == type_of(kv["element"]));
      CHECK(v.count == kv["count"].get<std::uint64_t>());
      if (!kv.contains("fnv")) continue;
      std::uint64_t h = 1469598103934665603ull;  // FNV-1a over each string's bytes, then 0xFF
      for (std::string_view s : f->strings(f->kv[i].first)) {
        for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
        h = (h ^ 0xFFu) * 1099511628211ull;
      }
      CHECK(std::to_string(h) == kv["fnv"].get<std::string>());
    }
    REQUIRE(f->tensors.size() == e["tensors"].size());
    for (std::size_t i = 0; i < f->tensors.size(); ++i) {
      const nlohmann::json& t = e["tensors"][i];
      CHECK(f->tensors[i].name == t["name"].get<std::string>());
      CHECK(f->tensors[i].ggml_type == t["ggml_type"].get<std::uint32_t>());
      CHECK(f->tensors[i].shape == t["shape"].get<std::vector<std::int64_t>>());
      CHECK(f->tensors[i].offset == t["offset"].get<std::uint64_t>());
      CHECK(f->tensors[i].size == t["size"].get<std::uint64_t>());
    }
  }
  MESSAGE(read << " of " << expected.size() << " vocabularies read");
  CHECK(read > 0);
}

TEST_CASE("gguf: stories260K.gguf, as ggml-org publishes it") {
  if (!fs::exists(kStoriesGguf)) {
    MESSAGE("skipped: " << kStoriesGguf << " is absent");
    return;
  }
  const auto f = attn::open_gguf(kStoriesGguf);
  CHECK(f->version == 3);
  CHECK(f->alignment == 32);
  CHECK(f->tensors.size() == 48);
  CHECK(f->string("general.architecture") == "llama");
  CHECK(f->integer("llama.embedding_length") == 64);
  CHECK(f->integer("llama.block_count") == 5);
  CHECK(f->integer("llama.feed_forward_length") == 172);
  CHECK(f->integer("llama.attention.head_count") == 8);
  CHECK(f->integer("llama.attention.head_count_kv") == 4);
  CHECK(f->number("llama.attention.layer_norm_rms_epsilon") > 0);
  CHECK(f->string("tokenizer.ggml.model") == "llama");
  const std::vector<std::string_view> tokens = f->strings("tokenizer.ggml.tokens");
  REQUIRE(tokens.size() == 512);
  CHECK(tokens[0] == "<unk>");
  CHECK(f->floats("tokenizer.ggml.scores").size() == 512);
  CHECK(f->integers("tokenizer.ggml.token_type").size() == 512);
  const attn::GgufTensorInfo* emb = f->find_tensor("token_embd.weight");
  REQUIRE(emb != nullptr);
  CHECK(emb->shape == std::vector<std::int64_t>{512, 64});
  CHECK(emb->offset == 14176);  // gguf-py's GGUFReader: data_offset
  CHECK(emb->size == 512 * 64 * 4);
  CHECK_THROWS_WITH_AS(f->integer("general.architecture"),
                       doctest::Contains("key 'general.architecture': expected an integer"),
                       attn::InputError);
  const auto source = attn::open_tensor_source(kStoriesGguf);
  CHECK(source->names().size() == 48);
  const attn::SourceTensor t = source->tensor("blk.0.attn_q.weight");
  CHECK(t.dtype == "F32");
  CHECK(t.type == attn::WeightType::f32);
  CHECK(t.shape == std::vector<std::int64_t>{64, 64});
  CHECK(source->tensor("blk.4.ffn_gate.weight").shape == std::vector<std::int64_t>{172, 64});
  CHECK(source->tensor("blk.4.ffn_down.weight").shape == std::vector<std::int64_t>{64, 172});
  CHECK(source->tensor("blk.0.attn_k.weight").shape == std::vector<std::int64_t>{32, 64});
  CHECK(source->tensor("output_norm.weight").shape == std::vector<std::int64_t>{64});
}
