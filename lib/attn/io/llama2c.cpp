#include "attn/io/llama2c.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "attn/checked_size.hpp"
#include "attn/error.hpp"
#include "attn/io/files.hpp"
#include "attn/io/text.hpp"

static_assert(std::endian::native == std::endian::little, "little-endian host required");

namespace attn {

namespace {

// The header's seven ints, or why they are not a checkpoint's: `why` says which value is wrong
// or which size was expected.
std::optional<Llama2cHeader> check_header(std::span<const std::uint8_t> head,
                                          std::uint64_t file_size, std::string& why) {
  if (head.size() < kLlama2cHeaderBytes || file_size < kLlama2cHeaderBytes) {
    why = "the file is " + std::to_string(file_size) + " bytes, too short for the 28-byte header";
    return std::nullopt;
  }
  std::int32_t v[7];
  std::memcpy(v, head.data(), sizeof v);
  static constexpr const char* kNames[7] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                                            "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i) {
    const bool ok =
        i == 5 ? v[i] != 0 && v[i] != std::numeric_limits<std::int32_t>::min() : v[i] > 0;
    if (!ok) {
      why = std::string("header ") + kNames[i] + " is " + std::to_string(v[i]);
      return std::nullopt;
    }
  }
  Llama2cHeader h{v[0], v[1], v[2], v[3], v[4], v[5] < 0 ? -v[5] : v[5], v[6], v[5] > 0};
  if (h.dim % h.n_heads != 0 || (h.dim / h.n_heads) % 2 != 0) {
    why = "header dim " + std::to_string(h.dim) + " is not n_heads " + std::to_string(h.n_heads) +
          " heads of an even size";
    return std::nullopt;
  }
  if (h.n_kv_heads > h.n_heads || h.n_heads % h.n_kv_heads != 0) {
    why = "header n_heads " + std::to_string(h.n_heads) + " is not a multiple of n_kv_heads " +
          std::to_string(h.n_kv_heads);
    return std::nullopt;
  }
  // Every product and sum through the one checked helper: the ints are at most 2^31 each, their
  // sums of products can wrap.
  const std::int64_t dim = h.dim, hidden = h.hidden_dim, layers = h.n_layers, vocab = h.vocab_size;
  const std::int64_t head_size = dim / h.n_heads, kv_dim = head_size * h.n_kv_heads;
  SizeSum floats;
  floats.add({vocab, dim});                            // token_embedding_table
  floats.add({layers, 2, dim});                        // rms_att_weight, rms_ffn_weight
  floats.add({layers, 2, dim, dim});                   // wq, wo
  floats.add({layers, 2, kv_dim, dim});                // wk, wv
  floats.add({layers, 3, hidden, dim});                // w1, w2, w3
  floats.add({dim});                                   // rms_final_weight
  floats.add({h.seq_len, head_size});                  // freq_cis_real and _imag
  if (!h.shared_classifier) floats.add({vocab, dim});  // wcls
  const std::optional<std::uint64_t> t =
      floats.value() ? mul_add(*floats.value(), 4, kLlama2cHeaderBytes) : std::nullopt;
  if (!t) {
    why = "the header's sizes overflow 64 bits";
    return std::nullopt;
  }
  if (*t != file_size) {
    why = "the header implies " + std::to_string(*t) + " bytes, the file has " +
          std::to_string(file_size) + (file_size < *t ? " (cut short)" : "");
    return std::nullopt;
  }
  return h;
}

// The tensors in file order, each [rows, cols] (or [n] for norms), with their offsets.
std::vector<std::pair<std::string, Llama2cCheckpoint::Entry>> layout(const Llama2cHeader& h) {
  const std::int64_t dim = h.dim, hidden = h.hidden_dim, vocab = h.vocab_size;
  const std::int64_t kv_dim = dim / h.n_heads * h.n_kv_heads;
  std::vector<std::pair<std::string, Llama2cCheckpoint::Entry>> out;
  std::uint64_t offset = kLlama2cHeaderBytes;  // check_header bounded every sum by the file size
  auto put = [&](const std::string& name, std::vector<std::int64_t> shape) {
    const std::uint64_t n = *mul_add(*size_product(shape), 4);  // check_header summed these
    out.push_back({name, {std::move(shape), offset, n}});
    offset += n;
  };
  // Each array holds all layers: put each layer's slice in turn.
  auto per_layer = [&](const std::string& suffix, std::vector<std::int64_t> shape) {
    for (std::int32_t l = 0; l < h.n_layers; ++l)
      put("layers." + std::to_string(l) + "." + suffix, shape);
  };
  put("tok_embeddings.weight", {vocab, dim});
  per_layer("attention_norm.weight", {dim});
  per_layer("attention.wq.weight", {dim, dim});
  per_layer("attention.wk.weight", {kv_dim, dim});
  per_layer("attention.wv.weight", {kv_dim, dim});
  per_layer("attention.wo.weight", {dim, dim});
  per_layer("ffn_norm.weight", {dim});
  per_layer("feed_forward.w1.weight", {hidden, dim});
  per_layer("feed_forward.w2.weight", {dim, hidden});
  per_layer("feed_forward.w3.weight", {hidden, dim});
  put("norm.weight", {dim});
  offset = *mul_add(*size_product({4, h.seq_len, dim / h.n_heads}), 1, offset);  // freq_cis
  if (!h.shared_classifier) put("output.weight", {vocab, dim});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

}  // namespace

std::optional<Llama2cHeader> llama2c_header(std::span<const std::uint8_t> head,
                                            std::uint64_t file_size) {
  std::string why;
  return check_header(head, file_size, why);
}

std::string llama2c_lookalike(std::span<const std::uint8_t> head, std::uint64_t file_size) {
  // Seven ints within 2^24, not all zero: real headers' sizes, not text or other formats' bytes.
  if (head.size() < kLlama2cHeaderBytes) return {};
  std::int32_t v[7];
  std::memcpy(v, head.data(), sizeof v);
  bool any = false;
  for (const std::int32_t x : v) {
    if (x < -(1 << 24) || x > (1 << 24)) return {};
    any |= x != 0;
  }
  std::string why;
  if (!any || check_header(head, file_size, why)) return {};
  if (why.starts_with("the ")) why.erase(0, 4);
  if (why.find("implies") != std::string::npos) {
    const std::int32_t vocab = v[5];
    why += vocab < 0 ? " (a negative vocab_size " + std::to_string(vocab) +
                           " says its classifier is stored apart)"
                     : "";
  }
  return why;
}

Llama2cHeader read_llama2c_header(const std::filesystem::path& path) {
  return llama2c_header_of(read_head(path, "llama2.c checkpoint", kLlama2cHeaderBytes));
}

Llama2cHeader llama2c_header_of(const FileHead& head) {
  std::string why;
  const std::optional<Llama2cHeader> h = check_header(head.bytes, head.size, why);
  if (!h) throw InputError(head.source + ": not a llama2.c checkpoint: " + why);
  return *h;
}

std::unique_ptr<Llama2cCheckpoint> parse_llama2c(std::span<const std::uint8_t> bytes,
                                                 const std::string& source) {
  std::string why;
  const std::optional<Llama2cHeader> h = check_header(bytes, bytes.size(), why);
  if (!h) throw InputError(source + ": not a llama2.c checkpoint: " + why);
  auto c = std::make_unique<Llama2cCheckpoint>();
  c->path = source;
  c->header = *h;
  c->bytes = bytes;
  c->entries = layout(*h);
  return c;
}

std::unique_ptr<Llama2cCheckpoint> open_llama2c(const std::filesystem::path& path) {
  return open_llama2c(map_file(path, "llama2.c checkpoint"));
}

std::unique_ptr<Llama2cCheckpoint> open_llama2c(std::shared_ptr<const MappedFile> m) {
  std::unique_ptr<Llama2cCheckpoint> c = parse_llama2c(m->bytes, m->source);
  c->mapping = std::move(m);
  return c;
}

std::unique_ptr<TensorSource> llama2c_tensor_source(const std::filesystem::path& path) {
  return open_llama2c(path);
}

std::unique_ptr<TensorSource> llama2c_tensor_source(std::shared_ptr<const MappedFile> mapping) {
  return open_llama2c(std::move(mapping));
}

namespace {

const Llama2cCheckpoint::Entry* find_entry(const Llama2cCheckpoint& c, const std::string& name) {
  const auto it = std::lower_bound(c.entries.begin(), c.entries.end(), name,
                                   [](const auto& e, const std::string& n) { return e.first < n; });
  return it != c.entries.end() && it->first == name ? &it->second : nullptr;
}

}  // namespace

bool Llama2cCheckpoint::contains(const std::string& name) const {
  return find_entry(*this, name) != nullptr;
}

std::vector<std::string> Llama2cCheckpoint::names() const {
  std::vector<std::string> out;
  out.reserve(entries.size());
  for (const auto& e : entries) out.push_back(e.first);
  return out;
}

SourceTensor Llama2cCheckpoint::describe(const std::string& name) {
  const Entry* e = find_entry(*this, name);
  if (!e) throw InputError(path + ": tensor " + attn::quoted(name) + " is missing");
  return {"F32", WeightType::f32, e->shape, nullptr, e->size, path};
}

SourceTensor Llama2cCheckpoint::tensor(const std::string& name) {
  SourceTensor t = describe(name);
  t.data = bytes.data() + find_entry(*this, name)->offset;
  return t;
}

}  // namespace attn
