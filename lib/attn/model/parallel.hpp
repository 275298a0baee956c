#pragma once
// Model parallelism across MPI ranks, as Meta's fairscale layers split a model across GPUs:
// which slice of the model a rank holds (Shard), and the few collectives the forward pass and
// the CLI need. The application starts and ends MPI and hands the engine its Shard with a Comm;
// the library links no MPI and keeps no process-wide state. One rank (or no Comm) makes every
// collective the identity.
#include <cstdint>
#include <string>
#include <vector>

#include "attn/model/config.hpp"

namespace attn {

// Rank r of size ranks holds query heads r*n_heads/size .., KV heads r*n_kv_heads/size .. and
// FFN hidden units r*ffn_hidden/size .. (the notebook's "GPU0: Q1, Q2, Q3, K1, V1").
// The collectives over the ranks, as attn-cli's MPI module (libattn_mpi.so, opened only under
// mpirun) implements them with MPI: the engine and its users link no MPI. The free functions
// below call it.
class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void allreduce_sum(float* data, std::int64_t n) const = 0;
  virtual int allreduce_max(int value) const = 0;
  virtual int allreduce_min(int value) const = 0;
  // Rank 0 gets every rank's n values in rank order in all [size * n]; on the others all is
  // unused.
  virtual void gather(const float* local, std::int64_t n, float* all) const = 0;
  virtual void gather(const double* local, std::int64_t n, double* all) const = 0;
  virtual void barrier() const = 0;
  [[noreturn]] virtual void abort(int status) const = 0;
};

struct Shard {
  int rank = 0;
  int size = 1;
  const Comm* comm = nullptr;  // the application's; needed when size > 1
};

// True when this build found MPI at configure time (attn-cli's MPI module was built) and can run
// more than one rank.
bool mpi_built();

// Refuses (InputError) a config whose model_parallel_size is not the number of ranks running.
void check_shard(const ModelArgs& args, const Shard& shard);

// The part of the model one rank computes: n_heads, n_kv_heads and ffn_hidden divided by
// shard.size; dim and head_dim kept.
ModelArgs local_args(const ModelArgs& args, const Shard& shard);

// "rank 0: query heads 0-2, kv head 0; rank 1: query heads 3-5, kv head 1"
std::string split_text(const ModelArgs& args);

// data[n] = the sum of every rank's data[n] (MPI_Allreduce, in place).
void allreduce_sum(const Shard& shard, float* data, std::int64_t n);

// Rank 0 gets every rank's local [B, chunk] (chunk = local.size() / B) as [B, size * chunk]:
// each rank's heads of a cache put back in rank order. Other ranks get an empty vector.
std::vector<float> gather_heads(const Shard& shard, const std::vector<float>& local,
                                std::int64_t B);

// Rank 0 gets every rank's value in rank order; other ranks get an empty vector.
std::vector<double> gather_values(const Shard& shard, double value);

// After a step every rank runs whether it failed or not: the worst status over the ranks
// (0 = all fine) and the lowest rank that reported it, so exactly one rank explains the failure
// and all leave together instead of waiting in a collective.
struct Agreement {
  int status = 0;
  int first_rank = 0;
};
Agreement agree(const Shard& shard, int status);

void barrier(const Shard& shard);

}  // namespace attn
