#pragma once
// bench's report: the tables for people (stdout, or stderr beside --json) and the JSON object,
// and under mpirun what the ranks cost each other.
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attn/kernels/runtime.hpp"
#include "attn/model/model.hpp"
#include "attn/model/parallel.hpp"
#include "workloads/bench.hpp"

namespace cli {

// The report: the tables on stdout, or with --json one object on stdout (with `extra`'s keys)
// and the tables on stderr.
void print_bench(const std::vector<BenchResult>& results, const attn::Runtime& rt, bool json,
                 const nlohmann::json& extra = {});

// The figures above a machine's limit measured in the same run (a prefill above the FMA peak, a
// decode above its streaming read): measurement errors, the limit's probe having run in a slow
// moment. One line each, with the probes' spread; none when every fraction is at most 100%.
std::vector<std::string> measurement_errors(const std::vector<BenchResult>& results);

// Model parallel: what the ranks cost each other (allreduce time) and what each one holds.
nlohmann::json bench_parallel(const BenchResult& r, const attn::Transformer& m,
                              const std::vector<double>& rss_mb, double alone_us);
void print_bench_parallel(std::FILE* out, const nlohmann::json& mp, std::int64_t dim);

// One allreduce of dim floats with the ranks already in step, in microseconds: a collective,
// every rank calls it.
double allreduce_alone_us(const attn::Shard& shard, std::int64_t dim);

}  // namespace cli
