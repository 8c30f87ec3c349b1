// comm/mpi/mpi_tuning.cc — MPI_T control-variable writes (see the header for why).
#include "comm/mpi/mpi_tuning.h"

#include <mpi.h>

namespace moe4d {

bool set_mpi_control_variable(const char* name, int value) {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return false;
  bool written = false;
  int index = 0;
  if (MPI_T_cvar_get_index(name, &index) == MPI_SUCCESS) {
    MPI_Datatype type;
    int verbosity = 0, bind = 0, scope = 0, name_len = 0, desc_len = 0;
    MPI_T_enum enumtype;
    MPI_T_cvar_get_info(index, nullptr, &name_len, &verbosity, &type, &enumtype, nullptr, &desc_len, &bind, &scope);
    MPI_T_cvar_handle handle;
    int count = 0;
    if (type == MPI_INT && scope != MPI_T_SCOPE_CONSTANT && scope != MPI_T_SCOPE_READONLY &&
        MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
      written = count == 1 && MPI_T_cvar_write(handle, &value) == MPI_SUCCESS;
      MPI_T_cvar_handle_free(&handle);
    }
  }
  MPI_T_finalize();
  return written;
}

bool select_nbc_all_reduce_algorithm(NbcAllReduceAlgorithm algorithm) {
  if (algorithm == NbcAllReduceAlgorithm::kLibraryDefault) return false;
  return set_mpi_control_variable("coll_libnbc_iallreduce_algorithm", static_cast<int>(algorithm));
}

}  // namespace moe4d
