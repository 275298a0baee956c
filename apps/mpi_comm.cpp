// attn-cli's MPI module (libattn_mpi.so): attn::Comm over MPI_COMM_WORLD. attn-cli opens it only
// when mpirun started it (ranks.hpp), so a plain run neither loads nor initialises Open MPI
// (its loading and relocation: docs/perf/startup.md).
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "attn/model/parallel.hpp"

namespace {

// MPI counts are int: go in pieces far below 2^31.
constexpr std::int64_t kMaxCount = std::int64_t{1} << 30;

class MpiComm final : public attn::Comm {
 public:
  MpiComm(int* argc, char*** argv) { MPI_Init(argc, argv); }
  ~MpiComm() override { MPI_Finalize(); }
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  int rank() const override { return value(MPI_Comm_rank); }
  int size() const override { return value(MPI_Comm_size); }

  void allreduce_sum(float* data, std::int64_t n) const override {
    for (std::int64_t i = 0; i < n; i += kMaxCount)
      MPI_Allreduce(MPI_IN_PLACE, data + i, int(std::min(kMaxCount, n - i)), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
  }
  int allreduce_max(int v) const override { return reduce(v, MPI_MAX); }
  int allreduce_min(int v) const override { return reduce(v, MPI_MIN); }

  void gather(const float* local, std::int64_t n, float* all) const override {
    MPI_Gather(local, int(n), MPI_FLOAT, all, int(n), MPI_FLOAT, 0, MPI_COMM_WORLD);
  }
  void gather(const double* local, std::int64_t n, double* all) const override {
    MPI_Gather(local, int(n), MPI_DOUBLE, all, int(n), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  }

  void barrier() const override { MPI_Barrier(MPI_COMM_WORLD); }
  [[noreturn]] void abort(int status) const override {
    MPI_Abort(MPI_COMM_WORLD, status);
    std::exit(status);  // MPI_Abort is not declared [[noreturn]]
  }

 private:
  static int value(int (*query)(MPI_Comm, int*)) {
    int v = 0;
    query(MPI_COMM_WORLD, &v);
    return v;
  }
  static int reduce(int v, MPI_Op op) {
    int out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_INT, op, MPI_COMM_WORLD);
    return out;
  }
};

}  // namespace

// MPI_Init with the process's arguments; deleting the Comm calls MPI_Finalize.
extern "C" attn::Comm* attn_mpi_open(int* argc, char*** argv) {
  return new MpiComm(argc, argv);
}
