// comm/mpi/mpi_tuning.h — MPI library settings moe4d chooses at run time through the MPI tool
// interface (MPI_T control variables), instead of asking users for mpirun --mca flags.
//
// Why: OpenMPI 4.1's non-blocking all-reduce (coll/libnbc) picks a binomial reduce+broadcast for
// every in-place call and for groups of fewer than 4 ranks. moe4d's all_reduce is in place, and a
// binomial tree moves twice the data of a reduce-scatter/all-gather: comm_bench measured it 2-4x
// slower than blocking MPI_Allreduce for 64 KiB-64 MiB on 2 ranks, against ~1.0x with
// Rabenseifner's algorithm (ring is similar). The setting is process-wide.
#pragma once

namespace moe4d {

// OpenMPI libnbc iallreduce algorithms (coll_libnbc_iallreduce_algorithm).
enum class NbcAllReduceAlgorithm { kLibraryDefault = 0, kRing = 1, kBinomial = 2, kRabenseifner = 3, kRecursiveDoubling = 4 };

// Writes an integer MPI_T control variable. Returns false (and changes nothing) when the MPI
// library has no writable variable of that name, e.g. another MPI implementation.
bool set_mpi_control_variable(const char* name, int value);

// Selects the libnbc iallreduce algorithm; kLibraryDefault leaves the library's choice alone.
// Returns whether the setting took effect.
bool select_nbc_all_reduce_algorithm(NbcAllReduceAlgorithm algorithm);

}  // namespace moe4d
