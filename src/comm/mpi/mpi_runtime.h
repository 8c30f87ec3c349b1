// comm/mpi/mpi_runtime.h — RAII ownership of the MPI library for one process.
//
// Construct one MpiRuntime at the top of main() (the CLI does; MPI test mains do the equivalent)
// before creating any MpiCommunicator, and destroy every communicator before it: MPI_Finalize runs
// in the destructor. moe4d needs MPI_THREAD_MULTIPLE (the progress thread of mpi_progress_engine.h
// calls MPI while the main thread issues operations); a library that provides less is an error.
// If MPI was already initialised by someone else, the runtime checks the thread level and leaves
// finalisation to that owner. Not copyable or movable.
#pragma once

namespace moe4d {

class MpiRuntime {
 public:
  // Throws moe4d::Error when the MPI library cannot provide MPI_THREAD_MULTIPLE.
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // Ends every process of the job with exit status `code` (MPI_Abort on MPI_COMM_WORLD): for an
  // error one rank met alone, while the others may wait in a collective. Print the reason first.
  [[noreturn]] void abort_job(int code) const;

 private:
  bool owns_ = false;  // we called MPI_Init_thread, so we call MPI_Finalize
  int world_rank_ = 0;
  int world_size_ = 1;
};

}  // namespace moe4d
