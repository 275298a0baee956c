#include "attn/model/parallel.hpp"

#include <algorithm>
#include <stdexcept>

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
    throw InputError(want + ": built without MPI (install libopenmpi-dev, " +
                     "reconfigure, and run under mpirun -np " + std::to_string(k) + ")");
  if (s.size == 1)
    throw InputError(want + " needs " + std::to_string(k) +
                     " ranks, one process each: run it under mpirun -np " + std::to_string(k));
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

namespace {

// The Comm of a multi-rank shard; a Shard of several ranks without one is a caller's bug.
const Comm& comm(const Shard& s) {
  if (!s.comm) throw std::logic_error("a Shard of several ranks needs a Comm");
  return *s.comm;
}

}  // namespace

void allreduce_sum(const Shard& s, float* data, std::int64_t n) {
  if (s.size > 1) comm(s).allreduce_sum(data, n);
}

std::vector<float> gather_heads(const Shard& s, const std::vector<float>& local, std::int64_t B) {
  if (s.size == 1) return local;
  const std::int64_t n = std::int64_t(local.size()), chunk = B ? n / B : 0;
  std::vector<float> all(s.rank == 0 ? std::size_t(n * s.size) : 0);  // [size, B, chunk]
  comm(s).gather(local.data(), n, all.data());
  if (s.rank != 0) return {};
  std::vector<float> out(all.size());  // [B, size, chunk]
  for (std::int64_t r = 0; r < s.size; ++r)
    for (std::int64_t b = 0; b < B; ++b)
      std::copy_n(all.data() + (r * B + b) * chunk, chunk, out.data() + (b * s.size + r) * chunk);
  return out;
}

std::vector<double> gather_values(const Shard& s, double value) {
  if (s.size == 1) return {value};
  std::vector<double> all(s.rank == 0 ? std::size_t(s.size) : 0);
  comm(s).gather(&value, 1, all.data());
  return all;
}

Agreement agree(const Shard& s, int status) {
  if (s.size == 1) return {status, 0};
  const int worst = comm(s).allreduce_max(status);
  const int mine = status == worst && worst != 0 ? s.rank : s.size;
  return {worst, comm(s).allreduce_min(mine)};
}

void barrier(const Shard& s) {
  if (s.size > 1) comm(s).barrier();
}

}  // namespace attn
