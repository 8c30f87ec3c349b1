// model/expert_exchange.cc — slice planning, packing and the all_to_all_v moves of the EP exchange.
#include "model/expert_exchange.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "backend/cpu_backend.h"
#include "core/check.h"

namespace moe4d {
namespace {

// Row range c of an expert's n rows when they are cut into `chunks` slices.
int slice_bound(int n, int c, int chunks) { return static_cast<int>(int64_t(n) * c / chunks); }

// The rows [begin, begin + n) of a block that fall in [lo, hi), as (offset into the block, rows).
std::pair<int, int> clip(int begin, int n, int lo, int hi) {
  const int a = std::max(begin, lo), b = std::min(begin + n, hi);
  return b > a ? std::pair{a - begin, b - a} : std::pair{0, 0};
}

// Fills peer_rows, total_rows and contiguous from start/rows.
void summarise(ExchangeSide& side, int ep, int el) {
  side.total_rows = 0;
  side.contiguous = true;
  for (int p = 0; p < ep; ++p) {
    side.peer_rows[p] = 0;
    int end = -1;
    for (int e = 0; e < el; ++e) {
      const int i = p * el + e;
      if (side.rows[i] == 0) continue;
      if (end >= 0 && side.start[i] != end) side.contiguous = false;
      end = side.start[i] + side.rows[i];
      side.peer_rows[p] += size_t(side.rows[i]);
    }
    side.total_rows += static_cast<int>(side.peer_rows[p]);
  }
}

// First row of peer p's pieces (0 if it has none): its displacement when no packing is needed.
size_t first_row(const ExchangeSide& side, int p, int el) {
  for (int e = 0; e < el; ++e)
    if (side.rows[p * el + e] > 0) return size_t(side.start[p * el + e]);
  return 0;
}

ExchangeSide alloc_side(int ep, int el, Arena& memory) {
  ExchangeSide side;
  side.start = memory.alloc_i32(size_t(ep) * el);
  side.rows = memory.alloc_i32(size_t(ep) * el);
  side.peer_rows = memory.alloc<size_t>(ep);
  return side;
}

}  // namespace

ExchangeTransfer& ExchangeTransfer::operator=(ExchangeTransfer&& other) noexcept {
  if (this != &other) {
    finish();
    work_ = std::move(other.work_);
    backend_ = other.backend_;
    recv_side_ = other.recv_side_;
    packed_ = other.packed_;
    out_ = other.out_;
    ep_ = other.ep_;
    local_experts_ = other.local_experts_;
    width_ = other.width_;
  }
  return *this;
}

void ExchangeTransfer::finish() {
  if (!work_) return;
  work_->wait();
  work_.reset();
  if (!recv_side_) return;
  const size_t w = size_t(width_);
  size_t at = 0;
  for (int i = 0; i < ep_ * local_experts_; ++i) {
    const size_t n = size_t(recv_side_->rows[i]);
    backend_->copy(out_ + size_t(recv_side_->start[i]) * w, packed_ + at * w, sizeof(float) * n * w);
    at += n;
  }
}

ExchangeTransferQueue::ExchangeTransferQueue(int capacity, Arena& memory)
    : items_(memory.alloc<ExchangeTransfer>(size_t(capacity))), capacity_(capacity) {}

void ExchangeTransferQueue::push(ExchangeTransfer transfer) {
  MOE4D_CHECK_LT(size_, capacity_);
  new (items_ + size_) ExchangeTransfer(std::move(transfer));
  ++size_;
}

void ExchangeTransferQueue::finish(int index) {
  MOE4D_CHECK(index >= 0 && index < size_);
  items_[index].finish();
}

void ExchangeTransferQueue::finish_all() {
  std::destroy_n(items_, size_);  // each destructor finishes its transfer
  size_ = 0;
}

ExpertExchange::ExpertExchange(Communicator& ep_group, int num_experts, int chunks)
    : group_(ep_group), num_experts_(num_experts), local_experts_(num_experts / ep_group.size()), chunks_(chunks) {
  MOE4D_CHECK_EQ(num_experts % ep_group.size(), 0);
  MOE4D_CHECK_GE(chunks, 1);
}

ExpertExchangePlan ExpertExchange::plan(const int* expert_offsets, Arena& memory) const {
  const int ep = group_.size(), me = group_.rank(), el = local_experts_, E = num_experts_, C = chunks_;
  ExpertExchangePlan plan;
  plan.ep = ep;
  plan.local_experts = el;
  plan.chunks = C;
  plan.send_rows = expert_offsets[E];

  // counts[s * E + g]: rows source rank s routes to global expert g.
  int* mine = memory.alloc_i32(E);
  for (int g = 0; g < E; ++g) mine[g] = expert_offsets[g + 1] - expert_offsets[g];
  int* counts = memory.alloc_i32(size_t(ep) * E);
  group_.all_gather(mine, counts, size_t(E), DType::kI32);
  plan.counts = counts;
  // total[g]: rows of expert g over all sources; before_me[g]: rows from sources < me (where this
  // rank's block sits inside expert g's part of its holder's expert layout).
  int* total = memory.alloc_i32(E);
  int* before_me = memory.alloc_i32(E);
  for (int g = 0; g < E; ++g) {
    total[g] = before_me[g] = 0;
    for (int s = 0; s < ep; ++s) {
      if (s < me) before_me[g] += counts[s * E + g];
      total[g] += counts[s * E + g];
    }
  }

  plan.expert_offsets = memory.alloc_i32(el + 1);
  plan.expert_offsets[0] = 0;
  for (int e = 0; e < el; ++e) plan.expert_offsets[e + 1] = plan.expert_offsets[e] + total[me * el + e];
  plan.recv_rows = plan.expert_offsets[el];

  plan.slices = memory.alloc<ExchangeSlice>(C);
  std::uninitialized_default_construct_n(plan.slices, C);
  int* source_prefix = memory.alloc_i32(el);
  for (int c = 0; c < C; ++c) {
    ExchangeSlice& slice = plan.slices[c];
    slice.token = alloc_side(ep, el, memory);
    slice.expert = alloc_side(ep, el, memory);
    slice.expert_begin = memory.alloc_i32(el);
    slice.expert_end = memory.alloc_i32(el);
    // Token side: my block of expert g = r * el + e, clipped to range c of that expert.
    for (int r = 0; r < ep; ++r) {
      for (int e = 0; e < el; ++e) {
        const int g = r * el + e;
        const auto [offset, rows] = clip(before_me[g], counts[me * E + g], slice_bound(total[g], c, C),
                                         slice_bound(total[g], c + 1, C));
        slice.token.start[r * el + e] = expert_offsets[g] + offset;
        slice.token.rows[r * el + e] = rows;
      }
    }
    // Expert side: source s's block of my local expert e, clipped to range c.
    std::fill(source_prefix, source_prefix + el, 0);  // host bookkeeping: the plan is host data
    for (int e = 0; e < el; ++e) {
      const int n = total[me * el + e];
      slice.expert_begin[e] = plan.expert_offsets[e] + slice_bound(n, c, C);
      slice.expert_end[e] = plan.expert_offsets[e] + slice_bound(n, c + 1, C);
    }
    for (int s = 0; s < ep; ++s) {
      for (int e = 0; e < el; ++e) {
        const int g = me * el + e, n = counts[s * E + g];
        const auto [offset, rows] = clip(source_prefix[e], n, slice_bound(total[g], c, C),
                                         slice_bound(total[g], c + 1, C));
        slice.expert.start[s * el + e] = plan.expert_offsets[e] + source_prefix[e] + offset;
        slice.expert.rows[s * el + e] = rows;
        source_prefix[e] += n;
      }
    }
    summarise(slice.token, ep, el);
    summarise(slice.expert, ep, el);
  }
  return plan;
}

ExchangeTransfer ExpertExchange::move(const ExchangeSide& send, const ExchangeSide& recv, const float* src,
                                      float* dst, int width, const ExpertExchangePlan& plan, Arena& scratch,
                                      Backend& backend) const {
  const int ep = plan.ep, el = plan.local_experts;
  const size_t w = size_t(width);
  size_t* send_counts = scratch.alloc<size_t>(4 * size_t(ep));
  size_t* send_displs = send_counts + ep;
  size_t* recv_counts = send_counts + 2 * ep;
  size_t* recv_displs = send_counts + 3 * ep;

  const float* send_buffer = src;
  if (send.contiguous) {
    for (int p = 0; p < ep; ++p) send_displs[p] = first_row(send, p, el) * w;
  } else {
    float* packed = scratch.alloc_f32(size_t(send.total_rows) * w);
    size_t at = 0;
    for (int p = 0; p < ep; ++p) {
      send_displs[p] = at * w;
      for (int e = 0; e < el; ++e) {
        const size_t n = size_t(send.rows[p * el + e]);
        backend.copy(packed + at * w, src + size_t(send.start[p * el + e]) * w, sizeof(float) * n * w);
        at += n;
      }
    }
    send_buffer = packed;
  }

  ExchangeTransfer transfer;
  transfer.backend_ = &backend;
  transfer.out_ = dst;
  transfer.ep_ = ep;
  transfer.local_experts_ = el;
  transfer.width_ = width;
  float* recv_buffer = dst;
  if (recv.contiguous) {
    for (int p = 0; p < ep; ++p) recv_displs[p] = first_row(recv, p, el) * w;
  } else {
    recv_buffer = scratch.alloc_f32(size_t(recv.total_rows) * w);
    size_t at = 0;
    for (int p = 0; p < ep; ++p) {
      recv_displs[p] = at * w;
      at += recv.peer_rows[p];
    }
    transfer.recv_side_ = &recv;
    transfer.packed_ = recv_buffer;
  }
  for (int p = 0; p < ep; ++p) {
    send_counts[p] = send.peer_rows[p] * w;
    recv_counts[p] = recv.peer_rows[p] * w;
  }
  transfer.work_ =
      group_.all_to_all_v_async(send_buffer, send_counts, send_displs, recv_buffer, recv_counts, recv_displs, DType::kF32);
  return transfer;
}

ExchangeTransfer ExpertExchange::dispatch_begin(int slice, const float* token_rows, float* expert_rows, int width,
                                                const ExpertExchangePlan& plan, Arena& scratch,
                                                Backend& backend) const {
  MOE4D_CHECK(slice >= 0 && slice < plan.chunks);
  const ExchangeSlice& s = plan.slices[slice];
  return move(s.token, s.expert, token_rows, expert_rows, width, plan, scratch, backend);
}

ExchangeTransfer ExpertExchange::combine_begin(int slice, const float* expert_rows, float* token_rows, int width,
                                               const ExpertExchangePlan& plan, Arena& scratch,
                                               Backend& backend) const {
  MOE4D_CHECK(slice >= 0 && slice < plan.chunks);
  const ExchangeSlice& s = plan.slices[slice];
  return move(s.expert, s.token, expert_rows, token_rows, width, plan, scratch, backend);
}

void ExpertExchange::dispatch(const float* token_rows, float* expert_rows, int width, const ExpertExchangePlan& plan,
                              Arena& scratch, Backend* backend) const {
  ExchangeTransferQueue transfers(plan.chunks, scratch);
  for (int c = 0; c < plan.chunks; ++c)
    transfers.push(dispatch_begin(c, token_rows, expert_rows, width, plan, scratch,
                                  backend ? *backend : thread_cpu_backend()));
}

void ExpertExchange::combine(const float* expert_rows, float* token_rows, int width, const ExpertExchangePlan& plan,
                             Arena& scratch, Backend* backend) const {
  ExchangeTransferQueue transfers(plan.chunks, scratch);
  for (int c = 0; c < plan.chunks; ++c)
    transfers.push(combine_begin(c, expert_rows, token_rows, width, plan, scratch,
                                 backend ? *backend : thread_cpu_backend()));
}

}  // namespace moe4d
