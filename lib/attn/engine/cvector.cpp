#include "attn/engine/cvector.hpp"

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "attn/engine/session.hpp"
#include "attn/error.hpp"
#include "attn/io/files.hpp"
#include "attn/io/gguf_write.hpp"
#include "attn/io/text.hpp"
#include "attn/model/model.hpp"

namespace attn {

namespace {

constexpr std::uint64_t kPromptFileLimit = std::uint64_t{64} << 20;

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// common.cpp's string_process_escapes: what it does not know stays as written.
std::string process_escapes(const std::string& in) {
  std::string out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\\' || i + 1 == in.size()) {
      out += in[i];
      continue;
    }
    const char c = in[++i];
    switch (c) {
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case 'x':
        if (i + 2 < in.size() && hex_digit(in[i + 1]) >= 0 && hex_digit(in[i + 2]) >= 0) {
          out += char(hex_digit(in[i + 1]) * 16 + hex_digit(in[i + 2]));
          i += 2;
          break;
        }
        [[fallthrough]];
      default:
        out += '\\';
        out += c;
    }
  }
  return out;
}

// Each layer's stacked difference rows, [rows, dim] flat, for the layers but the last.
struct Diffs {
  std::int64_t dim = 0;
  std::vector<std::vector<float>> rows;
};

// The residual after blocks 0 .. n_layers-2 at every position of `ids`: [n_layers-1][T * dim].
std::vector<std::vector<float>> hidden_states(Session& e, const std::vector<std::int32_t>& ids) {
  const ModelArgs& a = e.model.args;
  const std::int64_t T = std::int64_t(ids.size());
  std::vector<std::vector<float>> h(std::size_t(a.n_layers - 1));
  Observer o;
  o.sites = site_bit(Site::resid_post);
  o.layers.assign(std::size_t(a.n_layers), 1);
  o.layers.back() = 0;
  o.on_tensor = [&](const Observation& ob) {
    h[std::size_t(ob.layer)].assign(ob.data, ob.data + T * a.dim);
  };
  std::vector<float> logits(std::size_t(a.vocab_size));
  reset(e);
  const Attached attached(e.model, o);
  forward_tokens(e, ids.data(), 1, T, 0, logits.data(), false);
  return h;
}

std::vector<float> normalised(std::vector<double> v) {
  double norm = 0;
  for (const double x : v) norm += x * x;
  norm = std::sqrt(norm);
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = float(v[i] / norm);
  return out;
}

std::vector<float> mean_direction(const std::vector<float>& d, std::int64_t dim) {
  const std::int64_t n = std::int64_t(d.size()) / dim;
  std::vector<double> m(std::size_t(dim), 0.0);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t i = 0; i < dim; ++i) m[std::size_t(i)] += d[std::size_t(r * dim + i)];
  for (double& x : m) x /= double(n);
  return normalised(std::move(m));
}

// pca.hpp's power iteration on D^T D from a random unit vector, until a step moves it less than
// 1e-7 or after `iterations` steps.
std::vector<float> pca_direction(const std::vector<float>& d, std::int64_t dim,
                                 std::int64_t iterations, std::mt19937_64& rng) {
  const std::int64_t n = std::int64_t(d.size()) / dim;
  std::vector<double> sq(std::size_t(dim * dim), 0.0);
  for (std::int64_t r = 0; r < n; ++r) {
    const float* row = d.data() + r * dim;
    for (std::int64_t i = 0; i < dim; ++i)
      for (std::int64_t j = 0; j < dim; ++j)
        sq[std::size_t(i * dim + j)] += double(row[i]) * row[j];
  }
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> v(static_cast<std::size_t>(dim)), b(static_cast<std::size_t>(dim));
  double norm = 0;
  for (double& x : v) {
    x = u(rng);
    norm += x * x;
  }
  for (double& x : v) x /= std::sqrt(norm);
  for (std::int64_t it = 0; it < iterations; ++it) {
    double bn = 0;
    for (std::int64_t i = 0; i < dim; ++i) {
      double s = 0;
      for (std::int64_t j = 0; j < dim; ++j) s += sq[std::size_t(i * dim + j)] * v[std::size_t(j)];
      b[std::size_t(i)] = s;
      bn += s * s;
    }
    bn = std::sqrt(bn);
    double dist = 0;
    for (std::int64_t i = 0; i < dim; ++i) {
      b[std::size_t(i)] /= bn;
      dist += (v[std::size_t(i)] - b[std::size_t(i)]) * (v[std::size_t(i)] - b[std::size_t(i)]);
    }
    v.swap(b);
    if (std::sqrt(dist) < 1e-7) break;
  }
  return normalised(std::move(v));
}

}  // namespace

std::vector<std::string> read_prompt_file(const std::filesystem::path& path) {
  std::istringstream in(read_small_file(path, "prompt file", kPromptFileLimit));
  std::vector<std::string> prompts;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) prompts.push_back(process_escapes(line));
  return prompts;
}

std::vector<std::vector<float>> make_control_vector(Session& e,
                                                    const std::vector<std::string>& positive,
                                                    const std::vector<std::string>& negative,
                                                    const CvectorOptions& o) {
  if (positive.size() != negative.size())
    throw InputError("cvector: " + std::to_string(positive.size()) + " positive and " +
                     std::to_string(negative.size()) +
                     " negative prompts: they must be as many (one pair per line)");
  if (positive.empty()) throw InputError("cvector: no prompt pair (the files hold no line)");
  if (!e.tokenizer) throw InputError("cvector needs a tokenizer with text", "tokenizer");
  const ModelArgs& a = e.model.args;
  if (a.n_layers < 2) throw InputError("cvector needs a model of 2 layers or more", "layers");
  EncodeOptions raw;
  raw.add_special_tokens = false;
  raw.parse_special = false;
  const std::vector<std::int32_t> space = encode(*e.tokenizer, " ", raw);
  if (space.empty()) throw InputError("cvector: the tokenizer gives no id for \" \" (the padding)");
  const std::int32_t pad = space.back();
  Diffs diffs{a.dim, std::vector<std::vector<float>>(std::size_t(a.n_layers - 1))};
  for (std::size_t p = 0; p < positive.size(); ++p) {
    std::vector<std::int32_t> pos = encode(*e.tokenizer, positive[p]),
                              neg = encode(*e.tokenizer, negative[p]);
    const std::size_t T = std::max(pos.size(), neg.size());
    pos.resize(T, pad);
    neg.resize(T, pad);
    const auto hp = hidden_states(e, pos), hn = hidden_states(e, neg);
    for (std::size_t l = 0; l < hp.size(); ++l)
      for (std::size_t t = 0; t < T; ++t) {
        const float* x = hp[l].data() + t * std::size_t(a.dim);
        const float* y = hn[l].data() + t * std::size_t(a.dim);
        std::vector<float> row(std::size_t(a.dim));
        bool kept = false;  // filter_nonzero_rows: a row with any element > 1e-6
        for (std::int64_t i = 0; i < a.dim; ++i) {
          row[std::size_t(i)] = x[i] - y[i];
          kept |= row[std::size_t(i)] > 1e-6f;
        }
        if (kept) diffs.rows[l].insert(diffs.rows[l].end(), row.begin(), row.end());
      }
  }
  std::mt19937_64 rng(o.seed);
  std::vector<std::vector<float>> out;
  for (std::size_t l = 0; l < diffs.rows.size(); ++l) {
    if (diffs.rows[l].empty())
      throw InputError(
          "cvector: the positive and negative prompts give the same residual after "
          "block " +
          std::to_string(l) + " at every position");
    out.push_back(o.method == CvectorMethod::mean
                      ? mean_direction(diffs.rows[l], a.dim)
                      : pca_direction(diffs.rows[l], a.dim, o.pca_iterations, rng));
  }
  return out;
}

void write_control_vector(OutputFile& out, const std::vector<std::vector<float>>& directions,
                          const std::string& model_hint) {
  const std::vector<GgufKeyValue> kv = {
      {"general.architecture", std::string("controlvector")},
      {"controlvector.model_hint", model_hint},
      {"controlvector.layer_count", std::int32_t(directions.size())}};
  std::vector<GgufF32Tensor> tensors;
  for (std::size_t l = 0; l < directions.size(); ++l)
    tensors.push_back({"direction." + std::to_string(l + 1),
                       {std::int64_t(directions[l].size())},
                       directions[l]});
  write_gguf(out, kv, tensors);
}

}  // namespace attn
