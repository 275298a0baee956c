#include "attn/engine/capture.hpp"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "attn/engine/session.hpp"
#include "attn/error.hpp"
#include "attn/io/detail/json_checks.hpp"
#include "attn/io/files.hpp"
#include "attn/io/output.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/io/text.hpp"
#include "attn/model/hook_names.hpp"
#include "attn/model/model.hpp"

namespace attn {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kLineLimit = std::size_t{64} << 20;  // one line of the corpus, at most
constexpr std::uint64_t kManifestLimit = std::uint64_t{16} << 20;

// The sites whose activation is one row of `dim` per position: what a shard stacks.
bool per_position(Site s) {
  return s == Site::resid_pre || s == Site::resid_mid || s == Site::resid_post ||
         s == Site::attn_out || s == Site::mlp_out;
}

std::vector<HookPoint> parse_hooks(const std::vector<std::string>& names, const ModelArgs& a) {
  if (names.empty()) throw InputError("capture: no hook named", "hooks");
  std::vector<HookPoint> points;
  for (const std::string& n : names) {
    const HookPoint p = parse_hook_name(n, a.n_layers);
    if (!per_position(p.site))
      throw InputError("capture: " + quoted(n, 60) +
                           " is not a per-position hook (resid_pre, resid_mid, resid_post, "
                           "attn_out, mlp_out)",
                       "hooks");
    if (std::find(points.begin(), points.end(), p) != points.end())
      throw InputError("capture: " + quoted(n, 60) + " named twice", "hooks");
    points.push_back(p);
  }
  return points;
}

// A JSON document of the corpus or the manifest, its depth, keys and size checked before the
// DOM is built (io/detail/json_checks.hpp: the DOM recurses). `what` names it in messages.
json checked_json(std::string_view text, const std::string& what) {
  JsonLimits limits;
  limits.max_depth = 16;
  return parse_checked_json(text, limits, what);
}

// The corpus, a line at a time: plain text (each line with its newline) or JSON Lines' "text".
class Corpus {
 public:
  Corpus(const std::filesystem::path& path, bool jsonl)
      : source_(escape(path.string(), 80)), jsonl_(jsonl) {
    size_ = open_regular(path, "corpus").size;  // a FIFO, a directory, ... refused
    in_.open(path, std::ios::binary);
    if (!in_) throw InputError(source_ + ": cannot open the corpus");
  }
  // The next document's text; false at the end.
  bool next(std::string& text) {
    while (read_line()) {
      ++line_no_;
      if (!jsonl_) {
        text = line_ + "\n";
        return true;
      }
      if (line_.find_first_not_of(" \t\r") == std::string::npos) continue;
      text = json_text();
      return true;
    }
    return false;
  }
  double fraction() const { return size_ ? double(read_) / double(size_) : 1.0; }

 private:
  bool read_line() {
    line_.clear();
    if (in_.peek() == std::char_traits<char>::eof()) return false;
    char buf[1 << 16];
    while (true) {
      in_.get(buf, sizeof buf, '\n');
      line_.append(buf, std::size_t(in_.gcount()));
      read_ += std::uint64_t(in_.gcount());
      if (line_.size() > kLineLimit)
        throw InputError(source_ + ": line " + std::to_string(line_no_ + 1) +
                         " is longer than 64 MiB");
      if (in_.eof()) return true;
      if (in_.fail()) in_.clear();  // an empty line: nothing extracted
      if (in_.peek() == '\n') {
        in_.get();
        ++read_;
        return true;
      }
    }
  }
  std::string json_text() const {
    const std::string where = source_ + ": line " + std::to_string(line_no_);
    const json j = checked_json(line_, where);
    if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
      throw InputError(where + ": expected an object with a string \"text\"");
    return j["text"].get<std::string>();
  }

  std::string source_;
  bool jsonl_;
  std::ifstream in_;
  std::uint64_t size_ = 0, read_ = 0;
  std::int64_t line_no_ = 0;
  std::string line_;
};

// The corpus as rows of ids: the prefix (BOS, as the tokenizer adds one) then the stream's next.
class Rows {
 public:
  Rows(const Tokenizer& t, Corpus& c, std::int64_t ctx) : tok_(t), corpus_(c), ctx_(ctx) {
    prefix_ = encode(t, "");
    if (std::int64_t(prefix_.size()) >= ctx)
      throw InputError(
          "capture: rows of " + std::to_string(ctx) + " positions leave no room after BOS", "ctx");
    raw_.add_special_tokens = false;
    raw_.bos = false;
  }
  // Appends one row to `out`; false when the corpus has no whole row left.
  bool next(std::vector<std::int32_t>& out) {
    const std::size_t want = std::size_t(ctx_) - prefix_.size();
    while (pending_.size() - at_ < want) {
      std::string text;
      if (!corpus_.next(text)) return false;
      pending_.erase(pending_.begin(), pending_.begin() + std::ptrdiff_t(at_));
      at_ = 0;
      const std::vector<std::int32_t> ids = encode(tok_, text, raw_);
      pending_.insert(pending_.end(), ids.begin(), ids.end());
    }
    out.insert(out.end(), prefix_.begin(), prefix_.end());
    out.insert(out.end(), pending_.begin() + std::ptrdiff_t(at_),
               pending_.begin() + std::ptrdiff_t(at_ + want));
    at_ += want;
    return true;
  }

 private:
  const Tokenizer& tok_;
  Corpus& corpus_;
  std::int64_t ctx_;
  std::vector<std::int32_t> prefix_, pending_;
  std::size_t at_ = 0;
  EncodeOptions raw_;
};

struct Manifest {
  json j;
  std::filesystem::path path;
};

json settings(const CaptureSpec& s, std::int64_t rows_per_shard) {
  return {{"model", s.model},
          {"corpus", s.corpus.string()},
          {"jsonl", s.jsonl},
          {"hooks", s.hooks},
          {"ctx", s.ctx},
          {"batch", s.batch},
          {"rows_per_shard", rows_per_shard}};
}

// The manifest a earlier run left, checked against this run's settings; a new one otherwise.
Manifest open_manifest(const CaptureSpec& s, std::int64_t rows_per_shard) {
  Manifest m{settings(s, rows_per_shard), s.out / "manifest.json"};
  m.j["format"] = "attn-cli capture";
  m.j["version"] = 1;
  m.j["shards"] = json::array();
  m.j["rows"] = 0;
  m.j["done"] = false;
  std::error_code ec;
  if (!std::filesystem::exists(m.path, ec)) return m;
  const std::string where = escape(m.path.string(), 80);
  const json old = checked_json(read_small_file(m.path, "manifest", kManifestLimit), where);
  const json now = settings(s, rows_per_shard);
  for (const auto& [key, value] : now.items())
    if (!old.is_object() || !old.contains(key) || old[key] != value)
      throw InputError(where + ": '" + key + "' was " +
                       (old.is_object() && old.contains(key) ? old[key].dump() : "absent") +
                       ", this run's is " + value.dump() +
                       " (the same settings continue it; another folder starts anew)");
  if (!old.contains("rows") || !old["rows"].is_number_unsigned() || !old.contains("shards") ||
      !old["shards"].is_array())
    throw InputError(where + ": 'rows' or 'shards' is missing: remove it to start again");
  m.j = old;
  return m;
}

void write_manifest(const Manifest& m) {
  OutputFile out(m.path, "manifest");
  const std::string text = m.j.dump(1) + "\n";
  out.write(text.data(), text.size());
  out.commit();
}

}  // namespace

std::uint64_t parse_size(const std::string& text, const char* what) {
  std::size_t end = 0;
  std::uint64_t n = 0;
  while (end < text.size() && text[end] >= '0' && text[end] <= '9') {
    if (n > (UINT64_MAX - 9) / 10) throw InputError(std::string(what) + ": too large", what);
    n = n * 10 + std::uint64_t(text[end++] - '0');
  }
  const std::string unit = text.substr(end);
  const std::map<std::string, int> shifts = {{"", 0},     {"B", 0},   {"K", 10},  {"KB", 10},
                                             {"KiB", 10}, {"M", 20},  {"MB", 20}, {"MiB", 20},
                                             {"G", 30},   {"GB", 30}, {"GiB", 30}};
  const auto it = shifts.find(unit);
  if (end == 0 || it == shifts.end() || n == 0 || n > (UINT64_MAX >> it->second))
    throw InputError(
        std::string(what) + ": expected a size such as 256MB or 1G, got " + quoted(text, 40), what);
  return n << it->second;
}

CaptureProgress capture(Session& e, const CaptureSpec& s,
                        const std::function<void(const CaptureProgress&)>& progress) {
  const auto t0 = Clock::now();
  const ModelArgs& a = e.model.args;
  if (!e.tokenizer) throw InputError("capture needs a tokenizer with text", "tokenizer");
  const std::vector<HookPoint> points = parse_hooks(s.hooks, a);
  // A row's bytes: each hook's [ctx, dim] and its ids (as F32).
  const std::uint64_t row_bytes =
      std::uint64_t(s.ctx) * (std::uint64_t(points.size()) * std::uint64_t(a.dim) + 1) * 4;
  const std::int64_t rows_per_shard =
      std::max<std::int64_t>(1, std::int64_t(s.shard_bytes / row_bytes / std::uint64_t(s.batch))) *
      s.batch;
  Manifest m = open_manifest(s, rows_per_shard);
  CaptureProgress p;
  p.written = m.j["rows"].get<std::int64_t>() * s.ctx;
  if (m.j.value("done", false)) {
    progress(p);
    return p;
  }
  Corpus corpus(s.corpus, s.jsonl);
  Rows rows(*e.tokenizer, corpus, s.ctx);
  std::vector<std::int32_t> ids;
  for (std::int64_t r = 0; r < m.j["rows"].get<std::int64_t>(); ++r, ids.clear())
    if (!rows.next(ids))
      throw InputError(escape(m.path.string(), 80) +
                       ": more rows than the corpus holds (another corpus?)");
  // The shard: each hook's [rows_per_shard * ctx, dim] and the ids, allocated once.
  const std::size_t positions = std::size_t(rows_per_shard * s.ctx);
  std::vector<std::vector<float>> kept(points.size(),
                                       std::vector<float>(positions * std::size_t(a.dim)));
  std::vector<float> kept_ids(positions);
  std::vector<std::int64_t> index(std::size_t(a.n_layers) * kSiteCount, -1);
  Observer o;
  o.layers.assign(std::size_t(a.n_layers), 0);
  o.layer_sites.assign(std::size_t(a.n_layers), 0);
  for (std::size_t h = 0; h < points.size(); ++h) {
    const auto l = std::size_t(points[h].layer);
    o.sites |= site_bit(points[h].site);
    o.layers[l] = 1;
    o.layer_sites[l] |= site_bit(points[h].site);
    index[l * kSiteCount + std::size_t(points[h].site)] = std::int64_t(h);
  }
  std::int64_t in_shard = 0;  // rows
  o.on_tensor = [&](const Observation& ob) {
    const std::int64_t h = index[std::size_t(ob.layer) * kSiteCount + std::size_t(ob.site)];
    if (h < 0) return;
    const std::size_t n = std::size_t(ob.shape[0] * ob.shape[1] * a.dim);
    std::copy(ob.data, ob.data + n,
              kept[std::size_t(h)].begin() + std::ptrdiff_t(in_shard * s.ctx * a.dim));
  };
  const Attached attached(e.model, o);
  std::vector<float> logits(std::size_t(s.batch * a.vocab_size));
  auto write_shard = [&] {
    const std::int64_t shard = std::int64_t(m.j["shards"].size());
    char name[32];
    std::snprintf(name, sizeof name, "shard-%05lld.safetensors", static_cast<long long>(shard));
    std::vector<OutTensor> tensors;
    for (std::size_t h = 0; h < points.size(); ++h)
      tensors.push_back({s.hooks[h], {in_shard * s.ctx, a.dim}, kept[h].data()});
    tensors.push_back({"tokens", {in_shard * s.ctx}, kept_ids.data()});
    write_safetensors(s.out / name, tensors, {{"ctx", std::to_string(s.ctx)}});
    m.j["shards"].push_back({{"file", name}, {"rows", in_shard}});
    m.j["rows"] = m.j["rows"].get<std::int64_t>() + in_shard;
    p.written += in_shard * s.ctx;
    in_shard = 0;
    write_manifest(m);
  };
  bool more = true;
  while (more) {
    ids.clear();
    std::int64_t b = 0;
    while (b < s.batch && (more = rows.next(ids))) ++b;
    if (b > 0) {
      for (std::size_t i = 0; i < ids.size(); ++i)
        kept_ids[std::size_t(in_shard * s.ctx) + i] = float(ids[i]);
      const auto f0 = Clock::now();
      reset(e);
      forward_tokens(e, ids.data(), b, s.ctx, 0, logits.data(), false);
      p.forward_seconds += std::chrono::duration<double>(Clock::now() - f0).count();
      in_shard += b;
      p.tokens += b * s.ctx;
    }
    if (in_shard == rows_per_shard || (!more && in_shard > 0)) write_shard();
    p.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    p.fraction = more ? corpus.fraction() : 1.0;
    progress(p);
  }
  m.j["done"] = true;
  write_manifest(m);
  return p;
}

}  // namespace attn
