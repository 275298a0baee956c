#include "attn/io/safetensors.hpp"
#include "attn/io/utf8.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <utility>

#include <nlohmann/json.hpp>

#include "attn/checked_size.hpp"
#include "attn/error.hpp"
#include "attn/io/detail/json_checks.hpp"
#include "attn/io/files.hpp"
#include "attn/io/output.hpp"
#include "attn/io/signals.hpp"
#include "attn/io/text.hpp"

// Tensors are read and written by reinterpreting little-endian bytes in place.
static_assert(std::endian::native == std::endian::little, "little-endian host required");

namespace attn {
namespace {

using json = nlohmann::json;

// The reference reader's bound (MAX_HEADER_SIZE in safetensors/src/tensor.rs).
constexpr std::uint64_t kMaxHeaderSize = 100'000'000;
// serde_json refuses the 128th nested array/object; the reference parses the header with it.
// Counted before the header is parsed: a shape has a handful of dimensions, a checkpoint some
// 10^5 tensors of ~8 values each; 2^22 values cost ~400 MB as a DOM, 33 M zeros would cost GBs.
constexpr JsonLimits kHeaderLimits{127, 1 << 22, 1 << 10};
constexpr std::uint64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

struct DtypeEntry {
  Dtype dtype;
  const char* name;
  std::uint64_t size;
};

constexpr std::array<DtypeEntry, 15> kDtypes = {{
    {Dtype::BOOL, "BOOL", 1},
    {Dtype::U8, "U8", 1},
    {Dtype::I8, "I8", 1},
    {Dtype::F8_E5M2, "F8_E5M2", 1},
    {Dtype::F8_E4M3, "F8_E4M3", 1},
    {Dtype::I16, "I16", 2},
    {Dtype::U16, "U16", 2},
    {Dtype::F16, "F16", 2},
    {Dtype::BF16, "BF16", 2},
    {Dtype::I32, "I32", 4},
    {Dtype::U32, "U32", 4},
    {Dtype::F32, "F32", 4},
    {Dtype::F64, "F64", 8},
    {Dtype::I64, "I64", 8},
    {Dtype::U64, "U64", 8},
}};

const DtypeEntry& dtype_entry(Dtype d) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.dtype == d) return e;
  }
  throw std::logic_error("attn::Dtype value out of range");
}

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw InputError(source + ": " + what);
}

std::string excerpt(const json& j) {
  return escape(j.dump(-1, ' ', false, json::error_handler_t::replace));
}

// At most 16 entries: a hostile header's shape may hold millions.
template <class T>
std::string list_str(const std::vector<T>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ", ";
    if (i == 16) {
      out += "... (" + std::to_string(v.size()) + " dimensions)";
      break;
    }
    out += std::to_string(v[i]);
  }
  return out + "]";
}

std::string errno_text(int err) {
  return std::system_category().message(err);
}

std::uint64_t read_le64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// ---- UTF-8 ----

// Offset of the first byte that breaks UTF-8 (as Rust's str::from_utf8 defines it: no
// overlong forms, no surrogates, nothing above U+10FFFF), or npos.
std::size_t utf8_error_offset(std::span<const std::uint8_t> s) {
  const std::string_view v(reinterpret_cast<const char*>(s.data()), s.size());
  for (std::size_t i = 0; i < v.size();) {
    const std::size_t n = utf8_sequence(v, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

// ---- JSON with duplicate-key and depth checks ----

// Where a duplicate key sits: "at top level" or "in 'a' > [] > 'b'".
std::string location(const JsonStructure& s) {
  if (s.frames.size() == 1) return " at top level";
  std::string out = " in ";
  for (std::size_t i = 0; i + 1 < s.frames.size(); ++i) {
    if (i > 0) out += " > ";
    out += s.frames[i].is_array ? std::string("[]") : attn::quoted(s.frames[i].last_key);
  }
  return out;
}

json parse_header_json(std::span<const std::uint8_t> text, const std::string& source) {
  const std::size_t bad = utf8_error_offset(text);
  if (bad != std::string_view::npos) {
    fail(source, "header is not valid UTF-8 (byte " + std::to_string(bad) + " of the header)");
  }
  // nlohmann stops at a NUL byte and accepts what came before; serde_json refuses it.
  const auto nul = std::find(text.begin(), text.end(), std::uint8_t{0});
  if (nul != text.end()) {
    fail(source,
         "header holds a NUL byte (byte " + std::to_string(nul - text.begin()) + " of the header)");
  }
  // nlohmann skips a leading byte order mark; serde_json, and so the reference, does not.
  if (text.size() >= 3 && text[0] == 0xEF && text[1] == 0xBB && text[2] == 0xBF) {
    fail(source, "header is not valid JSON: it starts with a UTF-8 byte order mark");
  }
  check_json_structure(
      {reinterpret_cast<const char*>(text.data()), text.size()}, kHeaderLimits,
      [&](const JsonStructure&) {
        fail(source, "header nests JSON deeper than " + std::to_string(kHeaderLimits.max_depth) +
                         " levels");
      },
      [&](const JsonStructure& s, const std::string& key) {
        fail(source, "header has duplicate key " + attn::quoted(key) + location(s));
      },
      [&](const JsonStructure& s, const std::string& what) {
        fail(source, "header holds " + what + location(s));
      });
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    fail(source, std::string("header is not valid JSON: ") + e.what());
  }
}

// ---- Header entries ----

std::map<std::string, std::string> parse_metadata(const json& j, const std::string& source) {
  std::map<std::string, std::string> out;
  if (j.is_null()) return out;  // serde reads `null` into the Option as None
  if (!j.is_object()) {
    fail(source,
         std::string("header '__metadata__' must be an object of strings, found ") + j.type_name());
  }
  for (const auto& [key, value] : j.items()) {
    if (!value.is_string()) {
      fail(source, "header '__metadata__' entry " + attn::quoted(key) +
                       " must be a string, found " + value.type_name());
    }
    out.emplace(key, value.get<std::string>());
  }
  return out;
}

struct EntryContext {
  const std::string& source;
  const std::string& name;
  [[noreturn]] void fail(const std::string& what) const {
    attn::fail(source, "tensor " + attn::quoted(name) + ": " + what);
  }
};

const json& require(const json& entry, const char* key, const EntryContext& ctx) {
  const auto it = entry.find(key);
  if (it == entry.end()) ctx.fail(std::string("missing '") + key + "'");
  return *it;
}

Dtype parse_dtype(const json& j, const EntryContext& ctx) {
  if (!j.is_string()) ctx.fail(std::string("dtype must be a string, found ") + j.type_name());
  const auto& s = j.get_ref<const std::string&>();
  for (const DtypeEntry& e : kDtypes) {
    if (s == e.name) return e.dtype;
  }
  std::string known;
  for (const DtypeEntry& e : kDtypes) known += std::string(known.empty() ? "" : ", ") + e.name;
  ctx.fail("unknown dtype " + attn::quoted(s) + " (expected one of " + known + ")");
}

// A JSON list of integers that fit u64, as serde reads Vec<usize>: a minus sign ("-0" included),
// a fraction or an exponent is refused.
bool read_u64_list(const json& j, std::vector<std::uint64_t>& out) {
  if (!j.is_array()) return false;
  for (const json& v : j) {
    if (!v.is_number_unsigned()) return false;
    out.push_back(v.get<std::uint64_t>());
  }
  return true;
}

// Folds left to right like the reference, so [2^40, 2^40, 0] overflows although its product is 0.
bool checked_byte_count(const std::vector<std::uint64_t>& dims, std::uint64_t elem_size,
                        std::uint64_t& bytes) {
  std::optional<std::uint64_t> n = 1;
  for (std::uint64_t d : dims)
    if (!(n = mul_add(*n, d))) return false;
  n = mul_add(*n, elem_size);
  bytes = n.value_or(0);
  return n.has_value();
}

std::vector<std::int64_t> parse_shape(const json& j, Dtype dtype, const EntryContext& ctx) {
  std::vector<std::uint64_t> dims;
  if (!read_u64_list(j, dims)) {
    ctx.fail("shape must be a list of non-negative integers, found " + excerpt(j));
  }
  std::uint64_t bytes = 0;
  if (!checked_byte_count(dims, dtype_size(dtype), bytes)) {
    ctx.fail("shape " + list_str(dims) + " x " + dtype_name(dtype) + " overflows 64 bits");
  }
  std::vector<std::int64_t> shape;
  for (std::uint64_t d : dims) {
    // Only reachable after a zero dimension; the reference accepts it, TensorInfo cannot hold it.
    if (d > kInt64Max) ctx.fail("shape dimension " + std::to_string(d) + " exceeds 2^63 - 1");
    shape.push_back(static_cast<std::int64_t>(d));
  }
  return shape;
}

TensorInfo parse_entry(const json& entry, const EntryContext& ctx) {
  if (!entry.is_object()) {
    ctx.fail(std::string("entry must be an object, found ") + entry.type_name());
  }
  TensorInfo t;
  t.dtype = parse_dtype(require(entry, "dtype", ctx), ctx);
  t.shape = parse_shape(require(entry, "shape", ctx), t.dtype, ctx);
  const json& offsets = require(entry, "data_offsets", ctx);
  std::vector<std::uint64_t> pair;
  if (!read_u64_list(offsets, pair) || pair.size() != 2) {
    ctx.fail("data_offsets must be [begin, end] with non-negative integers, found " +
             excerpt(offsets));
  }
  t.begin = pair[0];
  t.end = pair[1];
  return t;
}

// ---- Tiling of the data section ----

using NamedTensor = std::pair<const std::string, TensorInfo>;

std::string offsets_str(const TensorInfo& t) {
  return "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]";
}

void check_placement(const NamedTensor& nt, std::uint64_t cursor, const NamedTensor* prev,
                     const EntryContext& ctx) {
  const TensorInfo& t = nt.second;
  if (t.end < t.begin) ctx.fail(offsets_str(t) + " end before they begin");
  if (t.begin > cursor) {
    ctx.fail(offsets_str(t) + " leave a hole: the bytes before begin at " + std::to_string(cursor) +
             (prev ? " (end of tensor " + attn::quoted(prev->first) + ")" : ""));
  }
  if (t.begin < cursor) {
    ctx.fail(offsets_str(t) + " overlap tensor " + attn::quoted(prev->first) + ", which ends at " +
             std::to_string(cursor));
  }
  std::uint64_t bytes = 0;
  std::vector<std::uint64_t> dims(t.shape.begin(), t.shape.end());
  checked_byte_count(dims, dtype_size(t.dtype), bytes);  // cannot overflow: parse_shape checked
  if (t.end - t.begin != bytes) {
    ctx.fail(offsets_str(t) + " give " + std::to_string(t.end - t.begin) + " bytes, expected " +
             std::to_string(bytes) + " (shape " + shape_text(t.shape) + " x " +
             dtype_name(t.dtype) + ")");
  }
}

// The reference sorts by (begin, end) and demands that each tensor start where the previous one
// ended, and that the last end exactly where the file does.
void check_tiling(const std::map<std::string, TensorInfo>& tensors, std::uint64_t data_size,
                  const std::string& source) {
  std::vector<const NamedTensor*> order;
  for (const NamedTensor& nt : tensors) order.push_back(&nt);
  std::stable_sort(order.begin(), order.end(), [](const NamedTensor* a, const NamedTensor* b) {
    return std::pair(a->second.begin, a->second.end) < std::pair(b->second.begin, b->second.end);
  });
  std::uint64_t cursor = 0;
  const NamedTensor* prev = nullptr;
  for (const NamedTensor* nt : order) {
    check_placement(*nt, cursor, prev, EntryContext{source, nt->first});
    cursor = nt->second.end;
    prev = nt;
  }
  if (cursor < data_size) {
    fail(source, "data section is " + std::to_string(data_size) + " bytes but the tensors end at " +
                     std::to_string(cursor) + ": " + std::to_string(data_size - cursor) +
                     " trailing bytes");
  }
  if (cursor > data_size) {
    fail(source, "data section is " + std::to_string(data_size) + " bytes but the tensors need " +
                     std::to_string(cursor) + ": the file is truncated");
  }
}

// ---- Reading ----

// The header length from the file's first bytes (all of them when fewer than 8), checked against
// the file's size.
std::uint64_t checked_header_length(std::span<const std::uint8_t> first, std::uint64_t file_size,
                                    const std::string& source) {
  if (file_size < 8) {
    fail(source,
         "file is " + std::to_string(file_size) + " bytes, too short for the 8-byte header length");
  }
  const std::uint64_t n = read_le64(first.data());
  if (n > kMaxHeaderSize) {
    fail(source, "header length " + std::to_string(n) + " exceeds the limit of " +
                     std::to_string(kMaxHeaderSize) + " bytes");
  }
  if (n > file_size - 8) {
    fail(source, "header length " + std::to_string(n) + " runs past the end of the file (" +
                     std::to_string(file_size) + " bytes)");
  }
  return n;
}

// The header from `head`, the file's first 8 + length bytes, for a file of file_size bytes.
SafetensorsHeader parse_head(std::span<const std::uint8_t> head, std::uint64_t file_size,
                             const std::string& source) {
  const json root = parse_header_json(head.subspan(8), source);
  if (!root.is_object()) {
    fail(source, std::string("header is not a JSON object, found ") + root.type_name());
  }
  SafetensorsHeader h;
  h.data_start = head.size();
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      h.metadata = parse_metadata(value, source);
    } else {
      h.tensors.emplace(key, parse_entry(value, EntryContext{source, key}));
    }
  }
  check_tiling(h.tensors, file_size - h.data_start, source);
  return h;
}

// Fills `out` from the file at `offset`; a file that shrank meanwhile is refused.
void read_at(const InputFile& in, std::uint64_t offset, std::span<std::uint8_t> out) {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(in.fd, out.data() + done, out.size() - done, off_t(offset + done));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) fail(in.source, "cannot read: " + errno_text(errno));
    if (n == 0) fail(in.source, "the file shrank while its header was read");
    done += std::size_t(n);
  }
}

// ---- Writing ----

[[noreturn]] void write_fail(const std::string& target, const std::string& what) {
  throw std::runtime_error(target + ": " + what);
}

std::string build_header(const std::vector<OutTensor>& tensors,
                         const std::map<std::string, std::string>& metadata,
                         const std::string& target) {
  // Ordered so the header lists tensors in data order and matches the reference writer's bytes.
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (const OutTensor& t : tensors) {
    if (t.name == "__metadata__" || !names.insert(t.name).second) {
      write_fail(target, "tensor name " + attn::quoted(t.name) + " is reserved or repeated");
    }
    std::vector<std::uint64_t> dims;
    for (std::int64_t d : t.shape) {
      if (d < 0) write_fail(target, "tensor " + attn::quoted(t.name) + " has a negative dimension");
      dims.push_back(static_cast<std::uint64_t>(d));
    }
    std::uint64_t bytes = 0, end = 0;
    const std::optional<std::uint64_t> sum =
        checked_byte_count(dims, 4, bytes) ? add_size(offset, bytes) : std::nullopt;
    if (!sum) write_fail(target, "tensor " + attn::quoted(t.name) + " is too large");
    end = *sum;
    if (bytes > 0 && t.data == nullptr)
      write_fail(target, "tensor " + attn::quoted(t.name) + " has no data");
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = "F32";
    entry["shape"] = t.shape;
    entry["data_offsets"] = {offset, end};
    // Appended without ordered_map's linear key search (names are unique, checked above):
    // h[name] made writing 50,000 tensors quadratic.
    auto& obj = h.get_ref<nlohmann::ordered_json::object_t&>();
    static_cast<std::vector<std::pair<const std::string, nlohmann::ordered_json>>&>(obj)
        .emplace_back(t.name, std::move(entry));
    offset = end;
  }
  std::string text;
  try {
    text = h.dump();
  } catch (const nlohmann::json::exception& e) {
    write_fail(target, std::string("cannot encode the header: ") + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // as the reference writer: data starts 8-aligned
  return text;
}

}  // namespace

const char* dtype_name(Dtype d) {
  return dtype_entry(d).name;
}

std::uint64_t dtype_size(Dtype d) {
  return dtype_entry(d).size;
}

std::int64_t TensorInfo::numel() const {
  // Parsed shapes fit (their bytes were counted); a hand-made one that does not is refused.
  const std::optional<std::uint64_t> n = size_product(shape);
  if (!n || *n > std::uint64_t(kInt64Max))
    throw InputError("tensor shape " + shape_text(shape) + " has more than 2^63 elements");
  return static_cast<std::int64_t>(*n);
}

SafetensorsHeader parse_safetensors(std::span<const std::uint8_t> file, const std::string& source) {
  const std::uint64_t n =
      checked_header_length(file.first(std::min<std::size_t>(file.size(), 8)), file.size(), source);
  return parse_head(file.first(8 + n), file.size(), source);
}

SafetensorsHeaderRead read_safetensors_header(const std::filesystem::path& path) {
  return read_safetensors_header(std::make_shared<const InputFile>(open_regular(path, "safetensors")));
}

SafetensorsHeaderRead read_safetensors_header(std::shared_ptr<const InputFile> file) {
  const InputFile& in = *file;
  if (in.size == 0) fail(in.source, "file is empty, too short for the 8-byte header length");
  SafetensorsHeaderRead r;
  r.size = in.size;
  r.bytes.resize(std::min<std::uint64_t>(in.size, 8));
  read_at(in, 0, r.bytes);
  r.bytes.resize(8 + checked_header_length(r.bytes, in.size, in.source));
  read_at(in, 8, std::span(r.bytes).subspan(8));
  r.header = parse_head(r.bytes, in.size, in.source);
  r.file = std::move(file);
  return r;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept
    : path(std::move(o.path)),
      header(std::move(o.header)),
      base(std::exchange(o.base, nullptr)),
      size(std::exchange(o.size, 0)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this != &o) {
    if (base != nullptr) unwatch_mapping(base);
    if (base != nullptr) ::munmap(const_cast<std::uint8_t*>(base), size);
    path = std::move(o.path);
    header = std::move(o.header);
    base = std::exchange(o.base, nullptr);
    size = std::exchange(o.size, 0);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (base != nullptr) unwatch_mapping(base);
  if (base != nullptr) ::munmap(const_cast<std::uint8_t*>(base), size);
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  const auto it = header.tensors.find(name);
  if (it == header.tensors.end()) fail(path, "no tensor " + attn::quoted(name));
  return it->second;
}

SafetensorsFile open_safetensors(const std::filesystem::path& path, SafetensorsHeaderRead* read) {
  // A regular file only, opened without blocking: a FIFO or a device is refused, not waited on.
  std::shared_ptr<const InputFile> opened =
      read && read->file ? read->file
                         : std::make_shared<const InputFile>(open_regular(path, "safetensors"));
  const InputFile& in = *opened;
  const std::string& source = in.source;
  if (in.size == 0) fail(source, "file is empty, too short for the 8-byte header length");
  void* map = ::mmap(nullptr, static_cast<std::size_t>(in.size), PROT_READ, MAP_PRIVATE, in.fd, 0);
  if (map == MAP_FAILED) fail(source, "cannot map: " + errno_text(errno));
  watch_mapping(map, in.size, source.c_str());
  SafetensorsFile f;  // owns the mapping from here, so a parse error unmaps it
  f.path = source;
  f.base = static_cast<const std::uint8_t*>(map);
  f.size = in.size;
  // A header read before is taken as it is when the mapping starts with the same bytes (the file
  // did not change in between): the JSON is not parsed twice.
  if (read && read->size == in.size && std::equal(read->bytes.begin(), read->bytes.end(), f.base))
    f.header = std::move(read->header);
  else
    f.header = parse_safetensors({f.base, f.size}, source);
  return f;
}

const float* tensor_as_f32(const SafetensorsFile& file, const std::string& name,
                           std::vector<float>& storage) {
  return tensor_as_f32(file.entry(name), name, storage);
}

const float* tensor_as_f32(const SourceTensor& t, const std::string& name,
                           std::vector<float>& storage) {
  if (!t.type)
    fail(t.file,
         "tensor " + attn::quoted(name) + ": expected " + weight_type_names() + ", got " + t.dtype);
  const auto n = t.numel();
  if (*t.type == WeightType::f32 && reinterpret_cast<std::uintptr_t>(t.data) % alignof(float) == 0)
    return reinterpret_cast<const float*>(t.data);
  weight_bytes(*t.type, n, t.file + ": tensor " + attn::quoted(name));  // whole blocks
  storage.resize(std::size_t(n));
  traits(*t.type).to_f32(t.data, n, storage.data());  // never reads floats misaligned
  return storage.data();
}

SourceTensor source_tensor(const TensorInfo& t, const std::string& file, const std::uint8_t* data) {
  const char* dtype = dtype_name(t.dtype);
  return {dtype, weight_type_of_safetensors(dtype), t.shape, data, t.end - t.begin, file};
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(header.tensors.size());
  for (const auto& entry : header.tensors) out.push_back(entry.first);
  return out;
}

void write_safetensors(OutputFile& out, const std::vector<OutTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string header = build_header(tensors, metadata, out.target().string());
  std::array<std::uint8_t, 8> len{};
  for (std::size_t i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(header.size() >> (8 * i));
  out.write(len.data(), len.size());
  out.write(header.data(), header.size());
  for (const OutTensor& t : tensors) {
    std::uint64_t n = 1;
    for (std::int64_t d : t.shape) n *= static_cast<std::uint64_t>(d);  // build_header checked
    if (n > 0) out.write(t.data, n * sizeof(float));
  }
}

void write_safetensors(const std::filesystem::path& path, const std::vector<OutTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  OutputFile out(path, "output");
  write_safetensors(out, tensors, metadata);
  out.commit();
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  return list_str(shape);
}

}  // namespace attn
