#include "model/expert_exchange.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace moe4d {
namespace {
// Moves whole rows between the source-major layout of an all-to-all receive buffer
// ([source][local expert] blocks) and the expert-major layout the expert GEMMs want.
void regroup_rows(const float* in, float* out, int width, const ExpertExchangePlan& plan, bool to_expert_major,
                  Arena& scratch) {
  const int ep = plan.ep, el = plan.local_experts;
  int* expert_cursor = scratch.alloc_i32(el);
  std::copy(plan.expert_offsets, plan.expert_offsets + el, expert_cursor);
  int source_cursor = 0;
  for (int s = 0; s < ep; ++s) {
    for (int e = 0; e < el; ++e) {
      const int n = plan.recv_expert_rows[s * el + e];
      const float* src = in + size_t(to_expert_major ? source_cursor : expert_cursor[e]) * width;
      float* dst = out + size_t(to_expert_major ? expert_cursor[e] : source_cursor) * width;
      std::memcpy(dst, src, sizeof(float) * size_t(n) * width);
      source_cursor += n;
      expert_cursor[e] += n;
    }
  }
}
}  // namespace

ExpertExchange::ExpertExchange(Communicator& ep_group, int num_experts)
    : group_(ep_group), num_experts_(num_experts), local_experts_(num_experts / ep_group.size()) {
  MOE4D_CHECK_EQ(num_experts % ep_group.size(), 0);
}

ExpertExchangePlan ExpertExchange::plan(const int* expert_offsets, Arena& memory) const {
  const int ep = group_.size(), el = local_experts_;
  ExpertExchangePlan plan;
  plan.ep = ep;
  plan.local_experts = el;
  plan.send_rows = expert_offsets[num_experts_];
  plan.send_counts = memory.alloc<size_t>(ep);
  plan.send_displs = memory.alloc<size_t>(ep);
  plan.recv_counts = memory.alloc<size_t>(ep);
  plan.recv_displs = memory.alloc<size_t>(ep);
  plan.recv_expert_rows = memory.alloc_i32(size_t(ep) * el);
  plan.expert_offsets = memory.alloc_i32(el + 1);
  // Rows for each (destination rank, its local expert), sent to the destination.
  int* send_expert_rows = memory.alloc_i32(size_t(ep) * el);
  for (int e = 0; e < num_experts_; ++e) send_expert_rows[e] = expert_offsets[e + 1] - expert_offsets[e];
  if (ep == 1) {
    std::copy(send_expert_rows, send_expert_rows + el, plan.recv_expert_rows);
  } else {
    size_t* counts = memory.alloc<size_t>(ep);
    size_t* displs = memory.alloc<size_t>(ep);
    for (int r = 0; r < ep; ++r) {
      counts[r] = size_t(el);
      displs[r] = size_t(r) * el;
    }
    group_.all_to_all_v(send_expert_rows, counts, displs, plan.recv_expert_rows, counts, displs, DType::kI32);
  }
  std::fill(plan.expert_offsets, plan.expert_offsets + el + 1, 0);
  plan.recv_rows = 0;
  for (int r = 0; r < ep; ++r) {
    plan.recv_counts[r] = 0;
    plan.send_displs[r] = size_t(expert_offsets[r * el]);
    plan.send_counts[r] = size_t(expert_offsets[(r + 1) * el] - expert_offsets[r * el]);
    plan.recv_displs[r] = size_t(plan.recv_rows);
    for (int e = 0; e < el; ++e) {
      const int n = plan.recv_expert_rows[r * el + e];
      plan.recv_counts[r] += size_t(n);
      plan.expert_offsets[e + 1] += n;
      plan.recv_rows += n;
    }
  }
  for (int e = 0; e < el; ++e) plan.expert_offsets[e + 1] += plan.expert_offsets[e];
  return plan;
}

void ExpertExchange::dispatch(const float* rows, float* out, int width, const ExpertExchangePlan& plan,
                              Arena& scratch) const {
  const int ep = group_.size();
  if (ep == 1) {
    std::memcpy(out, rows, sizeof(float) * size_t(plan.send_rows) * width);
    return;
  }
  size_t *sc = scratch.alloc<size_t>(ep), *sd = scratch.alloc<size_t>(ep), *rc = scratch.alloc<size_t>(ep),
         *rd = scratch.alloc<size_t>(ep);
  for (int r = 0; r < ep; ++r) {
    sc[r] = plan.send_counts[r] * width;
    sd[r] = plan.send_displs[r] * width;
    rc[r] = plan.recv_counts[r] * width;
    rd[r] = plan.recv_displs[r] * width;
  }
  float* received = scratch.alloc_f32(size_t(plan.recv_rows) * width);
  group_.all_to_all_v(rows, sc, sd, received, rc, rd, DType::kF32);
  regroup_rows(received, out, width, plan, /*to_expert_major=*/true, scratch);
}

void ExpertExchange::combine(const float* rows, float* out, int width, const ExpertExchangePlan& plan,
                             Arena& scratch) const {
  const int ep = group_.size();
  if (ep == 1) {
    std::memcpy(out, rows, sizeof(float) * size_t(plan.send_rows) * width);
    return;
  }
  float* source_major = scratch.alloc_f32(size_t(plan.recv_rows) * width);
  regroup_rows(rows, source_major, width, plan, /*to_expert_major=*/false, scratch);
  size_t *sc = scratch.alloc<size_t>(ep), *sd = scratch.alloc<size_t>(ep), *rc = scratch.alloc<size_t>(ep),
         *rd = scratch.alloc<size_t>(ep);
  for (int r = 0; r < ep; ++r) {  // the reverse direction: what we received we now send back
    sc[r] = plan.recv_counts[r] * width;
    sd[r] = plan.recv_displs[r] * width;
    rc[r] = plan.send_counts[r] * width;
    rd[r] = plan.send_displs[r] * width;
  }
  group_.all_to_all_v(source_major, sc, sd, out, rc, rd, DType::kF32);
}

}  // namespace moe4d
