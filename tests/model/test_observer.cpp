// The forward pass's observer (attn/model/observer.hpp): every site against make_observer.py's
// float64 PyTorch reference, in prefill and decode; the probabilities against the notebooks'
// golden ones; an observed run's outputs the same bits as an unobserved one's; nothing reported
// when nothing is asked; the layer filter; the sites each block type has.
#include <doctest/doctest.h>

#include <barrier>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <thread>

#include "attn/engine/run.hpp"
#include "attn/error.hpp"
#include "attn/io/safetensors.hpp"
#include "attn/model/hook_names.hpp"
#include "attn/model/model.hpp"
#include "attn/model/observer.hpp"
#include "attn/model/parallel.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;

struct Recorded {
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

// Copies every tensor reported into `got`, named as make_observer.py names them:
// "{call}.{layer}.{site}", "{call}.final_norm". Holds lambdas on `this`: made in place.
constexpr std::uint32_t kGoldenSites = (std::uint32_t(1) << 12) - 1;  // resid_pre .. k_in
struct Recorder {
  std::string call = "prefill";
  std::map<std::string, Recorded> got;
  std::vector<std::vector<float>> probs;  // [n_layers]: the buffers handed over
  std::int64_t probs_asked = 0;
  attn::Observer observer;

  // Default: the sites of the golden files (issue 38's 11 and final_norm); issue 51's are
  // tested against their reference in tests/python/test_hook_points.py.
  explicit Recorder(std::int64_t n_layers, std::uint32_t sites = kGoldenSites) {
    probs.resize(std::size_t(n_layers));
    observer.sites = sites;
    observer.probs = [this](std::int64_t layer, std::int64_t bsz, std::int64_t heads,
                            std::int64_t seqlen, std::int64_t keys) {
      ++probs_asked;
      std::vector<float>& p = probs[std::size_t(layer)];
      p.assign(std::size_t(bsz * heads * seqlen * keys), std::nanf(""));
      return p.data();
    };
    observer.on_tensor = [this](const attn::Observation& o) {
      const std::string site(attn::site_name(o.site));
      const std::string name =
          call + "." + (o.site == attn::Site::final_norm ? "" : std::to_string(o.layer) + ".") +
          site;
      REQUIRE(o.ndim >= 3);
      REQUIRE(o.ndim <= 4);
      std::int64_t n = 1;
      for (int i = 0; i < o.ndim; ++i) n *= o.shape[i];
      CHECK_MESSAGE(got.count(name) == 0, name << " reported twice");
      got[name] = {std::vector<std::int64_t>(o.shape, o.shape + o.ndim),
                   std::vector<float>(o.data, o.data + n)};
    };
  }
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;
};

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

// A whole-model case of tests/golden/model (model/cases.json's entry for `name`).
struct TokenCase {
  attn::ModelArgs args;
  fs::path weights;
  std::int64_t batch = 0, prompt = 0, greedy_steps = 0;
  std::vector<std::int32_t> tokens, greedy;  // [B, T], [B, greedy_steps]
};

TokenCase token_case(const std::string& name) {
  for (const nlohmann::json& c : read_json(test::golden_dir() / "model" / "cases.json")) {
    if (c["name"] != name) continue;
    const fs::path dir = test::golden_dir() / "model" / name;
    TokenCase t;
    t.args = attn::load_config(dir / c["config"].get<std::string>());
    t.weights = dir / c["weights"].get<std::string>();
    t.batch = c["batch"];
    t.prompt = c["prompt_len"];
    t.greedy_steps = c["greedy_steps"];
    t.tokens = test::i32_tensor(dir / "expected.safetensors", "tokens");
    t.greedy = test::i32_tensor(dir / "expected.safetensors", "greedy");
    return t;
  }
  FAIL("no model case " << name);
  return {};
}

struct TokenRun {
  std::vector<float> logits;  // the prefill's last positions, then each step's
  std::vector<std::vector<float>> cache_k, cache_v;  // per layer, filled part
};

// The prefill of the prompt (last positions' logits: the path that packs rows), then `steps`
// decodes of the greedy ids, with `recorder` observing (null: none).
TokenRun run_tokens(const TokenCase& c, std::int64_t steps, Recorder* recorder, int threads,
                    std::int64_t ffn_rows = attn::kFfnRows) {
  const std::int64_t B = c.batch, T = c.prompt, V = c.args.vocab_size;
  attn::Transformer m =
      attn::make_transformer(c.args, attn::load_weights(c.args, c.weights, {}, {true, true}), B * T,
                             attn::make_runtime(threads, threads > 1 ? 0 : attn::kParallelFlops));
  m.act.ffn_rows = ffn_rows;
  if (recorder) attn::observe(m, &recorder->observer);
  TokenRun r;
  r.logits.resize(std::size_t((steps + 1) * B * V));
  attn::forward(m, c.tokens.data(), B, T, 0, r.logits.data());
  std::vector<std::int32_t> ids(static_cast<std::size_t>(B));
  for (std::int64_t i = 1; i <= steps; ++i) {
    if (recorder) recorder->call = "decode." + std::to_string(i);
    for (std::int64_t b = 0; b < B; ++b)
      ids[std::size_t(b)] = c.greedy[std::size_t(b * c.greedy_steps + i - 1)];
    attn::forward(m, ids.data(), B, 1, T + i - 1, r.logits.data() + i * B * V);
  }
  for (std::int64_t l = 0; l < c.args.n_layers; ++l) {
    r.cache_k.push_back(attn::filled_k(m.cache, l, B, T + steps));
    r.cache_v.push_back(attn::filled_v(m.cache, l, B, T + steps));
  }
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Prefill of P, then N decode steps, of x [B, P+N, dim] on a model drawn from seed 3: the
// outputs, [B, P, dim] then each step's [B, 1, dim].
std::vector<float> run_hidden(const attn::ModelArgs& a, const attn::RunOptions& o,
                              const std::vector<float>& x, Recorder* recorder,
                              std::int64_t ffn_rows = attn::kFfnRows) {
  const std::int64_t B = o.batch, P = o.prefill, T = o.prefill + o.steps, dim = a.dim;
  attn::Transformer m =
      attn::make_transformer(a, attn::seeded_weights(a, 3), B * P, attn::make_runtime(2, 0));
  m.act.ffn_rows = ffn_rows;
  if (recorder) attn::observe(m, &recorder->observer);
  std::vector<float> out(std::size_t(B * T * dim)), in(std::size_t(B * P * dim));
  for (std::int64_t b = 0; b < B; ++b)
    std::memcpy(&in[std::size_t(b * P * dim)], &x[std::size_t(b * T * dim)],
                std::size_t(P * dim) * sizeof(float));
  attn::forward(m, in.data(), B, P, 0, out.data());
  for (std::int64_t i = 1; i <= o.steps; ++i) {
    if (recorder) recorder->call = "decode." + std::to_string(i);
    for (std::int64_t b = 0; b < B; ++b)
      std::memcpy(&in[std::size_t(b * dim)], &x[std::size_t((b * T + P + i - 1) * dim)],
                  std::size_t(dim) * sizeof(float));
    attn::forward(m, in.data(), B, 1, P + i - 1, out.data() + (B * P + (i - 1) * B) * dim);
  }
  return out;
}

std::set<std::string> sites_of(const Recorder& r, const std::string& prefix) {
  std::set<std::string> s;
  for (const auto& [name, t] : r.got)
    if (name.rfind(prefix, 0) == 0) s.insert(name.substr(prefix.size()));
  return s;
}

// Two ranks as two threads of this process, with the one collective forward needs: both sum
// in the same order, so both get the same bits, as MPI_Allreduce gives every rank.
struct RankPair {
  std::barrier<> sync{2};
  float* data[2] = {};
};

class ThreadComm final : public attn::Comm {
 public:
  ThreadComm(RankPair& pair, int rank) : pair_(pair), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  void allreduce_sum(float* data, std::int64_t n) const override {
    pair_.data[rank_] = data;
    pair_.sync.arrive_and_wait();
    std::vector<float> sum(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) sum[std::size_t(i)] = pair_.data[0][i] + pair_.data[1][i];
    pair_.sync.arrive_and_wait();  // both have read both
    std::copy(sum.begin(), sum.end(), data);
  }
  int allreduce_max(int) const override { throw std::logic_error("not used by forward"); }
  int allreduce_min(int) const override { throw std::logic_error("not used by forward"); }
  void gather(const float*, std::int64_t, float*) const override {
    throw std::logic_error("not used by forward");
  }
  void gather(const double*, std::int64_t, double*) const override {
    throw std::logic_error("not used by forward");
  }
  void barrier() const override { pair_.sync.arrive_and_wait(); }
  [[noreturn]] void abort(int) const override { std::abort(); }

 private:
  RankPair& pair_;
  int rank_;
};

// x [B, P+N, dim] through a prefill of P and N decode steps on `shard` of the golden case's
// weights, every site recorded.
void run_rank(const attn::ModelArgs& a, const fs::path& weights, const std::vector<float>& x,
              const attn::RunOptions& o, const attn::Shard& shard, Recorder& rec) {
  const std::int64_t B = o.batch, P = o.prefill, T = o.prefill + o.steps, dim = a.dim;
  attn::Transformer m = attn::make_transformer(a, attn::load_weights(a, weights, shard), B * P,
                                               attn::make_runtime(1), shard);
  attn::observe(m, &rec.observer);
  std::vector<float> in(std::size_t(B * P * dim)), out(in.size());
  for (std::int64_t b = 0; b < B; ++b)
    std::copy_n(&x[std::size_t(b * T * dim)], P * dim, &in[std::size_t(b * P * dim)]);
  attn::forward(m, in.data(), B, P, 0, out.data());
  for (std::int64_t i = 1; i <= o.steps; ++i) {
    rec.call = "decode." + std::to_string(i);
    for (std::int64_t b = 0; b < B; ++b)
      std::copy_n(&x[std::size_t((b * T + P + i - 1) * dim)], dim, &in[std::size_t(b * dim)]);
    attn::forward(m, in.data(), B, 1, P + i - 1, out.data());
  }
}

// t [d0, d1, d2, d3]'s entries with axis `axis` in [from, from + count): the rank's heads.
std::vector<float> heads(const Recorded& t, int axis, std::int64_t from, std::int64_t count) {
  const std::int64_t outer = axis == 1 ? t.shape[0] : t.shape[0] * t.shape[1];
  const std::int64_t n = t.shape[std::size_t(axis)];
  const std::int64_t inner = axis == 1 ? t.shape[2] * t.shape[3] : t.shape[3];
  std::vector<float> out;
  for (std::int64_t i = 0; i < outer; ++i)
    out.insert(out.end(), t.data.begin() + (i * n + from) * inner,
               t.data.begin() + (i * n + from + count) * inner);
  return out;
}

}  // namespace

TEST_CASE("observer: model parallel, each rank reports its own heads and the summed outputs") {
  const fs::path dir = test::golden_dir() / "gqa_llama_interleaved_b2";
  attn::ModelArgs a = attn::load_config(dir / "config.json");
  attn::RunOptions o{2, 6, 3};
  const std::vector<float> x = attn::load_input(dir / "input.safetensors", a, o, true);
  Recorder whole(a.n_layers);
  run_rank(a, dir / "weights.safetensors", x, o, {}, whole);
  a.model_parallel_size = 2;
  RankPair pair;
  const ThreadComm comm0(pair, 0), comm1(pair, 1);
  Recorder rank0(a.n_layers), rank1(a.n_layers);
  std::thread second([&] {
    run_rank(a, dir / "weights.safetensors", x, o, {1, 2, &comm1}, rank1);
  });
  run_rank(a, dir / "weights.safetensors", x, o, {0, 2, &comm0}, rank0);
  second.join();
  REQUIRE(rank0.got.size() == whole.got.size());
  REQUIRE(rank1.got.size() == whole.got.size());
  const std::int64_t H = a.n_heads / 2, KV = a.n_kv_heads / 2;
  for (const auto& [name_, w] : whole.got) {
    const std::string name = name_;  // clang 14 lambdas (doctest INFO) cannot capture a binding
    CAPTURE(name);
    const std::string site = name.substr(name.rfind('.') + 1);
    const bool per_head = site == "q" || site == "q_in" || site == "k" || site == "k_in" ||
                          site == "v" || site == "attn_probs";
    for (int r = 0; r < 2; ++r) {
      CAPTURE(r);
      const Recorded& g = (r == 0 ? rank0 : rank1).got.at(name);
      std::vector<float> want = w.data;
      if (site == "q" || site == "q_in") want = heads(w, 2, r * H, H);
      if (site == "k" || site == "k_in" || site == "v") want = heads(w, 2, r * KV, KV);
      if (site == "attn_probs") want = heads(w, 1, r * H, H);
      std::vector<std::int64_t> shape = w.shape;
      if (per_head) shape[site == "attn_probs" ? 1 : 2] /= 2;
      CHECK(g.shape == shape);
      REQUIRE(g.data.size() == want.size());
      CHECK(test::compare(g.data.data(), want.data(), std::int64_t(want.size()), {}).failures == 0);
    }
    if (!per_head)  // the summed ones
      CHECK(same_bits(rank0.got.at(name).data, rank1.got.at(name).data));
  }
}

TEST_CASE("observer: every site of a prefill and 3 decode steps matches the PyTorch reference") {
  for (const nlohmann::json& c : read_json(test::golden_dir() / "observer" / "cases.json")) {
    const std::string name = c["name"];
    const TokenCase tc = token_case(name);
    const std::int64_t steps = c["steps"];
    const test::Tolerance tol{c["tolerance"]["rtol"], c["tolerance"]["atol"]};
    const attn::SafetensorsFile expected =
        attn::open_safetensors(test::golden_dir() / "observer" / (name + ".safetensors"));
    const TokenRun plain = run_tokens(tc, steps, nullptr, 1);
    {  // final_norm alone: no block site, every call's norm
      Recorder norm(tc.args.n_layers, attn::site_bit(attn::Site::final_norm));
      CHECK(same_bits(run_tokens(tc, steps, &norm, 1).logits, plain.logits));
      CHECK(norm.got.size() == std::size_t(1 + steps));
      CHECK(norm.got.count("prefill.final_norm") == 1);
    }
    // FFN passes of 3 rows (several and a remainder): mlp_out gathered over the passes.
    for (const auto& [threads_, ffn_rows_] :
         {std::pair{1, attn::kFfnRows}, std::pair{2, std::int64_t(3)}}) {
      const int threads = threads_;  // clang 14 lambdas (doctest INFO) cannot capture a binding
      const std::int64_t ffn_rows = ffn_rows_;
      CAPTURE(name);
      CAPTURE(threads);
      CAPTURE(ffn_rows);
      Recorder rec(tc.args.n_layers);
      const TokenRun observed = run_tokens(tc, steps, &rec, threads, ffn_rows);
      CHECK(rec.got.size() == expected.header.tensors.size());
      double worst = 0;
      for (const auto& [tensor, info] : expected.header.tensors) {
        const std::string t = tensor;  // clang 14 lambdas (doctest INFO) cannot capture a binding
        INFO(t);
        REQUIRE(rec.got.count(t) == 1);
        const Recorded& g = rec.got.at(t);
        CHECK(g.shape == info.shape);
        std::vector<float> storage;
        const test::Diff d = test::compare(g.data.data(), attn::tensor_as_f32(expected, t, storage),
                                           info.numel(), tol);
        CHECK_MESSAGE(d.failures == 0, "worst ratio " << d.worst_ratio);
        worst = std::max(worst, d.worst_ratio);
      }
      MESSAGE("observer " << name << " threads " << threads << ": every site within " << worst
                          << " of the tolerance");
      if (threads == 1) {  // observing changes nothing: logits and caches to the bit
        CHECK(same_bits(observed.logits, plain.logits));
        for (std::size_t l = 0; l < plain.cache_k.size(); ++l) {
          CHECK(same_bits(observed.cache_k[l], plain.cache_k[l]));
          CHECK(same_bits(observed.cache_v[l], plain.cache_v[l]));
        }
      }
    }
  }
}

TEST_CASE("observer: attn_probs through the observer equal the notebooks' golden probabilities") {
  const fs::path dir = test::golden_dir() / "notebooks" / "nb000_mha_v2_cache";
  const attn::ModelArgs a = attn::load_config(dir / "config.json");
  attn::RunOptions o{1, 10, 4};
  const std::vector<float> x = attn::load_input(dir / "input.safetensors", a, o, true);
  attn::Transformer m = attn::make_transformer(
      a, attn::load_weights(a, dir / "weights.safetensors"), o.prefill, attn::make_runtime(2, 0));
  Recorder rec(a.n_layers, attn::site_bit(attn::Site::attn_probs));
  attn::observe(m, &rec.observer);
  std::vector<float> out(std::size_t(o.prefill * a.dim));
  attn::forward(m, x.data(), 1, o.prefill, 0, out.data());
  for (std::int64_t i = 1; i <= o.steps; ++i) {
    rec.call = "decode." + std::to_string(i);
    attn::forward(m, x.data() + (o.prefill + i - 1) * a.dim, 1, 1, o.prefill + i - 1, out.data());
  }
  const attn::SafetensorsFile expected = attn::open_safetensors(dir / "expected.safetensors");
  CHECK(rec.got.size() == std::size_t(1 + o.steps));
  CHECK(rec.probs_asked == 1 + o.steps);
  for (std::int64_t i = 0; i <= o.steps; ++i) {
    const std::string call = i == 0 ? "prefill" : "decode." + std::to_string(i);
    const std::string golden = i == 0 ? "attn.0.prefill" : "attn.0.decode." + std::to_string(i);
    CAPTURE(golden);
    const Recorded& g = rec.got.at(call + ".0.attn_probs");
    CHECK(g.shape == expected.info(golden).shape);
    std::vector<float> storage;
    CHECK(test::compare(g.data.data(), attn::tensor_as_f32(expected, golden, storage),
                        std::int64_t(g.data.size()), {})
              .failures == 0);
  }
}

TEST_CASE("observer: nothing is reported when nothing is asked, and the layer filter holds") {
  const attn::ModelArgs a = test::small_llama_args(attn::Block::llama, 3);
  const attn::RunOptions o{2, 5, 2};
  const std::vector<float> x = attn::seeded_input(a, o, 7);
  const std::vector<float> plain = run_hidden(a, o, x, nullptr);
  {
    Recorder none(a.n_layers, 0);  // no site
    CHECK(same_bits(run_hidden(a, o, x, &none), plain));
    CHECK(none.got.empty());
    CHECK(none.probs_asked == 0);
  }
  {
    Recorder no_layer(a.n_layers);  // every site, no layer
    no_layer.observer.layers = {0, 0, 0};
    CHECK(same_bits(run_hidden(a, o, x, &no_layer), plain));
    CHECK(no_layer.got.empty());
    CHECK(no_layer.probs_asked == 0);
  }
  Recorder one(a.n_layers);
  one.observer.layers = {0, 1, 0};
  CHECK(same_bits(run_hidden(a, o, x, &one), plain));
  const std::set<std::string> want = {"resid_pre", "q_in",    "k_in",       "q",
                                      "k",         "v",       "attn_probs", "attn_out",
                                      "resid_mid", "mlp_out", "resid_post"};
  for (const std::string call : {"prefill", "decode.1", "decode.2"}) {
    CAPTURE(call);
    CHECK(sites_of(one, call + ".1.") == want);
    CHECK(sites_of(one, call + ".0.").empty());
    CHECK(sites_of(one, call + ".2.").empty());
  }
  CHECK(one.got.size() == 3 * want.size());
  CHECK(one.probs_asked == 3);
  // One site: only it.
  Recorder q(a.n_layers, attn::site_bit(attn::Site::q));
  run_hidden(a, o, x, &q);
  CHECK(q.got.size() == std::size_t(3 * a.n_layers));
  CHECK(q.probs_asked == 0);
}

TEST_CASE("observer: each block type reports its sites, consistent with its outputs") {
  struct Kind {
    const char* name;
    attn::Block block;
    bool norm_first;
  };
  const attn::RunOptions o{2, 5, 2};
  for (const Kind& k :
       {Kind{"attention", attn::Block::attention, false}, Kind{"llama", attn::Block::llama, false},
        Kind{"encoder", attn::Block::encoder, false},
        Kind{"encoder norm_first", attn::Block::encoder, true}}) {
    CAPTURE(k.name);
    attn::ModelArgs a = test::small_llama_args(k.block);
    a.norm_first = k.norm_first;
    const std::vector<float> x = attn::seeded_input(a, o, 5);
    const std::vector<float> plain = run_hidden(a, o, x, nullptr);
    Recorder rec(a.n_layers);
    CHECK(same_bits(run_hidden(a, o, x, &rec, 10), run_hidden(a, o, x, nullptr, 10)));
    CHECK(same_bits(run_hidden(a, o, x, nullptr), plain));
    std::set<std::string> want = {"resid_pre", "q_in",       "k_in",     "q",         "k",
                                  "v",         "attn_probs", "attn_out", "resid_post"};
    if (k.block != attn::Block::attention) want.insert({"resid_mid", "mlp_out"});
    const std::int64_t dim = a.dim;
    for (const std::string call : {"prefill", "decode.1", "decode.2"}) {
      CAPTURE(call);
      const std::int64_t seqlen = call == "prefill" ? o.prefill : 1;
      for (std::int64_t l = 0; l < a.n_layers; ++l) {
        const std::string p = call + "." + std::to_string(l) + ".";
        CHECK(sites_of(rec, p) == want);
        const auto& pre = rec.got.at(p + "resid_pre").data;
        const auto& post = rec.got.at(p + "resid_post").data;
        const auto& attn_out = rec.got.at(p + "attn_out").data;
        CHECK(rec.got.at(p + "q").shape ==
              std::vector<std::int64_t>{2, seqlen, a.n_heads, a.head_dim()});
        CHECK(rec.got.at(p + "attn_probs").shape ==
              std::vector<std::int64_t>{
                  2, a.n_heads, seqlen,
                  (call == "prefill" ? 0 : o.prefill + std::stoll(call.substr(7)) - 1) + seqlen});
        if (l + 1 < a.n_layers)  // the stream: one block's output is the next one's input
          CHECK(
              same_bits(post, rec.got.at(call + "." + std::to_string(l + 1) + ".resid_pre").data));
        // The residual adds, to rounding (attn_out and mlp_out are summed apart).
        std::vector<float> sum(pre.size());
        auto add = [&](const std::vector<float>& u, const std::vector<float>& v) {
          for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = u[i] + v[i];
          return sum;
        };
        if (k.block == attn::Block::attention) {
          CHECK(test::compare(add(pre, attn_out).data(), post.data(), 2 * seqlen * dim, {})
                    .failures == 0);
        } else if (k.block == attn::Block::llama || k.norm_first) {
          const auto& mid = rec.got.at(p + "resid_mid").data;
          CHECK(
              test::compare(add(pre, attn_out).data(), mid.data(), 2 * seqlen * dim, {}).failures ==
              0);
          CHECK(test::compare(add(mid, rec.got.at(p + "mlp_out").data).data(), post.data(),
                              2 * seqlen * dim, {})
                    .failures == 0);
        }
      }
    }
  }
}

TEST_CASE("observer: mlp_out needs observe(), and site names parse") {
  const attn::ModelArgs a = test::small_llama_args(attn::Block::llama);
  attn::Transformer m = attn::make_transformer(a, attn::seeded_weights(a, 3), 4);
  Recorder rec(a.n_layers, attn::site_bit(attn::Site::mlp_out));
  m.observer = &rec.observer;  // not through observe(): no buffer for mlp_out
  const attn::RunOptions o{1, 4, 0};
  const std::vector<float> x = attn::seeded_input(a, o, 1);
  std::vector<float> out(x.size());
  CHECK_THROWS_AS(attn::forward(m, x.data(), 1, 4, 0, out.data()), attn::InputError);
  attn::observe(m, &rec.observer);
  CHECK_NOTHROW(attn::forward(m, x.data(), 1, 4, 0, out.data()));
  CHECK(rec.got.size() == std::size_t(a.n_layers));
  attn::observe(m, nullptr);
  CHECK(m.observer == nullptr);
  CHECK(m.act.observed.empty());

  for (std::size_t i = 0; i < attn::kSiteCount; ++i)
    CHECK(attn::parse_site(attn::kSiteNames[i]) == attn::Site(i));
  try {
    attn::parse_site("resid");
    FAIL("no error");
  } catch (const attn::InputError& e) {
    const std::string what = e.what();
    CHECK(what.find("'resid'") != std::string::npos);
    for (std::string_view s : attn::kSiteNames) CHECK(what.find(s) != std::string::npos);
  }
}

TEST_CASE("observer: a run keeps its attention weights through an observer, the model's too") {
  const attn::ModelArgs a = test::small_llama_args(attn::Block::llama);
  const attn::RunOptions o{2, 4, 2};
  const std::vector<float> x = attn::seeded_input(a, o, 2);
  attn::Transformer m = attn::make_transformer(a, attn::seeded_weights(a, 3), 8);
  std::int64_t reported = 0;
  attn::Observer mine;
  mine.sites = attn::site_bit(attn::Site::resid_post);
  mine.on_tensor = [&](const attn::Observation&) { ++reported; };
  attn::observe(m, &mine);
  attn::Inspect inspect;
  inspect.attention_weights = true;
  std::int64_t events = 0;
  const attn::RunOutputs out = attn::run(
      m, x, o,
      [&](const attn::Event& e) {
        ++events;
        CHECK(e.attn.size() == std::size_t(a.n_layers));
      },
      inspect);
  CHECK(events == 3);
  // The run's own observer took its place and passes it what it asks for.
  CHECK(reported == a.n_layers * (1 + o.steps));
  CHECK(m.observer == &mine);
  for (float p : out.attn_prefill[0]) CHECK(std::isfinite(p));
  // Without attention weights, the model's observer sees the run's forward calls.
  attn::Transformer m2 = attn::make_transformer(a, attn::seeded_weights(a, 3), 8);
  attn::observe(m2, &mine);
  attn::run(m2, x, o, [](const attn::Event&) {});
  CHECK(reported == 2 * a.n_layers * (1 + o.steps));
}

TEST_CASE("observer: sites under TransformerLens's hook names, and back") {
  // TransformerLens's names for a Llama's hook points (HookedTransformer, GQA models).
  const std::vector<std::pair<std::string, attn::HookPoint>> tl = {
      {"blocks.0.hook_resid_pre", {attn::Site::resid_pre, 0}},
      {"blocks.1.attn.hook_q", {attn::Site::q_in, 1}},
      {"blocks.1.attn.hook_k", {attn::Site::k_in, 1}},
      {"blocks.1.attn.hook_rot_q", {attn::Site::q, 1}},
      {"blocks.1.attn.hook_rot_k", {attn::Site::k, 1}},
      {"blocks.0.attn.hook_v", {attn::Site::v, 0}},
      {"blocks.0.attn.hook_pattern", {attn::Site::attn_probs, 0}},
      {"blocks.0.hook_attn_out", {attn::Site::attn_out, 0}},
      {"blocks.0.hook_resid_mid", {attn::Site::resid_mid, 0}},
      {"blocks.0.hook_mlp_out", {attn::Site::mlp_out, 0}},
      {"blocks.1.hook_resid_post", {attn::Site::resid_post, 1}},
      {"ln_final.hook_normalized", {attn::Site::final_norm, -1}},
      {"hook_embed", {attn::Site::embed, -1}},
      {"blocks.1.attn.hook_attn_scores", {attn::Site::attn_scores, 1}},
      {"blocks.0.attn.hook_z", {attn::Site::z, 0}},
      {"blocks.1.attn.hook_result", {attn::Site::result, 1}},
      {"blocks.0.mlp.hook_pre", {attn::Site::mlp_pre, 0}},
      {"blocks.1.mlp.hook_post", {attn::Site::mlp_post, 1}},
      {"blocks.0.ln1.hook_scale", {attn::Site::ln1_scale, 0}},
      {"blocks.1.ln2.hook_scale", {attn::Site::ln2_scale, 1}},
      {"ln_final.hook_scale", {attn::Site::final_scale, -1}},
  };
  CHECK(tl.size() == attn::kSiteCount);
  for (const auto& [name_, point_] : tl) {
    const std::string name = name_;
    const attn::HookPoint point = point_;
    CAPTURE(name);
    CHECK(attn::parse_hook_name(name, 2) == point);
    CHECK(attn::hook_name(point.site, point.layer) == name);
  }
  for (const char* bad :
       {"blocks.2.hook_resid_pre", "blocks.-1.hook_resid_pre", "blocks.01.hook_resid_pre",
        "blocks..hook_resid_pre", "blocks.0", "blocks.0.hook_z", "hook_resid_pre", "",
        "blocks.0.ln_final.hook_normalized", "blocks.99999999999999999999.hook_v"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(attn::parse_hook_name(bad, 2), attn::InputError);
  }
  try {
    attn::parse_hook_name("blocks.0.hook_\x1b[31m", 2);
    FAIL("accepted");
  } catch (const attn::InputError& e) {
    CHECK(std::string(e.what()).find('\x1b') == std::string::npos);
    CHECK(std::string(e.what()).find("attn.hook_pattern") != std::string::npos);
  }
}
