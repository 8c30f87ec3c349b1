// comm/mpi/mpi_runtime.cc — MPI_Init_thread / MPI_Finalize with a thread-level check.
#include "comm/mpi/mpi_runtime.h"

#include <mpi.h>

#include <cstdlib>

#include "core/error.h"

namespace moe4d {
namespace {

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "unknown";
  }
}

}  // namespace

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (initialized) {
    MPI_Query_thread(&provided);
  } else {
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    owns_ = true;
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    if (owns_) MPI_Finalize();
    fail("mpi backend: the MPI library provides thread level {}, but moe4d needs MPI_THREAD_MULTIPLE "
         "(rebuild or reconfigure MPI with thread support)",
         thread_level_name(provided));
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
}

void MpiRuntime::abort_job(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return; this tells the compiler so
}

MpiRuntime::~MpiRuntime() {
  if (!owns_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace moe4d
