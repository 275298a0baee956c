#include "attn/model/parallel.hpp"

#ifdef ATTN_MPI
#include <mpi.h>
#endif

#include <algorithm>
#include <cstdlib>

#include "attn/error.hpp"

namespace attn {

namespace {

std::string range_text(const char* what, std::int64_t first, std::int64_t n) {
  std::string s = std::string(what) + (n > 1 ? "s " : " ") + std::to_string(first);
  return n > 1 ? s + "-" + std::to_string(first + n - 1) : s;
}

}  // namespace

bool mpi_built() {
#ifdef ATTN_MPI
  return true;
#else
  return false;
#endif
}

void check_shard(const ModelArgs& a, const Shard& s) {
  const std::int64_t k = a.model_parallel_size;
  if (k == s.size) return;
  const std::string want = "model_parallel_size " + std::to_string(k);
  if (k > 1 && !mpi_built())
    throw InputError(want + ": this attn-cli was built without MPI (install libopenmpi-dev, " +
                     "reconfigure, and run it under mpirun -np " + std::to_string(k) + ")");
  if (s.size == 1)
    throw InputError(want + " needs " + std::to_string(k) + " ranks: run it as mpirun -np " +
                     std::to_string(k) + " attn-cli ...");
  throw InputError(want + ", but mpirun started " + std::to_string(s.size) +
                   " ranks: they must be equal");
}

ModelArgs local_args(const ModelArgs& a, const Shard& s) {
  ModelArgs l = a;
  l.head_dim_set = a.head_dim();
  l.ffn_hidden_set = a.ffn_hidden() / s.size;
  l.n_heads = a.n_heads / s.size;
  l.n_kv_heads = a.n_kv_heads / s.size;
  return l;
}

std::string split_text(const ModelArgs& a) {
  const std::int64_t k = a.model_parallel_size, h = a.n_heads / k, kv = a.n_kv_heads / k;
  std::string s;
  for (std::int64_t r = 0; r < k; ++r)
    s += (r ? "; rank " : "rank ") + std::to_string(r) + ": " + range_text("query head", r * h, h) +
         ", " + range_text("kv head", r * kv, kv);
  return s;
}

#ifdef ATTN_MPI

void allreduce_sum(const Shard& s, float* data, std::int64_t n) {
  if (s.size == 1) return;
  // Counts are int: a [rows, dim] block is far below 2^31 floats (rows <= 2^24 positions...),
  // but go in pieces to be sure.
  constexpr std::int64_t kMax = std::int64_t{1} << 30;
  for (std::int64_t i = 0; i < n; i += kMax)
    MPI_Allreduce(MPI_IN_PLACE, data + i, int(std::min(kMax, n - i)), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
}

std::vector<float> gather_heads(const Shard& s, const std::vector<float>& local, std::int64_t B) {
  if (s.size == 1) return local;
  const std::int64_t n = std::int64_t(local.size()), chunk = B ? n / B : 0;
  std::vector<float> all(s.rank == 0 ? std::size_t(n * s.size) : 0);  // [size, B, chunk]
  MPI_Gather(local.data(), int(n), MPI_FLOAT, all.data(), int(n), MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (s.rank != 0) return {};
  std::vector<float> out(all.size());  // [B, size, chunk]
  for (std::int64_t r = 0; r < s.size; ++r)
    for (std::int64_t b = 0; b < B; ++b)
      std::copy_n(all.data() + (r * B + b) * chunk, chunk, out.data() + (b * s.size + r) * chunk);
  return out;
}

std::vector<double> gather_values(const Shard& s, double value) {
  std::vector<double> all(s.rank == 0 ? std::size_t(s.size) : 0);
  if (s.size == 1) return {value};
  MPI_Gather(&value, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return all;
}

Agreement agree(const Shard& s, int status) {
  if (s.size == 1) return {status, 0};
  int worst = 0;
  MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  int mine = status == worst && worst != 0 ? s.rank : s.size, first = 0;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return {worst, first};
}

void barrier(const Shard& s) {
  if (s.size > 1) MPI_Barrier(MPI_COMM_WORLD);
}

void abort_all(const Shard& s, int status) {
  if (s.size > 1) MPI_Abort(MPI_COMM_WORLD, status);
  std::exit(status);
}

#else  // one rank: every collective is the identity

void allreduce_sum(const Shard&, float*, std::int64_t) {}

std::vector<float> gather_heads(const Shard&, const std::vector<float>& local, std::int64_t) {
  return local;
}

std::vector<double> gather_values(const Shard&, double value) {
  return {value};
}

Agreement agree(const Shard&, int status) {
  return {status, 0};
}

void barrier(const Shard&) {}

void abort_all(const Shard&, int status) {
  std::exit(status);
}

#endif

}  // namespace attn
