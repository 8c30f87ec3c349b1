# tests/comm/comm_seam_check.cmake — the communication seam holds: model, training, planning and
# every other layer see only the Communicator interface (src/comm). No file under src/ outside the
# MPI backend (src/comm/mpi/) includes <mpi.h> or a backend header, except the CLI, which creates
# the world communicator (and the MPI runtime) and may include the backend's headers but calls no
# MPI function itself.  usage: cmake -DSRC=<repo>/src -P comm_seam_check.cmake
file(GLOB_RECURSE files RELATIVE ${SRC} ${SRC}/*.h ${SRC}/*.cc)
set(problems "")  # one "\n  file: line" per finding (lines hold semicolons: no lists)
foreach(file ${files})
  if(file MATCHES "^comm/mpi/")
    continue()
  endif()
  file(STRINGS ${SRC}/${file} lines)
  foreach(line IN LISTS lines)
    if(NOT file MATCHES "^cli/" AND line MATCHES "^#include [<\"](mpi\\.h|comm/mpi/)")
      string(APPEND problems "\n  src/${file}: ${line}")
    endif()
    # An MPI call: MPI_Xxx( outside a string literal (lines with quotes name MPI in messages).
    if(NOT line MATCHES "\"" AND line MATCHES "(^|[^A-Za-z0-9_])MPI_[A-Z][a-z_]+ *\\(")
      string(APPEND problems "\n  src/${file}: ${line}")
    endif()
  endforeach()
endforeach()
if(problems)
  message(FATAL_ERROR "MPI used outside the MPI backend (src/comm/mpi/):${problems}")
endif()
message(STATUS "comm seam: no MPI outside src/comm/mpi/")
