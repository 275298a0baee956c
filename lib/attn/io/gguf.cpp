#include "attn/io/gguf.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <map>
#include <unordered_set>

#include "attn/checked_size.hpp"
#include "attn/error.hpp"
#include "attn/io/files.hpp"
#include "attn/io/text.hpp"
#include "attn/weight_type.hpp"

// Values are read by copying little-endian bytes.
static_assert(std::endian::native == std::endian::little, "little-endian host required");

namespace attn {

namespace {

// ggml's type_traits (ggml.c) as a GGUF reader needs them: every tensor type's name and block,
// so that tensors of types no weight type reads are still sized and bounds-checked. Format
// knowledge only: the weights' own table is kWeightTypeTraits.
struct GgmlType {
  std::uint32_t id;
  const char* name;
  std::int64_t block;        // elements per block
  std::int64_t block_bytes;  // bytes per block
};

constexpr GgmlType kGgmlTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},    {40, "NVFP4", 64, 36},
    {41, "Q1_0", 128, 18},    {42, "Q2_0", 64, 18},
};

const GgmlType* ggml_type(std::uint32_t id) {
  for (const GgmlType& t : kGgmlTypes)
    if (t.id == id) return &t;
  return nullptr;
}

// The weights' table and this one must agree where both know a type.
static_assert(
    [] {
      for (const WeightTypeTraits& w : kWeightTypeTraits) {
        if (w.ggml < 0) continue;
        bool found = false;
        for (const GgmlType& g : kGgmlTypes)
          if (g.id == std::uint32_t(w.ggml))
            found = g.block == w.block && g.block_bytes == w.block_bytes;
        if (!found) return false;
      }
      return true;
    }(),
    "kWeightTypeTraits' ggml ids must match ggml's block sizes");

constexpr std::uint64_t kValueSize[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};  // 0: not fixed
constexpr std::uint32_t kValueTypes = 13;
constexpr std::uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
// The smallest a kv can be (key length, type, one byte) and a tensor info (name length, n_dims,
// one dimension, type, offset): counts are checked against the bytes left before anything is
// allocated for them.
constexpr std::uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

std::string str(std::uint64_t v) {
  return std::to_string(v);
}

template <class T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A cursor over the file's bytes; every read checks the bytes are there.
struct Reader {
  std::span<const std::uint8_t> bytes;
  const std::string& source;
  std::uint64_t pos = 0;

  std::uint64_t left() const { return bytes.size() - pos; }

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw InputError(source + ": " + where + ": " + what);
  }
  // A read past the end: what the file is, said first (a download cut short is the usual cause).
  [[noreturn]] void past_end(const std::string& where, const std::string& what) const {
    fail("a GGUF file cut short at byte " + str(bytes.size()) + ": " + where, what);
  }

  // `n` more bytes for `what` in `where`, or an InputError saying how far past the end.
  const std::uint8_t* take(std::uint64_t n, const std::string& where, const std::string& what) {
    if (n > left())
      past_end(where, what + " at offset " + str(pos) + " needs " + str(n) +
                          " bytes, past the end of the file (" + str(bytes.size()) + " bytes)");
    const std::uint8_t* p = bytes.data() + pos;
    pos += n;
    return p;
  }
  std::uint32_t u32(const std::string& where, const std::string& what) {
    return load<std::uint32_t>(take(4, where, what));
  }
  std::uint64_t u64(const std::string& where, const std::string& what) {
    return load<std::uint64_t>(take(8, where, what));
  }
  std::string_view string(const std::string& where, const std::string& what) {
    const std::uint64_t n = u64(where, what + " length");
    if (n > left())
      past_end(where, what + " length " + str(n) + " at offset " + str(pos - 8) +
                          " runs past the end of the file (" + str(bytes.size()) + " bytes)");
    return {reinterpret_cast<const char*>(take(n, where, what)), std::size_t(n)};
  }
};

std::string key_where(std::string_view key) {
  return "key " + attn::quoted(key);
}

std::string tensor_where(std::string_view name) {
  return "tensor " + attn::quoted(name);
}

// String i of an array, skipped: its name for an error is built only when reading it fails
// (naming each of a vocabulary's strings was most of a GGUF header's parse; issue 52).
void skip_array_string(Reader& r, const std::string& where, std::uint64_t i) {
  if (r.left() >= 8) {
    const std::uint64_t n = load<std::uint64_t>(r.bytes.data() + r.pos);
    if (n <= r.left() - 8) {
      r.pos += 8 + n;
      return;
    }
  }
  r.string(where, "array element " + str(i));  // fails, saying what it always said
}

GgufValueType value_type(Reader& r, const std::string& where, const std::string& what) {
  const std::uint32_t t = r.u32(where, what);
  if (t >= kValueTypes) r.fail(where, "unknown " + what + " " + str(t));
  return GgufValueType(t);
}

// The value after a key's type; leaves the reader after it.
GgufValue read_value(Reader& r, GgufValueType type, const std::string& where) {
  GgufValue v{type};
  if (type == GgufValueType::string) {
    v.data = r.bytes.data() + r.pos;
    r.string(where, "string");
    return v;
  }
  if (type != GgufValueType::array) {
    v.data =
        r.take(kValueSize[std::size_t(type)], where, std::string(gguf_type_name(type)) + " value");
    return v;
  }
  v.element = value_type(r, where, "array element type");
  if (v.element == GgufValueType::array) r.fail(where, "arrays of arrays are not supported");
  v.count = r.u64(where, "array length");
  v.data = r.bytes.data() + r.pos;
  const std::string what = "array of " + str(v.count) + " " + gguf_type_name(v.element) + " values";
  if (v.element == GgufValueType::string) {
    // Each string is at least its 8-byte length: a count the file cannot hold fails at once.
    if (v.count > r.left() / 8)
      r.past_end(where, what + " at offset " + str(r.pos) + " runs past the end of the file (" +
                            str(r.bytes.size()) + " bytes)");
    for (std::uint64_t i = 0; i < v.count; ++i) skip_array_string(r, where, i);
    return v;
  }
  const std::uint64_t size = kValueSize[std::size_t(v.element)];
  if (v.count > r.left() / size)
    r.past_end(where, what + " at offset " + str(r.pos) + " runs past the end of the file (" +
                          str(r.bytes.size()) + " bytes)");
  r.take(*mul_add(v.count, size), where, what);  // count <= left / size: cannot wrap
  return v;
}

// A count checked against the bytes left before anything is allocated for it: a 1 KB file
// claiming 2^60 tensors fails here, at once.
void check_count(const Reader& r, std::uint64_t n, std::uint64_t min_bytes, const char* what) {
  if (n > r.left() / min_bytes)
    r.fail("header", std::string(what) + " " + str(n) + " is more than the file's " +
                         str(r.bytes.size()) + " bytes could hold");
}

void read_kvs(Reader& r, std::uint64_t n_kv, GgufFile& f) {
  check_count(r, n_kv, kMinKvBytes, "kv count");
  f.kv.reserve(std::size_t(n_kv));
  std::unordered_set<std::string_view> keys;
  for (std::uint64_t i = 0; i < n_kv; ++i) {
    const std::string_view key = r.string("kv " + str(i), "key");
    const std::string where = key_where(key);
    if (!keys.insert(key).second) r.fail(where, "appears twice");
    const GgufValueType type = value_type(r, where, "value type");
    f.kv.emplace_back(std::string(key), read_value(r, type, where));
  }
}

void read_alignment(GgufFile& f) {
  const GgufValue* v = f.find("general.alignment");
  if (!v) return;
  const std::string where = key_where("general.alignment");
  if (v->type != GgufValueType::u32)
    throw InputError(f.path + ": " + where + ": expected u32, found " + gguf_type_name(v->type));
  const std::uint32_t a = load<std::uint32_t>(v->data);
  if (a == 0 || (a & (a - 1)) != 0)
    throw InputError(f.path + ": " + where + ": " + str(a) + " is not a power of two");
  f.alignment = a;
}

// ne (ggml's order, innermost first) checked and reversed into a shape; the tensor's size in
// bytes for ggml type `t`.
std::vector<std::int64_t> read_shape(Reader& r, const std::string& where) {
  const std::uint32_t n_dims = r.u32(where, "n_dims");
  if (n_dims == 0 || n_dims > kMaxDims)
    r.fail(where, "n_dims " + str(n_dims) + " is not 1 to " + str(kMaxDims));
  std::vector<std::int64_t> shape(n_dims);
  for (std::uint32_t j = 0; j < n_dims; ++j) {
    const std::uint64_t ne = r.u64(where, "dimension " + str(j));
    if (ne == 0 || ne > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
      r.fail(where, "dimension " + str(j) + " is " +
                        (ne == 0 ? std::string("0") : std::to_string(std::int64_t(ne))));
    shape[n_dims - 1 - j] = std::int64_t(ne);
  }
  // Element counts are int64 everywhere past the reader.
  const std::optional<std::uint64_t> numel = size_product(shape);
  if (!numel || *numel > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
    r.fail(where, "the product of its dimensions overflows 64 bits");
  return shape;
}

std::uint64_t tensor_bytes(const GgmlType& t, const std::vector<std::int64_t>& shape,
                           const std::string& where, Reader& r) {
  const std::int64_t row = shape.back();  // ne[0]
  if (row % t.block != 0)
    r.fail(where, "rows of " + str(row) + " " + t.name + " elements are not whole blocks of " +
                      str(t.block));
  // Blocks per row times block bytes times the other dimensions, all checked: 2^62 + 1 F32
  // elements are 2^64 + 4 bytes, which must not wrap to 4.
  std::vector<std::int64_t> factors(shape.begin(), shape.end() - 1);
  factors.push_back(row / t.block);
  factors.push_back(t.block_bytes);
  const std::optional<std::uint64_t> bytes = size_product(factors);
  if (!bytes) r.fail(where, "its size in bytes overflows 64 bits");
  return *bytes;
}

void read_tensor_infos(Reader& r, std::uint64_t n_tensors, GgufFile& f) {
  check_count(r, n_tensors, kMinTensorInfoBytes, "tensor count");
  f.tensors.reserve(std::size_t(n_tensors));
  std::unordered_set<std::string_view> names;
  std::vector<std::uint64_t> data_offsets;
  data_offsets.reserve(std::size_t(n_tensors));
  for (std::uint64_t i = 0; i < n_tensors; ++i) {
    const std::string_view name = r.string("tensor " + str(i), "name");
    const std::string where = tensor_where(name);
    if (!names.insert(name).second) r.fail(where, "appears twice");
    GgufTensorInfo t;
    t.name = std::string(name);
    t.shape = read_shape(r, where);
    t.ggml_type = r.u32(where, "type");
    const GgmlType* type = ggml_type(t.ggml_type);
    if (!type) r.fail(where, "unknown ggml type " + str(t.ggml_type));
    t.size = tensor_bytes(*type, t.shape, where, r);
    const std::uint64_t offset = r.u64(where, "offset");
    if (offset % f.alignment != 0)
      r.fail(where,
             "offset " + str(offset) + " is not a multiple of the alignment " + str(f.alignment));
    data_offsets.push_back(offset);
    f.tensors.push_back(std::move(t));
  }
  // The data section starts at the next multiple of the alignment.
  // pos is within the file and the alignment a u32: rounding it up cannot wrap.
  f.data_start = *mul_add(r.pos / f.alignment + (r.pos % f.alignment != 0), f.alignment);
  for (std::size_t i = 0; i < f.tensors.size(); ++i) {
    GgufTensorInfo& t = f.tensors[i];
    const std::optional<std::uint64_t> offset = add_size(f.data_start, data_offsets[i]);
    const std::optional<std::uint64_t> end = offset ? add_size(*offset, t.size) : std::nullopt;
    t.offset = offset.value_or(0);
    if (!end || *end > r.bytes.size())
      r.past_end(tensor_where(t.name), "offset " + str(data_offsets[i]) + " + " + str(t.size) +
                                           " bytes past the end of the file (" +
                                           str(r.bytes.size()) + " bytes; data section at " +
                                           str(f.data_start) + ")");
  }
}

// Two tensors sharing bytes would alias each other's weights.
void check_overlaps(const GgufFile& f) {
  std::vector<const GgufTensorInfo*> order;
  order.reserve(f.tensors.size());
  for (const GgufTensorInfo& t : f.tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < order.size(); ++i)
    if (order[i]->offset < order[i - 1]->offset + order[i - 1]->size)
      throw InputError(f.path + ": " + tensor_where(order[i]->name) + ": its bytes overlap " +
                       tensor_where(order[i - 1]->name));
}

void read_version(Reader& r, GgufFile& f) {
  f.version = r.u32("header", "version");
  if (f.version == 2 || f.version == 3) return;
  const std::uint32_t swapped = __builtin_bswap32(f.version);
  if (swapped == 2 || swapped == 3)
    r.fail("header", "a big-endian GGUF file (version " + str(swapped) +
                         "), which this reader does not read");
  r.fail("header", "version " + str(f.version) + " is not supported (2 or 3)");
}

// Typed reads' errors.
[[noreturn]] void wrong_type(const GgufFile& f, std::string_view key, const GgufValue& v,
                             const char* expected) {
  std::string found = gguf_type_name(v.type);
  if (v.type == GgufValueType::array) found += std::string(" of ") + gguf_type_name(v.element);
  throw InputError(f.path + ": " + key_where(key) + ": expected " + expected + ", found " + found);
}

bool is_integer(GgufValueType t) {
  switch (t) {
    case GgufValueType::u8:
    case GgufValueType::i8:
    case GgufValueType::u16:
    case GgufValueType::i16:
    case GgufValueType::u32:
    case GgufValueType::i32:
    case GgufValueType::u64:
    case GgufValueType::i64:
      return true;
    default:
      return false;
  }
}

// An integer of type t at p; false when a u64 does not fit int64.
bool load_integer(GgufValueType t, const std::uint8_t* p, std::int64_t& out) {
  switch (t) {
    case GgufValueType::u8:
      out = load<std::uint8_t>(p);
      return true;
    case GgufValueType::i8:
      out = load<std::int8_t>(p);
      return true;
    case GgufValueType::u16:
      out = load<std::uint16_t>(p);
      return true;
    case GgufValueType::i16:
      out = load<std::int16_t>(p);
      return true;
    case GgufValueType::u32:
      out = load<std::uint32_t>(p);
      return true;
    case GgufValueType::i32:
      out = load<std::int32_t>(p);
      return true;
    case GgufValueType::i64:
      out = load<std::int64_t>(p);
      return true;
    default: {  // u64
      const std::uint64_t u = load<std::uint64_t>(p);
      out = std::int64_t(u);
      return u <= std::uint64_t(std::numeric_limits<std::int64_t>::max());
    }
  }
}

class GgufSource : public TensorSource {
 public:
  explicit GgufSource(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {
    for (std::size_t i = 0; i < file_->tensors.size(); ++i) index_[file_->tensors[i].name] = i;
  }
  const std::string& source() const override { return file_->path; }
  bool contains(const std::string& name) const override { return index_.count(name) > 0; }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    out.reserve(index_.size());
    for (const auto& entry : index_) out.push_back(entry.first);
    return out;
  }
  SourceTensor describe(const std::string& name) override {
    const GgufTensorInfo& t = info(name);
    const std::optional<WeightType> type = weight_type_of_ggml(t.ggml_type);
    return {ggml_type_name(t.ggml_type), type, t.shape, nullptr, t.size, file_->path};
  }
  SourceTensor tensor(const std::string& name) override {
    SourceTensor s = describe(name);
    s.data = file_->bytes.data() + info(name).offset;
    return s;
  }

 private:
  const GgufTensorInfo& info(const std::string& name) const {
    const auto it = index_.find(name);
    if (it == index_.end())
      throw InputError(file_->path + ": tensor " + attn::quoted(name) + " is missing");
    return file_->tensors[it->second];
  }

  std::shared_ptr<const GgufFile> file_;
  std::map<std::string, std::size_t> index_;
};

}  // namespace

const char* gguf_type_name(GgufValueType t) {
  static constexpr const char* kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                           "bool", "string", "array", "u64", "i64", "f64"};
  return std::uint32_t(t) < kValueTypes ? kNames[std::size_t(t)] : "unknown";
}

std::string ggml_type_name(std::uint32_t ggml_type_id) {
  const GgmlType* t = ggml_type(ggml_type_id);
  return t ? t->name : "ggml type " + str(ggml_type_id);
}

bool is_gguf(std::span<const std::uint8_t> head) {
  return head.size() >= 4 && std::memcmp(head.data(), "GGUF", 4) == 0;
}

GgufFile parse_gguf(std::span<const std::uint8_t> bytes, const std::string& source) {
  GgufFile f;
  f.path = source;
  f.bytes = bytes;
  if (!is_gguf(bytes)) throw InputError(source + ": not a GGUF file (no \"GGUF\" magic)");
  Reader r{bytes, source, 4};
  read_version(r, f);
  const std::uint64_t n_tensors = r.u64("header", "tensor count");
  const std::uint64_t n_kv = r.u64("header", "kv count");
  check_count(r, n_tensors, kMinTensorInfoBytes, "tensor count");
  read_kvs(r, n_kv, f);
  read_alignment(f);
  read_tensor_infos(r, n_tensors, f);
  check_overlaps(f);
  return f;
}

std::shared_ptr<const GgufFile> open_gguf(const std::filesystem::path& path) {
  return open_gguf(map_file(path, "GGUF"));
}

std::shared_ptr<const GgufFile> open_gguf(std::shared_ptr<const MappedFile> m) {
  auto f = std::make_shared<GgufFile>(parse_gguf(m->bytes, m->source));
  f->mapping = std::const_pointer_cast<MappedFile>(std::move(m));
  return f;
}

std::unique_ptr<TensorSource> gguf_tensor_source(std::shared_ptr<const GgufFile> file) {
  return std::make_unique<GgufSource>(std::move(file));
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const auto& [k, v] : kv)
    if (k == key) return &v;
  return nullptr;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const GgufTensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::optional<std::int64_t> GgufFile::integer(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!is_integer(v->type)) wrong_type(*this, key, *v, "an integer");
  std::int64_t out = 0;
  if (!load_integer(v->type, v->data, out))
    throw InputError(path + ": " + key_where(key) + ": " + str(load<std::uint64_t>(v->data)) +
                     " is out of range");
  return out;
}

std::optional<double> GgufFile::number(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type == GgufValueType::f32) return load<float>(v->data);
  if (v->type == GgufValueType::f64) return load<double>(v->data);
  if (!is_integer(v->type)) wrong_type(*this, key, *v, "a number");
  return double(*integer(key));
}

std::optional<bool> GgufFile::boolean(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufValueType::boolean) wrong_type(*this, key, *v, "a bool");
  const std::uint8_t b = *v->data;
  if (b > 1)
    throw InputError(path + ": " + key_where(key) + ": bool byte " + str(b) + " is not 0 or 1");
  return b == 1;
}

std::optional<std::string> GgufFile::string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufValueType::string) wrong_type(*this, key, *v, "a string");
  return std::string(reinterpret_cast<const char*>(v->data + 8),
                     std::size_t(load<std::uint64_t>(v->data)));
}

std::vector<std::string_view> GgufFile::strings(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return {};
  if (v->type != GgufValueType::array || v->element != GgufValueType::string)
    wrong_type(*this, key, *v, "an array of string");
  std::vector<std::string_view> out;
  out.reserve(std::size_t(v->count));  // checked against the file when parsed
  const std::uint8_t* p = v->data;
  for (std::uint64_t i = 0; i < v->count; ++i) {
    const std::uint64_t n = load<std::uint64_t>(p);
    out.emplace_back(reinterpret_cast<const char*>(p + 8), std::size_t(n));
    p += 8 + n;
  }
  return out;
}

std::vector<float> GgufFile::floats(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return {};
  if (v->type != GgufValueType::array || v->element != GgufValueType::f32)
    wrong_type(*this, key, *v, "an array of f32");
  std::vector<float> out(std::size_t(v->count));
  if (!out.empty()) std::memcpy(out.data(), v->data, out.size() * sizeof(float));
  return out;
}

std::vector<std::int64_t> GgufFile::integers(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return {};
  if (v->type != GgufValueType::array || !is_integer(v->element))
    wrong_type(*this, key, *v, "an array of integers");
  const std::uint64_t size = kValueSize[std::size_t(v->element)];
  std::vector<std::int64_t> out(std::size_t(v->count));
  for (std::uint64_t i = 0; i < v->count; ++i)
    if (!load_integer(v->element, v->data + i * size, out[std::size_t(i)]))
      throw InputError(path + ": " + key_where(key) + ": element " + str(i) + " (" +
                       str(load<std::uint64_t>(v->data + i * size)) + ") is out of range");
  return out;
}

}  // namespace attn
