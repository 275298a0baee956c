#include "workloads/dump_diff.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "attn/engine/activations.hpp"
#include "attn/error.hpp"
#include "attn/halves.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/io/text.hpp"
#include "attn/model/hook_names.hpp"

namespace cli {

using namespace attn;  // the dumps' names and dtypes are the library's

namespace {

constexpr std::int64_t kLast = std::numeric_limits<std::int64_t>::max();

// Reads a number followed by `.` or the end from the front of s: a block or call index.
bool take_index(std::string_view& s, std::int64_t& value) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  const std::size_t digits = std::size_t(end - s.data());
  if (ec != std::errc() || digits == 0 || value < 0) return false;
  s.remove_prefix(digits);
  if (s.empty()) return true;
  if (s.front() != '.') return false;
  s.remove_prefix(1);
  return true;
}

bool take(std::string_view& s, std::string_view prefix) {
  if (!s.starts_with(prefix)) return false;
  s.remove_prefix(prefix.size());
  return true;
}

// A block site's slot: even, by its place in kForwardSites; the dump's own tensors made right
// after a site take the odd slot after it.
std::int64_t slot_of(Site site) {
  const auto* at = std::find(std::begin(kForwardSites), std::end(kForwardSites), site);
  return 2 * std::int64_t(at - std::begin(kForwardSites));
}

// "prefill" -> 0, "decode.{i}" -> i, as the dump's attn.{l}.* and lens.{l}.* end.
bool call_suffix(std::string_view s, std::int64_t& call) {
  if (s == "prefill") return call = 0, true;
  return take(s, "decode.") && take_index(s, call) && s.empty() && call > 0;
}

// cache.{l}.k|v, attn.{l}.{call}, lens.{l}[.{call}]: where the forward makes them.
bool rank_dump_tensor(std::string_view name, ForwardRank& r) {
  std::string_view s = name;
  std::int64_t layer = 0;
  if (take(s, "cache.") && take_index(s, layer) && (s == "k" || s == "v")) {
    r = {0, layer, slot_of(s == "k" ? Site::k : Site::v) + 1};
    return true;
  }
  s = name;
  std::int64_t call = 0;
  if (take(s, "attn.") && take_index(s, layer) && call_suffix(s, call)) {
    r = {call, layer, slot_of(Site::attn_probs)};
    return true;
  }
  s = name;
  if (take(s, "lens.") && take_index(s, layer)) {
    if (!call_suffix(s, call)) call = 0;
    r = {call, layer, slot_of(Site::resid_post) + 1};
    return true;
  }
  return false;
}

// Within a call: blocks.{l}.{hook}, ln_final.hook_normalized, output, logits.
bool rank_in_call(std::string_view s, std::int64_t call, ForwardRank& r) {
  if (s == "output") return r = {call, kLast, 0}, true;
  if (s == kHookNames[std::size_t(Site::final_norm)]) return r = {call, kLast, 1}, true;
  if (s == "logits") return r = {call, kLast, 2}, true;
  std::int64_t layer = 0;
  if (!take(s, "blocks.") || !take_index(s, layer)) return false;
  for (const Site site : kForwardSites)
    if (kHookNames[std::size_t(site)] == s) return r = {call, layer, slot_of(site)}, true;
  return false;
}

// A tensor's elements as doubles, a chunk at a time, from the file's bytes (any alignment).
struct Reader {
  Dtype dtype;
  const std::uint8_t* bytes;

  double at(std::int64_t i) const {
    switch (dtype) {
      case Dtype::F32: {
        float v;
        std::memcpy(&v, bytes + 4 * i, 4);
        return v;
      }
      case Dtype::F64: {
        double v;
        std::memcpy(&v, bytes + 8 * i, 8);
        return v;
      }
      default: {
        std::uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        return dtype == Dtype::F16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
    }
  }
};

Reader reader(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo& t = f.info(name);
  if (t.dtype != Dtype::F32 && t.dtype != Dtype::F64 && t.dtype != Dtype::F16 &&
      t.dtype != Dtype::BF16)
    throw InputError(f.path + ": tensor " + attn::quoted(name) +
                     ": expected F32, F64, F16 or BF16, got " + dtype_name(t.dtype));
  return {t.dtype, f.bytes(t)};
}

void compare(const Reader& a, const Reader& b, DiffTolerance tol, TensorDiff& d) {
  for (std::int64_t i = 0; i < d.numel; ++i) {
    const double x = a.at(i), y = b.at(i);
    if (x == y || (std::isnan(x) && std::isnan(y))) continue;  // same infinity, NaN, value
    if (!std::isfinite(x) || !std::isfinite(y)) {
      ++d.over, ++d.nonfinite;
      continue;
    }
    const double err = std::fabs(x - y);
    d.max_abs = std::max(d.max_abs, err);
    if (y != 0) d.max_rel = std::max(d.max_rel, err / std::fabs(y));
    if (!(err <= tol.atol + tol.rtol * std::fabs(y))) ++d.over;
  }
}

}  // namespace

ForwardRank forward_rank(std::string_view name) {
  if (name == "input") return {-1, 0, 0};
  ForwardRank r;
  if (rank_dump_tensor(name, r)) return r;
  std::string_view s = name;
  std::int64_t call = 0;
  if (take(s, "prefill.")) {
    if (rank_in_call(s, 0, r)) return r;
  } else if (s = name; take(s, "decode.") && take_index(s, call) && call > 0) {
    if (rank_in_call(s, call, r)) return r;
  } else if (rank_in_call(name, 0, r)) {  // TransformerLens's plain names: the prefill's
    return r;
  }
  return {kLast, kLast, kLast};
}

void sort_forward(std::vector<std::string>& names) {
  std::vector<std::pair<ForwardRank, std::string>> keyed;
  for (std::string& n : names) keyed.emplace_back(forward_rank(n), std::move(n));
  std::sort(keyed.begin(), keyed.end());
  names.clear();
  for (auto& k : keyed) names.push_back(std::move(k.second));
}

bool DumpDiff::equal() const {
  return std::all_of(tensors.begin(), tensors.end(), [](const TensorDiff& t) { return t.equal(); });
}

DumpDiff diff_dumps(const std::filesystem::path& a_path, const std::filesystem::path& b_path,
                    DiffTolerance tol) {
  const SafetensorsFile a = open_safetensors(a_path);
  const SafetensorsFile b = open_safetensors(b_path);
  DumpDiff out{a.path, b.path, tol, {}, {}};
  std::set<std::string> all;
  for (const auto& [name, t] : a.header.tensors) all.insert(name);
  for (const auto& [name, t] : b.header.tensors) all.insert(name);
  std::vector<std::string> names(all.begin(), all.end());
  sort_forward(names);
  for (const std::string& name : names) {
    TensorDiff d;
    d.name = name;
    d.in_a = a.contains(name), d.in_b = b.contains(name);
    const Reader ra = d.in_a ? reader(a, name) : Reader{};
    const Reader rb = d.in_b ? reader(b, name) : Reader{};
    if (d.in_a) d.dtype_a = dtype_name(ra.dtype), d.shape_a = a.info(name).shape;
    if (d.in_b) d.dtype_b = dtype_name(rb.dtype), d.shape_b = b.info(name).shape;
    if (d.same_shape()) {
      d.numel = a.info(name).numel();
      compare(ra, rb, tol, d);
    }
    if (out.first.empty() && d.in_a && d.in_b && !d.equal()) out.first = name;
    out.tensors.push_back(std::move(d));
  }
  return out;
}

}  // namespace cli
