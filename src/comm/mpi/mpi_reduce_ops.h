// comm/mpi/mpi_reduce_ops.h — how moe4d element types and reductions map onto MPI.
//
// Every DType travels as an MPI builtin datatype (BF16 and F16 as MPI_UINT16_T bit patterns).
// Reductions over F32/F64/integers use MPI's builtin operators. MPI has no 16-bit float types, so
// BF16/F16 sum/max/min use user-defined commutative MPI_Ops created here: each pairwise combine
// widens to fp32 and rounds back (round-to-nearest-even), as NCCL does for bf16.
//
// One instance is shared by all communicators cut from the same world (held by MpiCommunicator's
// shared state); it must be destroyed before MPI_Finalize. Immutable after construction, thread-safe.
#pragma once

#include <mpi.h>

#include "comm/communicator.h"
#include "comm/half_float.h"  // the scalar conversions of the 16-bit operators

namespace moe4d {

class MpiReduceOps {
 public:
  MpiReduceOps();  // MPI must be initialised
  ~MpiReduceOps();
  MpiReduceOps(const MpiReduceOps&) = delete;
  MpiReduceOps& operator=(const MpiReduceOps&) = delete;

  static MPI_Datatype datatype(DType dtype);
  MPI_Op op(ReduceOp op, DType dtype) const;

 private:
  // [0] = BF16, [1] = F16; indexed by ReduceOp (kSum, kMax, kMin).
  MPI_Op half_ops_[2][3];
};

}  // namespace moe4d
