// comm/mpi/mpi_reduce_ops.cc — DType -> MPI_Datatype and the user-defined BF16/F16 reductions.
#include "comm/mpi/mpi_reduce_ops.h"

#include <algorithm>

#include "core/check.h"

namespace moe4d {

namespace {

struct Sum {
  static float apply(float a, float b) { return a + b; }
};
struct Max {
  static float apply(float a, float b) { return std::max(a, b); }
};
struct Min {
  static float apply(float a, float b) { return std::min(a, b); }
};

// MPI_User_function: inout[i] = in[i] (op) inout[i], on 16-bit float bit patterns.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float), typename Op>
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = FromFloat(Op::apply(ToFloat(a[i]), ToFloat(b[i])));
}

MPI_Op create_op(MPI_User_function* fn) {
  MPI_Op op;
  MPI_Op_create(fn, /*commute=*/1, &op);
  return op;
}

}  // namespace

MpiReduceOps::MpiReduceOps() {
  half_ops_[0][0] = create_op(half_reduce<bf16_to_float, float_to_bf16, Sum>);
  half_ops_[0][1] = create_op(half_reduce<bf16_to_float, float_to_bf16, Max>);
  half_ops_[0][2] = create_op(half_reduce<bf16_to_float, float_to_bf16, Min>);
  half_ops_[1][0] = create_op(half_reduce<f16_to_float, float_to_f16, Sum>);
  half_ops_[1][1] = create_op(half_reduce<f16_to_float, float_to_f16, Max>);
  half_ops_[1][2] = create_op(half_reduce<f16_to_float, float_to_f16, Min>);
}

MpiReduceOps::~MpiReduceOps() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // MPI already released every handle
  for (auto& row : half_ops_)
    for (MPI_Op& op : row) MPI_Op_free(&op);
}

MPI_Datatype MpiReduceOps::datatype(DType dtype) {
  switch (dtype) {
    case DType::kF32: return MPI_FLOAT;
    case DType::kF64: return MPI_DOUBLE;
    case DType::kBF16: return MPI_UINT16_T;
    case DType::kF16: return MPI_UINT16_T;
    case DType::kI32: return MPI_INT32_T;
    case DType::kI64: return MPI_INT64_T;
    case DType::kU8: return MPI_UINT8_T;
    case DType::kU16: return MPI_UINT16_T;
    case DType::kU32: return MPI_UINT32_T;
  }
  MOE4D_CHECK_MSG(false, "unknown dtype {}", static_cast<int>(dtype));
  return MPI_DATATYPE_NULL;
}

MPI_Op MpiReduceOps::op(ReduceOp op, DType dtype) const {
  int index = static_cast<int>(op);
  if (dtype == DType::kBF16) return half_ops_[0][index];
  if (dtype == DType::kF16) return half_ops_[1][index];
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  MOE4D_CHECK_MSG(false, "unknown reduce op {}", index);
  return MPI_OP_NULL;
}

}  // namespace moe4d
