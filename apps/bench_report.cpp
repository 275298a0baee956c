// bench's report: the figures of each weight type against the machine's limits, as tables and
// as JSON; under mpirun, what the ranks cost each other.
#include "bench_report.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>

#include "attn/kernels/matmul.hpp"
#include "attn/kernels/probe.hpp"
#include "attn/model/parallel.hpp"
#include "attn/version.hpp"

namespace cli {

namespace {

// "2026-11-25T09:40:13Z": when a benchmark ran, for its JSON.
std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// Decode at several batch sizes, as llama.cpp's batched-bench: B sequences, one row each per
// step; the ratio is to batch 1's median step in the same rounds.
void print_batched(std::FILE* out, const BenchResult& r, const attn::Runtime& rt) {
  const double b1 = r.step_ms[r.step_ms.size() / 2];
  std::fprintf(out,
               "batched decode, %s weights, %lld steps each from depth %lld, same rounds (isa %s; "
               "stream read pattern: %s):\n"
               "      B   ms/step    p10    p90   steps/s  tokens/s  step vs B=1\n",
               r.weight_type.c_str(), (long long)r.steps, (long long)r.depth, rt.kernels->name,
               r.limits.stream_pattern.c_str());
  for (const BatchedDecode& d : r.batched) {
    const std::size_t n = d.step_ms.size();
    const double med = d.step_ms[n / 2];
    std::fprintf(out, "  %5lld  %8.2f %6.2f %6.2f  %8.2f  %8.1f  %10.2fx\n", (long long)d.batch,
                 med, d.step_ms[n / 10], d.step_ms[n * 9 / 10], 1e3 / med,
                 1e3 * double(d.batch) / med, med / b1);
  }
}

nlohmann::json batched_json(const BenchResult& r) {
  const double b1 = r.step_ms[r.step_ms.size() / 2];
  nlohmann::json rows = nlohmann::json::array();
  for (const BatchedDecode& d : r.batched) {
    const std::size_t n = d.step_ms.size();
    const double med = d.step_ms[n / 2];
    rows.push_back({{"batch", d.batch},
                    {"ms_median", med},
                    {"ms_p10", d.step_ms[n / 10]},
                    {"ms_p90", d.step_ms[n * 9 / 10]},
                    {"steps_per_s", 1e3 / med},
                    {"tokens_per_s", 1e3 * double(d.batch) / med},
                    {"step_vs_batch1", med / b1}});
  }
  return rows;
}

// The prefill's limit: the FMA peak, twice it under --compute bf16, four times under q8
// (BenchResult::peak_factor).
double prefill_peak(const BenchResult& r) {
  return r.limits.fma_gflops * r.peak_factor;
}

// A fraction of a limit as a percentage, marked "!" past 100%: a measurement error (below).
char over(double fraction) {
  return fraction > 1 ? '!' : ' ';
}

double median_ms(const std::vector<double>& sorted) {
  return sorted[sorted.size() / 2];
}

// One weight type's figures, against the limits and against the first type run (same rounds).
// Each thread's items and GFLOP: the pool's balance (threads that ran less had no core, or came
// late).
nlohmann::json work_json(const std::vector<attn::SlotWork>& work) {
  nlohmann::json items = nlohmann::json::array(), gflop = nlohmann::json::array();
  for (const attn::SlotWork& w : work) {
    items.push_back(w.items);
    gflop.push_back(double(w.flops) / 1e9);
  }
  return {{"items", items}, {"gflop", gflop}};
}

nlohmann::json weight_type_json(const BenchResult& r, const BenchResult& first) {
  const double pf_s = r.prefill_seconds, med = median_ms(r.step_ms);
  const double gbs = r.weight_bytes / (med * 1e-3) / 1e9;
  return {{"weight_type", r.weight_type},
          {"prefill_ms", pf_s * 1e3},
          {"prefill_positions_per_s", double(r.prefill) / pf_s},
          {"prefill_gflops", r.prefill_gflop / pf_s},
          {"prefill_fraction_of_fma_peak", r.prefill_gflop / pf_s / prefill_peak(r)},
          {"decode_depth", r.depth},
          {"decode_ms_median", med},
          {"decode_ms_p10", r.step_ms[r.step_ms.size() / 10]},
          {"decode_ms_p90", r.step_ms[r.step_ms.size() * 9 / 10]},
          {"decode_steps_per_s", 1e3 / med},
          {"decode_gbs", gbs},
          {"decode_fraction_of_stream", gbs / r.limits.stream_gbs},
          {"stream_gbs", r.limits.stream_gbs},
          {"stream_pattern", r.limits.stream_pattern},
          {"stream_spread", r.limits.stream_spread},
          {"weight_bytes", r.weight_bytes},
          {"decode_vs_first", median_ms(first.step_ms) / med},
          {"prefill_vs_first", first.prefill_seconds / pf_s},
          {"batched_decode", batched_json(r)},
          {"work_per_thread",
           {{"prefill", work_json(r.prefill_work)}, {"decode", work_json(r.decode_work)}}},
          {"compute_error", r.compute_error ? nlohmann::json{{"max_abs", r.compute_error->max_abs},
                                                             {"max_rel", r.compute_error->max_rel},
                                                             {"rms_rel", r.compute_error->rms_rel}}
                                            : nlohmann::json()}};
}

// The weight types side by side, each against its own streaming read and the first type.
void print_weight_types(std::FILE* out, const nlohmann::json& types) {
  std::fprintf(out,
               "weight types, same rounds (vs: the first row's rate):\n"
               "  type   prefill pos/s  GFLOP/s  of FMA peak   decode steps/s   GB/s  of its "
               "stream  weights MB  decode vs  prefill vs   (!: a measurement error)\n");
  for (const nlohmann::json& t : types) {
    const double peak = t["prefill_fraction_of_fma_peak"], stream = t["decode_fraction_of_stream"];
    std::fprintf(
        out, "  %-5s  %13.1f  %7.1f  %10.0f%%%c %15.2f  %5.2f  %12.0f%%%c %10.1f  %8.2fx  %9.2fx\n",
        t["weight_type"].get<std::string>().c_str(), t["prefill_positions_per_s"].get<double>(),
        t["prefill_gflops"].get<double>(), 100 * peak, over(peak),
        t["decode_steps_per_s"].get<double>(), t["decode_gbs"].get<double>(), 100 * stream,
        over(stream), t["weight_bytes"].get<double>() / 1e6, t["decode_vs_first"].get<double>(),
        t["prefill_vs_first"].get<double>());
  }
}

// The first weight type's figures, which the summary lines and the JSON's top level report.
struct Figures {
  double pf_s, pf_gflops, matmul_rate;  // prefill: seconds, GFLOP/s, weight products' GFLOP/s
  double med, p10, p90;                 // decode: ms per step
  double gbs;                           // decode: weights read, GB/s
};

Figures figures(const BenchResult& r) {
  const double pf_s = r.prefill_seconds;
  const double med = r.step_ms[r.step_ms.size() / 2];
  return {pf_s,
          r.prefill_gflop / pf_s,
          r.prefill_matmul_gflop / pf_s,
          med,
          r.step_ms[r.step_ms.size() / 10],
          r.step_ms[r.step_ms.size() * 9 / 10],
          r.weight_bytes / (med * 1e-3) / 1e9};
}

// llama.cpp's timing lines, each against the machine's limit.
void print_summary(std::FILE* out, const BenchResult& r, const attn::Runtime& rt,
                   const Figures& x) {
  const MachineLimits& l = r.limits;
  std::fprintf(
      out,
      "%s weights:\n"
      "prompt eval time = %10.2f ms / %5lld positions (%8.2f ms per position, %8.2f "
      "positions per second)\n"
      "prompt eval rate = %8.1f GFLOP/s (%.1f GFLOP), %.0f%% of OpenBLAS sgemm's %.1f "
      "GFLOP/s on these shapes, %.0f%% of the %s FMA peak%s %.1f GFLOP/s\n"
      "        eval time = %10.2f ms / %5lld steps    (%8.2f ms per step median, p10 %.2f, "
      "p90 %.2f, %8.2f steps per second)\n"
      "        eval rate = %8.2f GB/s of weights (%.1f MB per step), %.0f%% of the %.2f "
      "GB/s streaming read\n"
      "peak resident memory = %.1f MB (the process: every weight type's model); threads = %d; "
      "matmul = %s; OpenBLAS core = %s\n",
      r.weight_type.c_str(), x.pf_s * 1e3, (long long)r.prefill, x.pf_s * 1e3 / double(r.prefill),
      double(r.prefill) / x.pf_s, x.pf_gflops, r.prefill_gflop,
      100 * x.matmul_rate / l.sgemm_gflops, l.sgemm_gflops, 100 * x.pf_gflops / prefill_peak(r),
      l.fma_isa.c_str(),
      r.peak_factor == 2   ? " x 2 (vdpbf16ps)"
      : r.peak_factor == 4 ? " x 4 (8-bit integer products)"
                           : "",
      prefill_peak(r), x.med * double(r.steps), (long long)r.steps, x.med, x.p10, x.p90,
      1e3 / x.med, x.gbs, r.weight_bytes / 1e6, 100 * x.gbs / l.stream_gbs, l.stream_gbs,
      double(r.peak_rss_kb) / 1024, rt.threads, attn::matmul_path(rt).c_str(),
      attn::blas_core().c_str());
}

void print_compute_errors(std::FILE* out, const std::vector<BenchResult>& results,
                          attn::Compute compute) {
  for (const BenchResult& t : results)
    if (t.compute_error)
      std::fprintf(out,
                   "--compute %s, %s weights, against the exact path (the prefill's output): "
                   "max |error| %.3g (%.2g of max |output|), RMS error %.2g of RMS output\n",
                   attn::compute_name(compute), t.weight_type.c_str(), t.compute_error->max_abs,
                   t.compute_error->max_rel, t.compute_error->rms_rel);
}

// --json's object: the machine, the first weight type's figures, every type's (`types`).
nlohmann::json report_json(const BenchResult& r, const attn::Runtime& rt, const Figures& x,
                           const nlohmann::json& types) {
  const MachineLimits& l = r.limits;
  return {{"version", ATTN_VERSION},
          {"cpu", attn::cpu_name()},
          {"kernels", rt.kernels->name},
          {"compute", attn::compute_name(rt.compute)},
          {"date", utc_now()},
          {"prefill_positions", r.prefill},
          {"prefill_ms", x.pf_s * 1e3},
          {"prefill_positions_per_s", double(r.prefill) / x.pf_s},
          {"prefill_gflops", x.pf_gflops},
          {"prefill_gflop", r.prefill_gflop},
          {"prefill_matmul_gflops", x.matmul_rate},
          {"prefill_fraction_of_sgemm", x.matmul_rate / l.sgemm_gflops},
          {"prefill_fraction_of_fma_peak", x.pf_gflops / prefill_peak(r)},
          {"prefill_peak_factor", r.peak_factor},
          {"decode_steps", r.steps},
          {"decode_depth", r.depth},
          {"decode_ms_median", x.med},
          {"decode_ms_p10", x.p10},
          {"decode_ms_p90", x.p90},
          {"decode_steps_per_s", 1e3 / x.med},
          {"decode_gbs", x.gbs},
          {"decode_fraction_of_stream", x.gbs / l.stream_gbs},
          {"weight_bytes", r.weight_bytes},
          {"peak_rss_mb", double(r.peak_rss_kb) / 1024},
          {"stream_gbs", l.stream_gbs},
          {"sgemm_gflops", l.sgemm_gflops},
          {"sgemm_ms", l.sgemm_seconds * 1e3},
          {"fma_peak_gflops", l.fma_gflops},
          {"fma_peak_samples_gflops", l.fma_samples},
          {"fma_peak_spread", l.fma_spread()},
          {"stream_spread", l.stream_spread},
          {"fma_isa", l.fma_isa},
          {"threads", rt.threads},
          {"matmul", attn::matmul_path(rt)},
          {"openblas_core", attn::blas_core()},
          {"matmul_isa", rt.kernels->name},
          {"stream_pattern", l.stream_pattern},
          {"kv_cache_mb", r.kv_cache_bytes / 1e6},
          {"batched_decode", batched_json(r)},
          {"weight_type", r.weight_type},
          {"weight_types", types}};
}

}  // namespace

void print_bench(const std::vector<BenchResult>& results, const attn::Runtime& rt, bool json,
                 const nlohmann::json& extra) {
  std::FILE* out = json ? stderr : stdout;
  const BenchResult& r = results.front();
  nlohmann::json types = nlohmann::json::array();
  for (const BenchResult& t : results) types.push_back(weight_type_json(t, r));
  const Figures x = figures(r);
  print_summary(out, r, rt, x);
  print_weight_types(out, types);
  for (const BenchResult& t : results) print_batched(out, t, rt);
  print_compute_errors(out, results, rt.compute);
  const std::vector<std::string> errors = measurement_errors(results);
  for (const std::string& e : errors) std::fprintf(out, "measurement error: %s\n", e.c_str());
  std::fflush(out);
  if (!json) return;
  nlohmann::json j = report_json(r, rt, x, types);
  j["measurement_errors"] = errors;
  j.update(extra);
  std::cout << j.dump() << "\n";
}

namespace {

// "F32 prefill at 313% of the FMA peak 221.0 GFLOP/s (its 2 probes spread 45%)"
std::string over_limit(const std::string& what, double fraction, const char* limit, double value,
                       const char* unit, const std::string& spread) {
  char text[256];
  std::snprintf(text, sizeof text,
                "%s at %.0f%% of the %s %.1f %s (%s): the limit was probed in a "
                "slow moment; rerun on a quieter machine",
                what.c_str(), 100 * fraction, limit, value, unit, spread.c_str());
  return text;
}

std::string percent(double fraction) {
  return std::to_string(int(100 * fraction + 0.5)) + "%";
}

}  // namespace

std::vector<std::string> measurement_errors(const std::vector<BenchResult>& results) {
  std::vector<std::string> out;
  for (const BenchResult& r : results) {
    const MachineLimits& l = r.limits;
    const double peak = r.prefill_gflop / r.prefill_seconds / prefill_peak(r);
    if (peak > 1)
      out.push_back(over_limit(r.weight_type + " prefill", peak,
                               r.peak_factor == 2   ? "vdpbf16ps peak"
                               : r.peak_factor == 4 ? "8-bit integer peak"
                                                    : "FMA peak",
                               prefill_peak(r), "GFLOP/s",
                               "its " + std::to_string(l.fma_samples.size()) +
                                   " probes around the run spread " + percent(l.fma_spread())));
    const double stream = r.weight_bytes / (median_ms(r.step_ms) * 1e-3) / 1e9 / l.stream_gbs;
    if (stream > 1)
      out.push_back(over_limit(
          r.weight_type + " decode", stream, "streaming read", l.stream_gbs, "GB/s",
          "its reads between the steps spread " + percent(l.stream_spread) + " from p10 to p90"));
  }
  return out;
}

void print_bench_parallel(std::FILE* out, const nlohmann::json& mp, std::int64_t dim) {
  std::string rss;
  for (std::size_t i = 0; i < mp.at("peak_rss_mb_per_rank").size(); ++i)
    rss += (i ? ", rank " : "rank ") + std::to_string(i) + " " +
           std::to_string(int(mp["peak_rss_mb_per_rank"][i].get<double>() + 0.5)) + " MB";
  std::fprintf(out,
               "model parallel = %d ranks (%s), weights per rank %.1f MB\n"
               "       allreduce = %8.3f ms per step (%.1f%% of a step; %lld allreduces of %lld "
               "floats), %.2f ms in the prefill (%.1f%%)\n"
               "                   (the step's figure includes waiting for the slower rank; one "
               "allreduce of %lld floats alone, ranks in step: %.1f us)\n"
               "peak resident memory per rank = %s\n",
               mp["model_parallel_size"].get<int>(), mp["split"].get<std::string>().c_str(),
               mp["weight_bytes_per_rank"].get<double>() / 1e6,
               mp["decode_allreduce_ms_per_step"].get<double>(),
               100 * mp["decode_allreduce_share"].get<double>(),
               (long long)mp["allreduces_per_step"].get<std::int64_t>(), (long long)dim,
               mp["prefill_allreduce_ms"].get<double>(),
               100 * mp["prefill_allreduce_share"].get<double>(), (long long)dim,
               mp["allreduce_alone_us"].get<double>(), rss.c_str());
}

// One allreduce of dim floats with the ranks already in step, in microseconds (the median of
// 200): what a step's allreduces cost without the wait for the slower rank that the step's
// figure includes.
double allreduce_alone_us(const attn::Shard& shard, std::int64_t dim) {
  std::vector<float> v(std::size_t(dim), 1.0f);
  std::vector<double> us;
  for (int i = 0; i < 200; ++i) {
    attn::barrier(shard);
    const auto t0 = std::chrono::steady_clock::now();
    attn::allreduce_sum(shard, v.data(), dim);
    us.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() *
                 1e6);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// Model parallel: what the ranks cost each other (allreduce time) and what each one holds.
nlohmann::json bench_parallel(const BenchResult& r, const attn::Transformer& m,
                              const std::vector<double>& rss_mb, double alone_us) {
  double steps_ms = 0;
  for (double ms : r.step_ms) steps_ms += ms;
  const double step_ar = r.decode_allreduce_seconds * 1e3 / double(r.steps);
  const double share = r.decode_allreduce_seconds * 1e3 / steps_ms;
  const double pf_share = r.prefill_allreduce_seconds / r.prefill_seconds;
  const std::int64_t per_step = m.args.n_layers * (m.args.block == attn::Block::llama ? 2 : 1);
  return {{"split", attn::split_text(m.args)},
          {"allreduces_per_step", per_step},
          {"model_parallel_size", m.shard.size},
          {"weight_bytes_per_rank", r.weight_bytes},
          {"decode_allreduce_ms_per_step", step_ar},
          {"decode_allreduce_share", share},
          {"prefill_allreduce_ms", r.prefill_allreduce_seconds * 1e3},
          {"prefill_allreduce_share", pf_share},
          {"peak_rss_mb_per_rank", rss_mb},
          {"allreduce_alone_us", alone_us}};
}

}  // namespace cli
