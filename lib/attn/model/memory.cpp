#include "attn/model/memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <system_error>

#include "attn/checked_size.hpp"
#include "attn/error.hpp"
#include "attn/kernels/runtime.hpp"
#include "attn/model/buffers.hpp"
#include "attn/model/parallel.hpp"
#include "attn/model/weights.hpp"

namespace attn {

std::uint64_t checked_product(std::initializer_list<std::int64_t> factors,
                              const std::string& what) {
  const std::optional<std::uint64_t> n = size_product(factors);
  if (!n) throw InputError("the " + what + " would need more than 2^64 bytes: lower the sizes");
  return *n;
}

namespace {

constexpr std::int64_t kF32 = 4;

std::uint64_t checked_sum(std::initializer_list<std::uint64_t> terms, const std::string& what) {
  std::optional<std::uint64_t> n = 0;
  for (std::uint64_t t : terms)
    if (!(n = add_size(*n, t)))
      throw InputError("the " + what + " would need more than 2^64 bytes: lower the sizes");
  return *n;
}

// Bytes of a row of `cols` weights, at the widest of the matrices' types (F32 if none is known),
// in whole blocks: a row the load would refuse for a partial block is still counted.
std::int64_t row_bytes(const std::vector<WeightType>& types, std::int64_t cols) {
  std::int64_t n = 0;
  for (WeightType type : types.empty() ? std::vector<WeightType>{WeightType::f32} : types) {
    const WeightTypeTraits& t = traits(type);
    const std::int64_t blocks = cols / t.block + (cols % t.block != 0);
    n = std::max<std::int64_t>(n, checked_product({blocks, t.block_bytes}, "weights"));
  }
  return n;
}

// Bytes of one tensor: a matrix's rows at `types`' widest, a vector (norm, bias) at F32's.
std::uint64_t tensor_bytes(const TensorSpec& s, const std::vector<WeightType>& types) {
  const std::string w = "weights";
  const std::int64_t rows = s.shape[0], cols = s.shape.size() == 2 ? s.shape[1] : 1;
  if (s.slot.matrix) return checked_product({rows, row_bytes(types, cols)}, w);
  return checked_product({rows, cols, kF32}, w);
}

// Bytes of every tensor the layers list, drawn or converted or mapped: one layer's list (shapes
// are config sizes, each under 2^24), times n_layers.
std::uint64_t weight_bytes(const ModelArgs& a, const ModelEnds& ends,
                           const std::vector<WeightType>& types) {
  const std::string w = "weights";
  LayerWeights layer;
  std::uint64_t per_layer = 0;
  for (const TensorSpec& s : layer_tensor_specs(a, layer))
    per_layer = checked_sum({per_layer, tensor_bytes(s, types)}, w);
  std::uint64_t n = 0;
  if (__builtin_mul_overflow(per_layer, std::uint64_t(a.n_layers), &n))
    throw InputError("the weights would need more than 2^64 bytes: lower the sizes");
  TokenWeights tokens;
  for (const TensorSpec& s : token_tensor_specs(a, ends, tokens))
    n = checked_sum({n, tensor_bytes(s, types)}, w);
  return n;
}

}  // namespace

std::vector<MemoryPart> memory_parts(const ModelArgs& whole, const RunShape& r,
                                     const Shard& shard) {
  const ModelArgs a = local_args(whole, shard);  // what this rank holds
  const std::int64_t T = r.prefill + r.steps;    // check_capacity bounds both by max_seq_len
  std::vector<MemoryPart> parts;
  auto add = [&](const std::string& name, std::initializer_list<std::int64_t> factors) {
    parts.push_back({name, checked_product(factors, name)});
  };
  parts.push_back({"weights", weight_bytes(a, r.ends, r.matrices)});
  const Runtime rt = make_runtime(r.threads, kParallelFlops, r.isa, r.compute);
  const BufferPlan plan = plan_buffers(a, shard, r.max_rows, rt);
  for (const BufferPlan::Part& p : plan.parts(r.batch, T))
    parts.push_back(
        {p.name, p.written, p.zeroed ? checked_product({p.floats, kF32}, p.name) - p.written : 0});
  if (r.attention_weights) parts.push_back({"attention weights", r.attention_weights});
  if (r.logit_lens) parts.push_back({"logit lens", r.logit_lens});
  if (r.activations) parts.push_back({"activations", r.activations});
  if (r.ends.tokens_in || r.ends.logits_out) {
    add("token model activations", {2, r.max_rows, whole.dim, kF32});
    // The prefill's (each sequence's last position, or all of them) and every decode step's.
    add("logits", {r.batch, (r.all_logits ? r.prefill : 1) + r.steps, whole.vocab_size, kF32});
  }
  add("input", {r.batch, T, whole.dim, kF32});
  add("outputs", {r.batch, T + std::max<std::int64_t>(r.prefill, 1), whole.dim, kF32});
  if (r.dump)  // rank 0 gathers every rank's caches
    add("dump (cache copies)",
        {2, whole.n_layers, r.batch, whole.n_kv_heads, T, whole.head_dim(), kF32});
  return parts;
}

namespace {

// A limit this large is none: cgroup v1 writes "no limit" as 2^63 - 4096.
constexpr std::uint64_t kNoLimit = std::uint64_t(1) << 60;

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The number `text` starts with; none for "max", an empty (missing) file or anything else.
std::optional<std::uint64_t> leading_number(const std::string& text) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc()) return std::nullopt;
  return v;
}

std::uint64_t mem_available(const std::filesystem::path& root) {
  std::istringstream in(read_text(root / "proc/meminfo"));
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long kb = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kb) == 1) return kb * 1024;
  }
  return std::uint64_t(sysconf(_SC_AVPHYS_PAGES)) * std::uint64_t(sysconf(_SC_PAGE_SIZE));
}

struct Cgroup {
  std::filesystem::path dir;
  const char* limit;  // the file holding the limit, and the one holding the usage
  const char* usage;
};

// Whether the comma-separated `list` holds `item`.
bool holds(std::string_view list, std::string_view item) {
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t end = std::min(list.find(',', at), list.size());
    if (list.substr(at, end - at) == item) return true;
    at = end + 1;
  }
  return false;
}

// The process's memory cgroup from a /proc/self/cgroup line "id:controllers:path": v2's (no
// controllers) or v1's memory hierarchy; none for other v1 hierarchies. In a container that
// does not namespace cgroups the path is the host's, and the container's own cgroup is the
// mount's root.
std::optional<Cgroup> memory_cgroup(const std::filesystem::path& root, std::string_view line) {
  const std::size_t a = line.find(':'), b = a == line.npos ? a : line.find(':', a + 1);
  if (b == line.npos) return std::nullopt;
  const std::string_view controllers = line.substr(a + 1, b - a - 1);
  Cgroup c{root / "sys/fs/cgroup", "memory.max", "memory.current"};
  if (holds(controllers, "memory"))
    c = {root / "sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes"};
  else if (!controllers.empty())
    return std::nullopt;
  const std::filesystem::path own =
      c.dir / std::filesystem::path(line.substr(b + 1)).relative_path();
  std::error_code ignored;  // unreadable: the mount's root, or no limit at all
  if (std::filesystem::exists(own / c.limit, ignored)) c.dir = own;
  return c;
}

// What the cgroup's limit leaves of it; none without a limit.
std::optional<std::uint64_t> cgroup_room(const Cgroup& c) {
  const std::optional<std::uint64_t> limit = leading_number(read_text(c.dir / c.limit));
  if (!limit || *limit >= kNoLimit) return std::nullopt;
  const std::uint64_t usage = leading_number(read_text(c.dir / c.usage)).value_or(0);
  return *limit > usage ? *limit - usage : 0;
}

}  // namespace

AvailableMemory available_memory(const std::filesystem::path& root) {
  AvailableMemory best{mem_available(root), "MemAvailable"};
  std::istringstream in(read_text(root / "proc/self/cgroup"));
  std::string line;
  while (std::getline(in, line)) {
    const std::optional<Cgroup> c = memory_cgroup(root, line);
    const std::optional<std::uint64_t> room = c ? cgroup_room(*c) : std::nullopt;
    if (room && *room < best.bytes) best = {*room, std::string("cgroup ") + c->limit};
  }
  return best;
}

std::string bytes_text(std::uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

namespace {

std::string parts_text(const std::vector<MemoryPart>& parts) {
  std::string s = "Parts:";
  for (const MemoryPart& p : parts)
    if (p.bytes > 0) s += " " + p.name + " " + bytes_text(p.bytes) + ";";
  return s;
}

// The sum of `field` over the parts, and the part with the most.
std::pair<std::uint64_t, const MemoryPart*> total_of(const std::vector<MemoryPart>& parts,
                                                     std::uint64_t MemoryPart::*field) {
  std::uint64_t total = 0;
  const MemoryPart* largest = nullptr;
  for (const MemoryPart& p : parts) {
    if (__builtin_add_overflow(total, p.*field, &total))
      throw InputError("the run would need more than 2^64 bytes of memory: lower the sizes");
    if (!largest || p.*field > largest->*field) largest = &p;
  }
  return {total, largest};
}

}  // namespace

void check_memory(const std::vector<MemoryPart>& parts, const AvailableMemory& available,
                  const std::string& source) {
  const std::string from = source.empty() ? "" : source + ": ";
  const auto [total, largest] = total_of(parts, &MemoryPart::bytes);
  if (total > available.bytes) {
    std::ostringstream s;
    s << from << "the run needs " << bytes_text(total) << " of memory but "
      << bytes_text(available.bytes) << " are available (" << available.limit
      << "); the largest part is the " << largest->name << " (" << bytes_text(largest->bytes)
      << "). " << parts_text(parts);
    throw MemoryLimitError(s.str());
  }
  // Buffers sized by the capacity cost only what the run writes, but their whole size is
  // reserved up front (one mapping each): the reservation must fit too.
  const auto [reserved, widest] = total_of(parts, &MemoryPart::reserved);
  if (total + reserved > available.bytes) {
    std::ostringstream s;
    s << from << "the run writes " << bytes_text(total) << " but reserves " << bytes_text(reserved)
      << " more for its capacity, past the " << bytes_text(available.bytes) << " available ("
      << available.limit << "); the largest reservation is the " << widest->name << " ("
      << bytes_text(widest->reserved) << "): lower max_seq_len or max_batch_size or the threads. "
      << parts_text(parts);
    throw MemoryLimitError(s.str(), "max_seq_len");
  }
}

}  // namespace attn
