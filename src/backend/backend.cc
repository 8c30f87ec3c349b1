// backend/backend.cc — the base class's defaults: every op is unsupported until a backend implements it.
#include "backend/backend.h"

#include "core/error.h"

namespace moe4d {

void Backend::unsupported(const char* op) const { fail("backend '{}' has no op '{}'", name(), op); }

void Backend::fill(float*, float, int64_t) { unsupported("fill"); }
void Backend::zero(void*, size_t) { unsupported("zero"); }
void Backend::copy(void*, const void*, size_t) { unsupported("copy"); }
void Backend::copy_rows(void*, size_t, const void*, size_t, size_t, size_t) { unsupported("copy_rows"); }
void Backend::gemm(DType, bool, bool, int, int, int, float, const float*, int, const float*, int, float, float*, int,
                   bool) {
  unsupported("gemm");
}
void Backend::grouped_gemm(DType, bool, int, const int*, int, int, float, const float*, int, const float*, int64_t, int,
                           float, float*, int, bool) {
  unsupported("grouped_gemm");
}
void Backend::round_to(DType, const float*, float*, int64_t) { unsupported("round_to"); }
void Backend::to_half(DType, const float*, uint16_t*, int64_t) { unsupported("to_half"); }
void Backend::from_half(DType, const uint16_t*, float*, int64_t) { unsupported("from_half"); }
void Backend::axpy(float*, const float*, float, int64_t) { unsupported("axpy"); }
void Backend::scale(float*, float, int64_t) { unsupported("scale"); }
double Backend::sum_squares(const float*, int64_t) { unsupported("sum_squares"); }
bool Backend::all_finite(const float*, int64_t) { unsupported("all_finite"); }
void Backend::rmsnorm_forward(float*, float*, const float*, const float*, int, int, float) {
  unsupported("rmsnorm_forward");
}
void Backend::rmsnorm_backward(float*, float*, const float*, const float*, const float*, const float*, int, int) {
  unsupported("rmsnorm_backward");
}
void Backend::rope_forward(float*, const RopeTable&, int, int, int) { unsupported("rope_forward"); }
void Backend::rope_backward(float*, const RopeTable&, int, int, int) { unsupported("rope_backward"); }
void Backend::rope_forward_at(float*, const RopeTable&, int, int, int, int) { unsupported("rope_forward_at"); }
void Backend::attention_forward(float*, float*, const float*, int, int, int, int, int) {
  unsupported("attention_forward");
}
void Backend::attention_backward(float*, float*, const float*, const float*, const float*, int, int, int, int, int) {
  unsupported("attention_backward");
}
void Backend::attention_decode(float*, float*, const float*, const float*, const float*, int, int, int, int, int) {
  unsupported("attention_decode");
}
void Backend::swiglu_forward(float*, const float*, const float*, int64_t) { unsupported("swiglu_forward"); }
void Backend::swiglu_backward(float*, float*, const float*, const float*, const float*, int64_t) {
  unsupported("swiglu_backward");
}
void Backend::router_forward(float*, float*, int*, float*, const float*, const float*, int, int, int,
                             const RouterScoring&) {
  unsupported("router_forward");
}
void Backend::router_expert_counts(int*, const int*, int, int, int) { unsupported("router_expert_counts"); }
float Backend::router_aux_loss(const float*, const RouterBalance&, int, int, int, const RouterScoring&) {
  unsupported("router_aux_loss");
}
float Backend::router_z_loss(const float*, int, int) { unsupported("router_z_loss"); }
void Backend::router_backward(float*, const float*, const float*, const float*, const int*, const float*,
                              const RouterBalance&,
                              int, int, int, float, float, const RouterScoring&, const float*, int) {
  unsupported("router_backward");
}
int Backend::moe_route_plan(int*, int*, int*, int*, const int*, const float*, int, int, int, int) {
  unsupported("moe_route_plan");
}
void Backend::moe_permute_forward(float*, const float*, const int*, int, int, int) {
  unsupported("moe_permute_forward");
}
void Backend::moe_permute_backward(float*, const float*, const int*, int, int, int) {
  unsupported("moe_permute_backward");
}
void Backend::moe_unpermute_forward(float*, const float*, const int*, const float*, int, int, int) {
  unsupported("moe_unpermute_forward");
}
void Backend::moe_unpermute_backward(float*, float*, const float*, const float*, const int*, const float*, int, int,
                                     int) {
  unsupported("moe_unpermute_backward");
}
void Backend::embedding_forward(float*, const float*, const int*, int, int, int, int) {
  unsupported("embedding_forward");
}
void Backend::embedding_backward(float*, const float*, const int*, int, int, int, int) {
  unsupported("embedding_backward");
}
void Backend::ce_row_max(float*, const float*, int, int) { unsupported("ce_row_max"); }
void Backend::ce_row_sumexp(float*, const float*, const float*, int, int) { unsupported("ce_row_sumexp"); }
void Backend::ce_target_logit(float*, const float*, const int*, int, int, int) { unsupported("ce_target_logit"); }
void Backend::ce_loss(float*, const float*, const float*, const float*, int) { unsupported("ce_loss"); }
void Backend::ce_backward(float*, const float*, const float*, const float*, const int*, float, int, int, int) {
  unsupported("ce_backward");
}
void Backend::adamw_update(float*, const float*, float*, float*, int64_t, const AdamWStep&) {
  unsupported("adamw_update");
}
void Backend::onebit_compress(const float*, size_t, size_t, float*, uint8_t*) { unsupported("onebit_compress"); }
void Backend::onebit_decompress(const uint8_t*, size_t, float, float*, bool) { unsupported("onebit_decompress"); }
void Backend::momentum_update(float*, const float*, float, float, size_t) { unsupported("momentum_update"); }
void Backend::onebit_adam_update(float*, const float*, const float*, size_t, float, float, float, float, float) {
  unsupported("onebit_adam_update");
}

}  // namespace moe4d
