#pragma once
// The frontend's side of model parallelism: starting and ending MPI (the library never does),
// and making every rank leave together when one fails. MPI lives in a module of its own
// (mpi_comm.cpp), opened only under mpirun: a plain run does not load Open MPI at all.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/model/parallel.hpp"

namespace cli::ranks {

// True when mpirun (Open MPI, or a PMI launcher) started this process. A plain run does not
// start MPI at all: no cost, and nothing for the sanitizers to trip on.
inline bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

#ifdef ATTN_MPI
// Where the MPI module may be: next to the executable (the build tree), then where install()
// puts it relative to the installed executable.
inline std::vector<std::filesystem::path> mpi_module_paths() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path dir = ec ? std::filesystem::path(".") : exe.parent_path();
  return {dir / ATTN_MPI_MODULE, dir / ATTN_MPI_MODULE_FROM_BIN / ATTN_MPI_MODULE};
}

// MPI_Init through the module; the handle stays open for the process's life (MPI_Finalize runs
// from the Comm's destructor, and Open MPI cannot be unloaded and started again anyway).
inline std::unique_ptr<attn::Comm> open_mpi(int& argc, char**& argv) {
  std::string errors;
  for (const std::filesystem::path& path : mpi_module_paths()) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!handle) {
      errors += std::string("; ") + dlerror();
      continue;
    }
    using Open = attn::Comm* (*)(int*, char***);
    if (auto open = reinterpret_cast<Open>(dlsym(handle, "attn_mpi_open")))
      return std::unique_ptr<attn::Comm>(open(&argc, &argv));
    errors += "; " + path.string() + " has no attn_mpi_open";
  }
  throw std::runtime_error(std::string("cannot load the MPI module ") + ATTN_MPI_MODULE +
                           " under mpirun" + errors);
}
#endif

// The MPI world this process belongs to (rank 0 of 1 without mpirun); not a model's Session nor
// generate's saved session. Under mpirun (in an MPI build): MPI_Init in open(), MPI_Finalize on
// destruction. open() throws to main's handlers when the module cannot be loaded.
struct World {
  attn::Shard shard;
  std::unique_ptr<attn::Comm> comm;

  World() = default;
  void open(int& argc, char**& argv) {
#ifdef ATTN_MPI
    if (!launched_by_mpirun()) return;
    comm = open_mpi(argc, argv);
    shard = {comm->rank(), comm->size(), comm.get()};
#else
    (void)argc;
    (void)argv;
#endif
  }
  World(const World&) = delete;
  World& operator=(const World&) = delete;
};

// Thrown on the ranks that did not fail themselves: leave with `status`, print nothing.
struct Quiet {
  int status;
};

inline int status_of(const std::exception_ptr& error) {
  if (!error) return 0;
  try {
    std::rethrow_exception(error);
  } catch (const attn::InputError&) {
    return 2;
  } catch (...) {
    return 1;
  }
}

// Every rank calls this after its setup (config, weights, input), failed or not, before any
// other collective: if a rank failed, the lowest failing rank rethrows its error (one message)
// and the others throw Quiet, so all leave with the same status and none waits in a collective.
inline void settle(const attn::Shard& shard, const std::exception_ptr& error) {
  const attn::Agreement a = attn::agree(shard, status_of(error));
  if (a.status == 0) return;
  if (error && a.first_rank == shard.rank) std::rethrow_exception(error);
  throw Quiet{a.status};
}

// Runs a rank's setup, then settles: on one process a failure is thrown as it is.
template <class F>
void set_up(const attn::Shard& shard, F&& setup) {
  std::exception_ptr error;
  try {
    setup();
  } catch (...) {
    if (shard.size == 1) throw;
    error = std::current_exception();
  }
  settle(shard, error);
}

// Ends every rank with `status` (MPI_Abort); with one rank, exit. The process is the front's to
// end, so this lives here rather than in the library.
[[noreturn]] inline void abort_all(const attn::Shard& shard, int status) {
  if (shard.size > 1 && shard.comm) shard.comm->abort(status);
  std::exit(status);
}

// After setup, a failure on one rank ends them all (MPI_Abort) with its status, rather than
// leaving the others in a collective.
template <class F>
int or_abort(const attn::Shard& shard, F&& work) {
  if (shard.size == 1) return work();
  try {
    return work();
  } catch (const std::exception& e) {
    const int status = status_of(std::current_exception());
    std::fprintf(stderr, "attn-cli: error: rank %d: %s\n", shard.rank, e.what());
    abort_all(shard, status);
  }
}

}  // namespace cli::ranks
