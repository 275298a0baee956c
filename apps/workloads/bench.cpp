#include "workloads/bench.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>

#include "attn/kernels/matmul.hpp"
#include "attn/kernels/probe.hpp"
#include "attn/weight_type.hpp"

namespace cli {

using attn::Compute;
using attn::fma_peak_gflops;
using attn::LayerWeights;
using attn::Matrix;
using attn::ModelArgs;
using attn::read_patterns;
using attn::sgemm_seconds;
using attn::SlotWork;
using attn::StreamMatrix;
using attn::TensorSpec;
using attn::Transformer;
using attn::weight_bytes;

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The weight matrices a step reads, from the layers' tensor list.
std::vector<StreamMatrix> weight_matrices(const Transformer& m) {
  std::vector<StreamMatrix> out;
  for (std::size_t l = 0; l < m.weights.layers.size(); ++l) {
    LayerWeights views = m.weights.layers[l];  // the specs' slots point into this copy
    for (const TensorSpec& s : layer_tensor_specs(m.local, views, std::int64_t(l)))
      if (s.slot.matrix) {
        const Matrix& w = *s.slot.matrix;
        // A row's bytes, in floats: the stream reads bytes, whatever the blocks hold.
        out.push_back({static_cast<const float*>(w.data), s.shape[0],
                       std::int64_t(weight_bytes(w.type, s.shape[1], s.name) / 4)});
      }
  }
  return out;
}

// The value a fraction q of the samples lie at or below (0.9: the 90th percentile).
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::size_t(q * double(v.size() - 1) + 0.5)];
}

}  // namespace

double prefill_flops(const ModelArgs& a, std::int64_t bsz, std::int64_t P, bool matmul_only) {
  double params = 0;  // one layer's matrix weights: each costs 2 flops per row of x
  LayerWeights layer;
  for (const TensorSpec& s : layer_tensor_specs(a, layer))
    if (s.shape.size() == 2) params += double(s.shape[0]) * double(s.shape[1]);
  const double matmul = 2 * double(bsz * P) * params * double(a.n_layers);
  // Query row i sees i + 1 keys: q.k and p.v each cost 2 * head_dim flops per key and head.
  const double q = double(a.n_heads) * double(a.head_dim());
  const double keys = double(P) * double(P + 1) / 2;
  const double attention = 4 * double(bsz) * keys * q * double(a.n_layers);
  return matmul_only ? matmul : matmul + attention;
}

long peak_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

namespace {

constexpr int kPrefillPasses = 3;

// Pages in every weight and OpenBLAS's buffers; the cache is overwritten by the prefill.
void warm_up(Transformer& m, const std::vector<float>& x, std::int64_t P, std::int64_t T,
             std::vector<float>& out) {
  forward(m, x.data(), 1, std::min<std::int64_t>(P, 32), 0, out.data());
  for (std::int64_t i = 0; i < 3; ++i) forward(m, x.data(), 1, 1, std::min(i, T - 1), out.data());
}

// One decode round of one model: a step at batch 1, a streaming read of its weights' bytes in
// pattern `pattern`, then a step at each batch size, at the same position.
// Runs f, adding what each of m's threads did in it to `work`.
template <typename F>
void count_work(const Transformer& m, std::vector<SlotWork>& work, F f) {
  if (!m.rt.pool) return f();
  const std::vector<SlotWork> before = m.rt.pool->work();
  f();
  const std::vector<SlotWork> after = m.rt.pool->work();
  work.resize(after.size());
  for (std::size_t s = 0; s < after.size(); ++s) {
    work[s].items += after[s].items - before[s].items;
    work[s].flops += after[s].flops - before[s].flops;
  }
}

// x_row: the row of x the step reads (P + i); pos: its position (depth + i).
void decode_round(Transformer& m, const std::vector<float>& x, const std::vector<float>& xb,
                  const std::vector<StreamMatrix>& mats, std::int64_t x_row, std::int64_t pos,
                  std::size_t pattern, BenchResult& r, std::vector<double>* stream,
                  std::vector<float>& out) {
  const std::int64_t dim = m.args.dim;
  auto t0 = Clock::now();
  const double reduced = m.allreduce_seconds;
  count_work(m, r.decode_work, [&] { forward(m, x.data() + x_row * dim, 1, 1, pos, out.data()); });
  r.step_ms.push_back(since(t0) * 1e3);
  r.decode_allreduce_seconds += m.allreduce_seconds - reduced;
  stream[pattern].push_back(stream_read_gbs(m.rt, mats, read_patterns()[pattern]));
  for (BatchedDecode& d : r.batched) {
    if (d.batch == 1) continue;  // the step above
    t0 = Clock::now();
    forward(m, xb.data(), d.batch, 1, pos, out.data());
    d.step_ms.push_back(since(t0) * 1e3);
  }
}

// Medians and the rest, once the rounds are done.
void finish(const Transformer& m, std::int64_t P, std::vector<double>* stream, BenchResult& r) {
  // The limit is the best read the machine gave: the pattern with the highest 90th percentile.
  // Against its median, a median step in a noisy run can come out above the limit: the step and
  // the read take turns, and each is slowed in its own moments.
  for (std::size_t p = 0; p < read_patterns().size(); ++p)
    if (quantile(stream[p], 0.9) > r.limits.stream_gbs) {
      r.limits.stream_gbs = quantile(stream[p], 0.9);
      r.limits.stream_pattern = read_patterns()[p].name;
      r.limits.stream_spread = 1 - quantile(stream[p], 0.1) / r.limits.stream_gbs;
    }
  std::sort(r.step_ms.begin(), r.step_ms.end());
  for (BatchedDecode& d : r.batched) {
    std::sort(d.step_ms.begin(), d.step_ms.end());
    if (d.batch == 1) d.step_ms = r.step_ms;
  }
  r.prefill_gflop = prefill_flops(m.local, 1, P, false) / 1e9;
  r.prefill_matmul_gflop = prefill_flops(m.local, 1, P, true) / 1e9;
  r.weight_bytes = double(m.weights.bytes);
  r.kv_cache_bytes = double(m.cache.cache_k.size() + m.cache.cache_v.size()) * sizeof(float);
  r.peak_rss_kb = peak_rss_kb();
}

}  // namespace

void fill_depth(Transformer& m, const std::vector<float>& x, std::int64_t P, std::int64_t depth,
                const std::function<void(std::int64_t, std::int64_t)>& done) {
  const std::int64_t chunks = (depth + P - 1) / P;
  std::vector<float> out(std::size_t(P * m.args.dim));  // [1, P, dim], not read
  for (std::int64_t c = 0; c < chunks; ++c) {
    forward(m, x.data(), 1, std::min(P, depth - c * P), c * P, out.data());
    if (done) done(c + 1, chunks);
  }
  attn::KVCache& cache = m.cache;
  const std::int64_t n = depth * cache.head_dim;  // one head's filled rows
  for (std::int64_t l = 0; l < cache.n_layers; ++l)
    for (std::int64_t b = 1; b < cache.max_batch_size; ++b)
      for (std::int64_t h = 0; h < cache.n_kv_heads; ++h) {
        std::copy_n(cache.k(l, 0, h), n, cache.k(l, b, h));
        std::copy_n(cache.v(l, 0, h), n, cache.v(l, b, h));
      }
}

std::vector<BenchResult> bench_workload(std::span<Transformer* const> models,
                                        const std::vector<float>& x, BenchShape shape,
                                        const std::vector<std::int64_t>& batches,
                                        const BenchProgress& progress) {
  const std::int64_t P = shape.prefill, N = shape.steps, depth = std::max(shape.depth, P);
  const auto report = [&](const char* phase, std::int64_t done, std::int64_t total) {
    if (progress) progress(phase, done, total);
  };
  const std::int64_t dim = models.front()->args.dim, T = P + N;
  std::int64_t max_batch = 1;
  for (std::int64_t B : batches) max_batch = std::max(max_batch, B);
  std::vector<float> out(std::size_t(std::max(P, max_batch) * dim));
  // The batched steps' inputs [max_batch, 1, dim]: rows of x, taken cyclically.
  std::vector<float> xb(std::size_t(max_batch * dim));
  for (std::int64_t b = 0; b < max_batch; ++b)
    std::copy_n(x.data() + (P + b) % T * dim, dim, xb.data() + b * dim);

  std::vector<BenchResult> results(models.size());
  std::vector<std::vector<StreamMatrix>> mats;
  for (std::size_t k = 0; k < models.size(); ++k) {
    Transformer& m = *models[k];
    BenchResult& r = results[k];
    r.weight_type =
        m.weights.layers.empty() ? "F32" : weight_type_name(m.weights.layers[0].wq.type);
    r.prefill = P;
    r.steps = N;
    r.depth = depth;
    r.step_ms.reserve(std::size_t(N));
    for (std::int64_t B : batches) r.batched.push_back({B, {}});
    for (BatchedDecode& d : r.batched) d.step_ms.reserve(std::size_t(N));
    report("warm-up", std::int64_t(k), std::int64_t(models.size()));
    warm_up(m, x, P, T, out);
    mats.push_back(weight_matrices(m));
  }
  // The best of kPrefillPasses prefills per model, the models taking turns: one pass of a second
  // or so on a shared machine varies from run to run. Each pass writes the same cache rows.
  for (int pass = 0; pass < kPrefillPasses; ++pass)
    for (std::size_t k = 0; k < models.size(); ++k) {
      Transformer& m = *models[k];
      BenchResult& r = results[k];
      report("prefill", pass * std::int64_t(models.size()) + std::int64_t(k),
             kPrefillPasses * std::int64_t(models.size()));
      const auto t0 = Clock::now();
      const double reduced = m.allreduce_seconds;
      count_work(m, r.prefill_work, [&] { forward(m, x.data(), 1, P, 0, out.data()); });
      const double seconds = since(t0);
      if (pass == 0 || seconds < r.prefill_seconds) {
        r.prefill_seconds = seconds;
        r.prefill_allreduce_seconds = m.allreduce_seconds - reduced;
      }
    }
  // Decode at depth: the cache's first `depth` rows filled, untimed, as llama-bench -d does.
  if (depth > P)
    for (std::size_t k = 0; k < models.size(); ++k)
      fill_depth(*models[k], x, P, depth, [&](std::int64_t done, std::int64_t chunks) {
        report("depth", std::int64_t(k) * chunks + done, std::int64_t(models.size()) * chunks);
      });
  // Each round runs every model's round in turn, so all are compared in the same moments: the
  // machine's bandwidth drifts by tens of percent over minutes. The batched steps run at the
  // same position as batch 1's; the other sequences' cache rows before it are zeros (with
  // depth > P: copies of the first's), which attention reads all the same.
  std::vector<std::vector<double>> stream(models.size() * read_patterns().size());
  for (std::int64_t i = 0; i < N; ++i, report("decode", i, N))
    for (std::size_t k = 0; k < models.size(); ++k)
      decode_round(*models[k], x, xb, mats[k], P + i, depth + i,
                   std::size_t(i) % read_patterns().size(), results[k],
                   &stream[k * read_patterns().size()], out);
  for (std::size_t k = 0; k < models.size(); ++k)
    finish(*models[k], P, &stream[k * read_patterns().size()], results[k]);
  return results;
}

void measure_limits(const Transformer& m, std::int64_t P, MachineLimits& l) {
  // sgemm on F32 stand-ins of the layers' matrix shapes, whatever the weights' type (it reads
  // F32 only), after the workload so that its peak resident memory is not theirs. One buffer
  // serves every shape: sgemm's speed does not depend on the values.
  std::vector<StreamMatrix> mats;
  LayerWeights views;
  for (std::int64_t layer = 0; layer < m.local.n_layers; ++layer)
    for (const TensorSpec& s : layer_tensor_specs(m.local, views))
      if (s.slot.matrix) mats.push_back({nullptr, s.shape[0], s.shape[1]});
  std::int64_t most = 0;
  for (const StreamMatrix& mat : mats) most = std::max(most, mat.n * mat.k);
  const std::vector<float> f32(std::size_t(most), 0.01f);
  for (StreamMatrix& mat : mats) mat.w = f32.data();
  l.sgemm_seconds = sgemm_seconds(mats, P, m.rt.threads);
  l.sgemm_gflops = prefill_flops(m.local, 1, P, true) / l.sgemm_seconds / 1e9;
  probe_fma_peak(m.rt.threads, l);
}

double MachineLimits::fma_spread() const {
  if (fma_samples.empty()) return 0;
  const auto [lo, hi] = std::minmax_element(fma_samples.begin(), fma_samples.end());
  return 1 - *lo / *hi;
}

void probe_fma_peak(int threads, MachineLimits& l) {
  std::string isa;
  const double g = fma_peak_gflops(threads, isa);
  l.fma_samples.push_back(g);
  if (g > l.fma_gflops) l.fma_gflops = g, l.fma_isa = isa;
}

BenchPlan quick_plan(BenchPlan full) {
  full.shape = {64, 16, 64};
  std::erase_if(full.batches, [](std::int64_t B) { return B > 4; });
  full.weight_types.resize(std::min<std::size_t>(full.weight_types.size(), 1));
  return full;
}

namespace {

// One layer's matrix weights in type t: bytes, weights, and the largest matrix's weights.
struct LayerSize {
  double bytes = 0, params = 0, largest = 0;
};
LayerSize layer_size(const ModelArgs& a, attn::WeightType t) {
  LayerSize z;
  LayerWeights layer;
  for (const TensorSpec& s : layer_tensor_specs(a, layer))
    if (s.shape.size() == 2) {
      const double n = double(s.shape[0]) * double(s.shape[1]);
      z.params += n;
      z.largest = std::max(z.largest, n);
      z.bytes += double(s.shape[0]) * double(weight_bytes(t, s.shape[1], s.name));
    }
  return z;
}

}  // namespace

// A model of the run, not a measurement: each type drawn at kDrawNs per weight, kPrefillPasses
// prefills (and the depth's) at `gflops`, and per decode round a step, a streaming read and one
// step per batch size (B = 16 costing 4 steps) reading the weights at `gbs`; then sgemm on the
// prefill's shapes and two FMA probes of about a second each. Bytes: every type's weights and
// cache, and sgemm's F32 stand-in of the largest matrix.
BenchCost expected_cost(const BenchPlan& plan, const ModelArgs& a, double gflops, double gbs) {
  constexpr double kDrawNs = 4, kProbeSeconds = 2;
  const BenchShape& sh = plan.shape;
  double reads = 2;  // the step at B = 1 and the streaming read
  for (std::int64_t B : plan.batches)
    if (B > 1) reads += std::max(1.0, double(B) / 4);
  const double prefill = prefill_flops(a, 1, sh.prefill, false) * kPrefillPasses +
                         (sh.depth > sh.prefill ? prefill_flops(a, 1, sh.depth, false) : 0);
  const double rows = double(sh.depth + sh.steps), layers = double(a.n_layers);
  const double cache =
      2 * layers * double(plan.batches.back()) * rows * double(a.n_kv_heads * a.head_dim()) * 4;
  BenchCost c;
  double largest = 0;
  for (const std::string& name : plan.weight_types) {
    const LayerSize z = layer_size(a, *attn::find_weight_type(name));
    c.seconds += z.params * layers * kDrawNs * 1e-9 + prefill / (gflops * 1e9) +
                 double(sh.steps) * reads * z.bytes * layers / (gbs * 1e9);
    c.bytes += std::uint64_t(z.bytes * layers + cache);
    largest = std::max(largest, z.largest);
  }
  c.bytes += std::uint64_t(largest * 4);
  c.seconds += 2 * prefill_flops(a, 1, sh.prefill, true) / (gflops * 1e9) + kProbeSeconds;
  return c;
}

ComputeError compute_error(Transformer& m, const std::vector<float>& x, std::int64_t P) {
  const std::int64_t n = P * m.args.dim;
  std::vector<float> got(static_cast<std::size_t>(n)), exact(got.size());  // [1, P, dim]
  forward(m, x.data(), 1, P, 0, got.data());
  const Compute compute = m.rt.compute;
  m.rt.compute = Compute::f32;  // the scratch was sized for bf16, which needs more
  forward(m, x.data(), 1, P, 0, exact.data());
  m.rt.compute = compute;
  double peak = 0, sq_err = 0, sq = 0;
  ComputeError e;
  for (std::int64_t i = 0; i < n; ++i) {
    const double d = std::fabs(double(got[std::size_t(i)]) - exact[std::size_t(i)]);
    e.max_abs = std::max(e.max_abs, d);
    peak = std::max(peak, std::fabs(double(exact[std::size_t(i)])));
    sq_err += d * d;
    sq += double(exact[std::size_t(i)]) * exact[std::size_t(i)];
  }
  e.max_rel = peak > 0 ? e.max_abs / peak : 0;
  e.rms_rel = sq > 0 ? std::sqrt(sq_err / sq) : 0;
  return e;
}

}  // namespace cli
