// The page of attn-cli view: META (the figures, the lens, the tokens) as JSON and the recorded
// cells deflated and in base64, put into the template (view_page.html) at its marker.
#include "workloads/view.hpp"

#include <zlib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "attn/io/text.hpp"
#include "attn/version.hpp"

namespace cli {

namespace {

using json = nlohmann::json;

}  // namespace

json view_stats_json(const ViewRecorder& r) {
  json values = json::array();
  const std::size_t H = r.shape().heads.size();
  for (std::size_t i = 0; i < r.shape().layers.size(); ++i) {
    json layer = json::array();
    for (std::size_t k = 0; k < H; ++k) {
      json head = json::array();
      for (const double m : attn::head_means(r.stats()[i * H + k]))
        head.push_back(std::isfinite(m) ? json(m) : json(nullptr));
      layer.push_back(std::move(head));
    }
    values.push_back(std::move(layer));
  }
  return {{"names", attn::kHeadStatNames}, {"values", std::move(values)}};
}

json value_norms_json(const ViewRecorder& r) {
  const std::int64_t T = r.shape().positions(), seen = r.positions_seen();
  const std::size_t blocks = r.shape().layers.size() * r.shape().heads.size();
  std::string bytes;
  bytes.reserve(blocks * std::size_t(seen) * 4);
  for (std::size_t b = 0; b < blocks; ++b)
    for (std::int64_t t = 0; t < seen; ++t) {
      const auto u =
          std::bit_cast<std::uint32_t>(r.value_norms()[b * std::size_t(T) + std::size_t(t)]);
      for (int s = 0; s < 32; s += 8) bytes += char(u >> s & 0xff);
    }
  return {{"layout", "layer, head, position"}, {"float32", base64(bytes)}};
}

namespace {

// META's lens: {"k", "layers" (every model layer), "top": [layer][t][k] of [id, logit],
// "texts": {id: text}} of the recorded positions; null without a lens.
json lens_json(const attn::ModelArgs& a, const ViewRecorder& r, const attn::Tokenizer* tok) {
  if (!r.lens()) return nullptr;
  const std::int64_t k = r.lens()->k_used, T = r.positions_seen(), planned = r.shape().positions();
  json layers = json::array(), top = json::array(), texts = json::object();
  for (std::int64_t l = 0; l < a.n_layers; ++l) {
    layers.push_back(a.first_layer + l);
    json positions = json::array();
    for (std::int64_t t = 0; t < T; ++t) {
      json best = json::array();
      for (std::int64_t j = 0; j < k; ++j) {
        const attn::TopLogit& e = r.lens_tops()[std::size_t((l * planned + t) * k + j)];
        best.push_back({e.id, e.logit});
        const std::string id = std::to_string(e.id);
        if (!texts.contains(id)) texts[id] = tok ? attn::token_bytes(*tok, e.id) : id;
      }
      positions.push_back(std::move(best));
    }
    top.push_back(std::move(positions));
  }
  return {{"k", k}, {"layers", std::move(layers)}, {"top", std::move(top)}, {"texts", texts}};
}

}  // namespace

json view_meta(const attn::ModelArgs& a, const ViewRecorder& r, const std::string& title,
               const attn::Tokenizer* tok) {
  const ViewShape& v = r.shape();
  const std::int64_t T = r.positions_seen();
  json row_keys = json::array(), keep = json::array();
  for (std::int64_t t = 0; t < T; ++t) {
    row_keys.push_back(v.row_keys(t));
    keep.push_back(int(r.keep()[std::size_t(t)]));
  }
  std::vector<std::int64_t> layers;
  for (const std::int64_t l : v.layers) layers.push_back(a.first_layer + l);
  return {{"format", "attn-cli-view"},
          {"version", 1},
          {"title", title},
          {"model",
           {{"n_layers", a.n_layers},
            {"n_heads", a.n_heads},
            {"n_kv_heads", a.n_kv_heads},
            {"head_dim", a.head_dim()},
            {"dim", a.dim},
            {"vocab_size", a.vocab_size},
            {"first_layer", a.first_layer},
            {"block", attn::block_name(a.block)},
            {"mask", attn::mask_name(a.mask)},
            {"rope", attn::rope_name(a.rope)}}},
          {"layers", layers},
          {"heads", v.heads},
          {"batch_row", v.batch_row},
          {"positions", T},
          {"prefill", std::min(v.prefill, T)},
          {"steps", std::max<std::int64_t>(0, T - v.prefill)},
          {"row_keys", std::move(row_keys)},
          {"keep", std::move(keep)},
          {"stats", view_stats_json(r)},
          {"value_norms", value_norms_json(r)},
          {"lens", lens_json(a, r, tok)},
          {"generated_by", std::string("attn-cli ") + ATTN_VERSION}};
}

std::string script_json(const json& meta) {
  const std::string s = meta.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(s.size() + s.size() / 16);
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') {
      out += "\\u003c";
    } else if (s[i] == '\xe2' && i + 2 < s.size() && s[i + 1] == '\x80' &&
               (s[i + 2] == '\xa8' || s[i + 2] == '\xa9')) {
      out += s[i + 2] == '\xa8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string base64(const std::string& bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  const auto byte = [&](std::size_t k) { return std::uint32_t(std::uint8_t(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[v >> s & 63];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    const std::uint32_t v = byte(i) << 16 | (rest == 2 ? byte(i + 1) << 8 : 0);
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += rest == 2 ? kAlphabet[v >> 6 & 63] : '=';
    out += '=';
  }
  return out;
}

namespace {

// Raw deflate of the recorded rows of every block, in the page's layout (layer, head, row).
class Deflater {
 public:
  Deflater() {
    // Level 1: the 8B-shaped page's 67 MB of cells deflate in ~2.5 s to 26.7 MB, where the
    // default level 6 takes ~25 s for 24.0 MB.
    if (deflateInit2(&z_, Z_BEST_SPEED, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw std::runtime_error("view: zlib cannot start a deflate stream");
  }
  ~Deflater() { deflateEnd(&z_); }
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;

  void add(const std::uint8_t* data, std::size_t n, bool finish) {
    do {
      const std::size_t chunk = std::min<std::size_t>(n, 1u << 30);
      z_.next_in = const_cast<Bytef*>(data);  // zlib's API is not const
      z_.avail_in = uInt(chunk);
      data += chunk;
      n -= chunk;
      const int flush = finish && n == 0 ? Z_FINISH : Z_NO_FLUSH;
      int rc = Z_OK;
      do {
        const std::size_t at = out_.size();
        out_.resize(at + kOut);
        z_.next_out = reinterpret_cast<Bytef*>(out_.data() + at);
        z_.avail_out = uInt(kOut);
        rc = deflate(&z_, flush);
        if (rc == Z_STREAM_ERROR) throw std::runtime_error("view: zlib's deflate failed");
        out_.resize(at + kOut - z_.avail_out);
      } while (z_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
    } while (n > 0);
  }

  std::string take() { return std::move(out_); }

 private:
  static constexpr std::size_t kOut = std::size_t{1} << 20;
  z_stream z_{};
  std::string out_;
};

}  // namespace

namespace {

// The recorded rows [row_begin, end) of every block of r, deflated raw, in base64.
std::string coded_cells(const ViewRecorder& r, std::int64_t end) {
  const ViewShape& v = r.shape();
  const std::int64_t block = v.block_cells(end);
  Deflater z;
  const std::size_t blocks = v.layers.size() * v.heads.size();
  for (std::size_t b = 0; b < blocks; ++b)
    z.add(r.block(b / v.heads.size(), b % v.heads.size()), std::size_t(block * v.bytes_per_cell()),
          b + 1 == blocks);
  if (blocks == 0) z.add(nullptr, 0, true);
  return base64(z.take());
}

}  // namespace

attn::OutputFile stage_view_page(const std::filesystem::path& path, json meta,
                                 const ViewRecorder& r, const ViewRecorder* other) {
  const ViewShape& v = r.shape();
  const std::int64_t end = r.rows_end();
  if (other && other->rows_end() != end)
    throw std::logic_error("view: the compared runs recorded different rows");
  meta["rows"] = {v.row_begin, end};
  meta["cells"] = std::int64_t(v.layers.size() * v.heads.size()) * v.block_cells(end);
  meta["encoding"] = {
      {"bits", v.bits}, {"code", v.bits == 8 ? "sqrt" : "linear"}, {"compression", "deflate-raw"}};
  meta["layout"] = "layer, head, row";
  const std::string probs = coded_cells(r, end);
  const std::string data = script_json(meta);

  const std::string_view page(reinterpret_cast<const char*>(kViewPage), kViewPage_size);
  const std::size_t at = page.find(kViewMarker);
  if (at == std::string_view::npos)
    throw std::logic_error("view: the page template has no insertion marker");
  attn::OutputFile out(path, "page");
  const auto put = [&](std::string_view s) { out.write(s.data(), s.size()); };
  put(page.substr(0, at));
  put("<script id=\"attn-meta\" type=\"application/json\">");
  put(data);
  put("</script>\n<script id=\"attn-probs\" type=\"application/octet-stream\">");
  put(probs);
  put("</script>");
  if (other) {
    put("\n<script id=\"attn-probs-corrupted\" type=\"application/octet-stream\">");
    put(coded_cells(*other, end));
    put("</script>");
  }
  put(page.substr(at + std::strlen(kViewMarker)));
  return out;
}

}  // namespace cli
