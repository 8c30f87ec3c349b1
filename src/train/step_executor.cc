// train/step_executor.cc — schedule-driven micro-batch execution, stage-to-stage messages, and the
// per-step pipeline measurements (see the header).
#include "train/step_executor.h"

#include <algorithm>
#include <chrono>

#include "backend/backend.h"
#include "config/config_names.h"
#include "core/check.h"
#include "core/error.h"
#include "core/log.h"
#include "model/context_parallel.h"

namespace moe4d {
namespace {

using Clock = std::chrono::steady_clock;

// Receives are posted for the action being run and the next one, so a message can arrive while the
// current action computes, without holding a buffer per micro-batch.
constexpr size_t kReceiveLookahead = 2;
// Tags: (direction, receiving chunk, micro-batch mod kTagSlots). Equal tags between two ranks match in
// send order (MPI's non-overtaking rule) and both sides handle a chunk's micro-batches in increasing
// order, so the modulo never pairs the wrong messages; it only keeps tags below MPI's guaranteed
// upper bound of 32767 however many micro-batches a step or an evaluation has.
constexpr int kTagSlots = 64;
constexpr int kMpiMinTagUpperBound = 32767;

const char* recompute_name(RecomputeGranularity g) {
  return config_names::name_of(config_names::kRecomputeNames, g).data();  // a string literal
}

}  // namespace

// One (micro-batch, chunk) in flight: its saved activations and, on the stages that read data, its
// tokens and targets (the embedding and the head use them again in backward).
struct StepExecutor::Slot {
  MicroBatchState state;
  std::vector<int> tokens, targets;
  int micro_batch = -1;  // -1: free
  int chunk = -1;
};

StepExecutor::StepExecutor(const Config& config, ParallelContext& pc, Transformer& model, ParamStore& params,
                           int micro_batch_size)
    : config_(config),
      pc_(pc),
      model_(model),
      params_(params),
      micro_batch_size_(micro_batch_size),
      stage_(pc.coord.pp),
      stages_(pc.pp_size()),
      chunks_(model.num_chunks()),
      // This rank's share of each sequence under context parallelism (model/context_parallel.h).
      seq_(config.model.seq_length / pc.cp_size()),
      // Stage-to-stage messages carry the residual stream: 1/tp of it per rank under sequence parallelism.
      width_(size_t(micro_batch_size) * seq_ * config.model.hidden_size /
             (config.parallel.sequence_parallel ? pc.tp_size() : 1)) {
  const ParallelConfig& par = config.parallel;
  check_pipeline_micro_batches(par);
  if (2 * chunks_ * kTagSlots > kMpiMinTagUpperBound)
    fail("parallel_config.virtual_pipeline {} is too large: stage-to-stage message tags would exceed MPI's "
         "guaranteed tag range ({}); use at most {} chunks per stage",
         chunks_, kMpiMinTagUpperBound, kMpiMinTagUpperBound / (2 * kTagSlots));
  if (pc.rank == 0)
    if (auto warning = pipeline_bubble_warning(par)) log_warn("{}", *warning);
  // The model was built from the same partition (Trainer::my_chunks), so the chunk ends must sit
  // where the schedule's virtual stages put them.
  for (int c = 0; c < chunks_; ++c) {
    MOE4D_CHECK_EQ(model.chunk(c).has_embedding, virtual_stage(c) == 0);
    MOE4D_CHECK_EQ(model.chunk(c).has_head, virtual_stage(c) == stages_ * chunks_ - 1);
  }
  actions_ = pipeline_actions(par.pipeline_schedule, stages_, par.micro_batch_num, chunks_, stage_);
  last_backward_.assign(chunks_, -1);
  for (size_t i = 0; i < actions_.size(); ++i)
    if (actions_[i].op == PipelineOp::kBackward) last_backward_[actions_[i].chunk] = static_cast<int>(i);
}

StepExecutor::~StepExecutor() = default;

double StepExecutor::train(const MicroBatchFill& fill, float grad_scale, std::vector<MoeLayerStats>* stats,
                           GradSync& sync) {
  trace_ = StepTrace{};
  sync.begin();
  // The stages enter the schedule together, so that their timestamps share an origin and the bubble
  // is measured from the pipeline's start (the optimizer step before it takes longer on some stages;
  // a late stage would otherwise hide part of its warm-up wait).
  if (stages_ > 1) pc_.pp->barrier();
  const Pass pass{fill, pc_.dense_replica() * config_.parallel.micro_batch_num, grad_scale,
                  config_.parallel.recompute, stats, &sync};
  const double ce_sum = run(actions_, pass, trace_);
  lifetime_peak_ = std::max(lifetime_peak_, trace_.peak_activation_bytes);
  return ce_sum;
}

double StepExecutor::evaluate(const MicroBatchFill& fill, int first, int count) {
  StepTrace trace;
  const Pass pass{fill, first, 1.0f, RecomputeGranularity::kNone, nullptr, nullptr};
  const double ce_sum = run(forward_only_actions(count, chunks_), pass, trace);
  lifetime_peak_ = std::max(lifetime_peak_, trace.peak_activation_bytes);
  return ce_sum;
}

double StepExecutor::run(const std::vector<PipelineAction>& actions, const Pass& pass, StepTrace& trace) {
  const auto t0 = Clock::now();
  trace.origin = t0;
  auto since_start = [t0] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  scratch_.reset_peak();
  transfer_peak_ = buffers_.size() - free_buffers_.size();

  std::vector<std::optional<Transfer>> received(actions.size());
  size_t posted = 0;  // actions [0, posted) have their receive posted, if they need one
  double ce_sum = 0;
  for (size_t i = 0; i < actions.size(); ++i) {
    for (; posted < std::min(actions.size(), i + kReceiveLookahead); ++posted)
      received[posted] = post_receive(actions[posted]);
    const PipelineAction& a = actions[i];
    const float* input = nullptr;
    if (received[i]) {
      const double wait_start = since_start();
      received[i]->work->wait();
      trace.recv_wait_s += since_start() - wait_start;
      input = buffers_[received[i]->buffer].f32();
    }
    const double start = since_start();
    if (a.op == PipelineOp::kForward)
      ce_sum += forward(a, input, pass, trace);
    else
      backward(a, input, pass, last_backward_[a.chunk] == static_cast<int>(i), trace);
    if (received[i]) release_buffer(received[i]->buffer);
    const double end = since_start();
    trace.events.push_back({a, start, end});
    trace.busy_s += end - start;
    reap_sends(/*wait_all=*/false);
  }
  trace.span_s = since_start();
  reap_sends(/*wait_all=*/true);
  trace.peak_scratch_bytes = scratch_.peak_bytes();
  lifetime_scratch_peak_ = std::max(lifetime_scratch_peak_, trace.peak_scratch_bytes);
  trace.peak_transfer_bytes = transfer_peak_ * width_ * sizeof(float);
  return ce_sum;
}

double StepExecutor::forward(const PipelineAction& a, const float* input, const Pass& pass, StepTrace& trace) {
  const ChunkSpec& spec = model_.chunk(a.chunk);
  Slot& slot = acquire_slot(a.micro_batch, a.chunk);
  if (spec.has_embedding || spec.has_head) {  // whole sequences; this CP rank keeps its chunks
    pass.fill(pass.first_index + a.micro_batch, slot.tokens.data(), slot.targets.data());
    for (int* t : {slot.tokens.data(), slot.targets.data()})
      cp_keep_local_tokens(t, micro_batch_size_, config_.model.seq_length, pc_.cp_size(), pc_.cp_rank());
  }
  BlockContext ctx{pc_,         params_,    config_.model,  model_.rope(), slot.state.arena, scratch_,
                   micro_batch_size_, seq_, pass.grad_scale, pass.recompute, pass.stats};
  ctx.numerics = numerics_;
  ctx.sequence_parallel = config_.parallel.sequence_parallel;
  HeadOutput head;
  slot.state.arena.reset_peak();
  model_.forward(a.chunk, slot.tokens.data(), slot.targets.data(), input, slot.state, ctx, &head);
  if (!spec.has_head) {
    const int next = virtual_stage(a.chunk) + 1;
    const int buffer = acquire_buffer();
    ctx.backend().copy(buffers_[buffer].f32(), slot.state.residual.back(), sizeof(float) * width_);
    send(buffer, next % stages_, message_tag(false, next / stages_, a.micro_batch));
  }
  note_memory(slot, trace, /*after_forward=*/true);
  if (!pass.sync) {  // evaluation keeps nothing for a backward
    slot.state.arena.reset();
    slot.micro_batch = slot.chunk = -1;
  }
  return head.tokens > 0 ? head.loss_sum / head.tokens : 0.0;
}

void StepExecutor::backward(const PipelineAction& a, const float* dx_out, const Pass& pass, bool last_of_chunk,
                            StepTrace& trace) {
  const ChunkSpec& spec = model_.chunk(a.chunk);
  Slot& slot = find_slot(a.micro_batch, a.chunk);
  int buffer = -1;
  float* dx_in = nullptr;
  if (!spec.has_embedding) {
    buffer = acquire_buffer();
    dx_in = buffers_[buffer].f32();
  }
  BlockContext ctx{pc_,         params_,    config_.model,  model_.rope(), slot.state.arena, scratch_,
                   micro_batch_size_, seq_, pass.grad_scale, pass.recompute, pass.stats};
  ctx.numerics = numerics_;
  ctx.sequence_parallel = config_.parallel.sequence_parallel;
  ctx.grads_final = last_of_chunk || config_.parallel.zero_stage >= 2;
  GradSync* sync = pass.sync;
  GradReadyFn on_ready;
  if (last_of_chunk) on_ready = [sync](int layer) { sync->on_layer_ready(layer); };
  slot.state.arena.reset_peak();
  model_.backward(a.chunk, dx_out, dx_in, slot.state, ctx, on_ready);
  note_memory(slot, trace, /*after_forward=*/false);
  slot.micro_batch = slot.chunk = -1;
  if (dx_in) {
    const int previous = virtual_stage(a.chunk) - 1;
    send(buffer, previous % stages_, message_tag(true, previous / stages_, a.micro_batch));
  }
}

std::optional<StepExecutor::Transfer> StepExecutor::post_receive(const PipelineAction& a) {
  const ChunkSpec& spec = model_.chunk(a.chunk);
  const int vs = virtual_stage(a.chunk);
  int peer;
  bool gradient;
  if (a.op == PipelineOp::kForward && !spec.has_embedding) {
    peer = (vs - 1) % stages_;
    gradient = false;
  } else if (a.op == PipelineOp::kBackward && !spec.has_head) {
    peer = (vs + 1) % stages_;
    gradient = true;
  } else {
    return std::nullopt;
  }
  const int buffer = acquire_buffer();
  return Transfer{pc_.pp->recv_async(buffers_[buffer].f32(), width_, DType::kF32, peer,
                                     message_tag(gradient, a.chunk, a.micro_batch)),
                  buffer};
}

void StepExecutor::send(int buffer, int peer, int tag) {
  sends_.push_back({pc_.pp->send_async(buffers_[buffer].f32(), width_, DType::kF32, peer, tag), buffer});
}

int StepExecutor::message_tag(bool gradient, int receiver_chunk, int micro_batch) const {
  return ((gradient ? chunks_ : 0) + receiver_chunk) * kTagSlots + micro_batch % kTagSlots;
}

StepExecutor::Slot& StepExecutor::acquire_slot(int micro_batch, int chunk) {
  Slot* free = nullptr;
  for (auto& s : slots_) {
    MOE4D_CHECK_MSG(!(s->micro_batch == micro_batch && s->chunk == chunk), "micro-batch {} chunk {} is already in "
                    "flight", micro_batch, chunk);
    if (!free && s->micro_batch < 0) free = s.get();
  }
  if (!free) {
    slots_.push_back(std::make_unique<Slot>());
    free = slots_.back().get();
    const size_t tokens = size_t(micro_batch_size_) * config_.model.seq_length;
    free->tokens.resize(tokens);
    free->targets.resize(tokens);
  }
  free->micro_batch = micro_batch;
  free->chunk = chunk;
  return *free;
}

StepExecutor::Slot& StepExecutor::find_slot(int micro_batch, int chunk) {
  for (auto& s : slots_)
    if (s->micro_batch == micro_batch && s->chunk == chunk) return *s;
  MOE4D_CHECK_MSG(false, "backward of micro-batch {} chunk {} before its forward", micro_batch, chunk);
  return *slots_.front();
}

// Called right after a forward or backward of `active` (whose arena peak was reset before it ran):
// the activations held at this pass's high point are the other in-flight micro-batches' plus
// `active`'s peak during the pass.
void StepExecutor::note_memory(const Slot& active, StepTrace& trace, bool after_forward) {
  size_t others = 0;
  int live = 0;
  for (const auto& s : slots_) {
    if (s->micro_batch < 0) continue;
    ++live;
    if (s.get() != &active) others += s->state.arena.used_bytes();
  }
  const size_t held = active.state.arena.peak_bytes();
  trace.peak_activation_bytes = std::max(trace.peak_activation_bytes, others + held);
  trace.peak_in_flight = std::max(trace.peak_in_flight, live);
  if (after_forward) trace.micro_batch_bytes = std::max(trace.micro_batch_bytes, held);
}

int StepExecutor::acquire_buffer() {
  int index;
  if (free_buffers_.empty()) {
    buffers_.emplace_back(width_ * sizeof(float));
    index = static_cast<int>(buffers_.size()) - 1;
  } else {
    index = free_buffers_.back();
    free_buffers_.pop_back();
  }
  transfer_peak_ = std::max(transfer_peak_, buffers_.size() - free_buffers_.size());
  return index;
}

void StepExecutor::reap_sends(bool wait_all) {
  auto done = [&](Transfer& t) {
    if (wait_all)
      t.work->wait();
    else if (!t.work->test())
      return false;
    release_buffer(t.buffer);
    return true;
  };
  sends_.erase(std::remove_if(sends_.begin(), sends_.end(), done), sends_.end());
}

bool StepExecutor::records_timeline(int64_t step, int64_t total_steps) {
  return step == 2 || step % 100 == 0 || step == total_steps;
}

void StepExecutor::gather_step_metrics(nlohmann::json& record, int64_t step, int64_t total_steps) const {
  const ParallelConfig& par = config_.parallel;
  const int m = par.micro_batch_num;
  const bool with_timeline = records_timeline(step, total_steps);
  // Every stage runs 2 x m x v actions, so each contributes the same number of values: the named
  // scalars of its StepTrace, the mean forward and backward time of each chunk, then (timeline steps)
  // 5 values per action.
  enum Scalar : size_t {
    kBusy, kSpan, kRecvWait, kPeakActivation, kMicroBatchBytes, kPeakInFlight, kPeakScratch, kPeakTransfer, kScalars
  };
  constexpr size_t kPerEvent = 5;
  const size_t summary = kScalars + 2 * size_t(chunks_);
  const size_t events = with_timeline ? trace_.events.size() : 0;
  MOE4D_CHECK_EQ(trace_.events.size(), size_t(2) * m * chunks_);
  std::vector<double> mine(summary, 0.0);
  mine[kBusy] = trace_.busy_s;
  mine[kSpan] = trace_.span_s;
  mine[kRecvWait] = trace_.recv_wait_s;
  mine[kPeakActivation] = double(trace_.peak_activation_bytes);
  mine[kMicroBatchBytes] = double(trace_.micro_batch_bytes);
  mine[kPeakInFlight] = double(trace_.peak_in_flight);
  mine[kPeakScratch] = double(trace_.peak_scratch_bytes);
  mine[kPeakTransfer] = double(trace_.peak_transfer_bytes);
  for (const StepTrace::Event& ev : trace_.events)
    mine[kScalars + size_t(ev.action.op == PipelineOp::kBackward) * chunks_ + ev.action.chunk] +=
        (ev.end_s - ev.start_s) / m;
  for (size_t e = 0; e < events; ++e) {
    const StepTrace::Event& ev = trace_.events[e];
    mine.insert(mine.end(), {ev.action.op == PipelineOp::kForward ? 0.0 : 1.0, double(ev.action.micro_batch),
                             double(ev.action.chunk), ev.start_s, ev.end_s});
  }
  MOE4D_CHECK_EQ(mine.size(), summary + kPerEvent * events);
  const size_t n = mine.size();
  std::vector<double> all(n * stages_);
  pc_.pp->all_gather(mine.data(), all.data(), n, DType::kF64);

  auto column = [&](Scalar k) {
    std::vector<double> v(stages_);
    for (int s = 0; s < stages_; ++s) v[s] = all[s * n + k];
    return v;
  };
  auto as_int = [](std::vector<double> v) {
    std::vector<int64_t> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<int64_t>(v[i]);
    return out;
  };
  auto chunk_time = [&](int s, PipelineOp op, int chunk) {
    return all[s * n + kScalars + size_t(op == PipelineOp::kBackward) * chunks_ + chunk];
  };
  const std::vector<double> busy = column(kBusy), spans = column(kSpan);
  // The pipeline's step is as long as its slowest stage; every stage is idle for the rest of it.
  const double span = *std::max_element(spans.begin(), spans.end());
  std::vector<double> idle(stages_);
  double idle_sum = 0;
  for (int s = 0; s < stages_; ++s) idle_sum += idle[s] = std::max(0.0, span - busy[s]);
  // The same schedule replayed with this step's measured per-chunk times and free communication: the
  // bubble that unequal stages alone explain.
  std::vector<std::vector<PipelineAction>> schedules;
  for (int s = 0; s < stages_; ++s)
    schedules.push_back(pipeline_actions(par.pipeline_schedule, stages_, m, chunks_, s));
  const PipelineSimulation replay = simulate_pipeline(
      schedules, chunks_, [&](int s, const PipelineAction& a) { return chunk_time(s, a.op, a.chunk); });
  nlohmann::json forward_s = nlohmann::json::array(), backward_s = nlohmann::json::array();
  for (int s = 0; s < stages_; ++s) {
    std::vector<double> f(chunks_), b(chunks_);
    for (int c = 0; c < chunks_; ++c) {
      f[c] = chunk_time(s, PipelineOp::kForward, c);
      b[c] = chunk_time(s, PipelineOp::kBackward, c);
    }
    forward_s.push_back(f);
    backward_s.push_back(b);
  }
  record["pipeline"] = {
      {"schedule", pipeline_schedule_name(par.pipeline_schedule)},
      {"stages", stages_},
      {"micro_batches", m},
      {"virtual_pipeline", chunks_},
      {"recompute", recompute_name(par.recompute)},
      {"span_s", span},
      {"busy_s", busy},
      {"idle_s", idle},
      {"recv_wait_s", column(kRecvWait)},
      {"forward_s", forward_s},
      {"backward_s", backward_s},
      {"bubble_measured", span > 0 ? idle_sum / (span * stages_) : 0.0},
      {"bubble_formula", pipeline_bubble_formula(stages_, m, chunks_)},
      {"bubble_replayed", replay.bubble()},
      {"peak_activation_bytes", as_int(column(kPeakActivation))},
      {"micro_batch_activation_bytes", as_int(column(kMicroBatchBytes))},
      {"peak_in_flight", as_int(column(kPeakInFlight))},
      {"peak_scratch_bytes", as_int(column(kPeakScratch))},
      {"peak_transfer_bytes", as_int(column(kPeakTransfer))}};
  if (!with_timeline) return;
  nlohmann::json timeline = nlohmann::json::array();
  for (int s = 0; s < stages_; ++s)
    for (size_t e = 0; e < events; ++e) {
      const double* v = &all[s * n + summary + e * kPerEvent];
      timeline.push_back({{"stage", s},
                          {"chunk", static_cast<int>(v[2])},
                          {"micro_batch", static_cast<int>(v[1])},
                          {"kind", v[0] == 0.0 ? "forward" : "backward"},
                          {"start_s", v[3]},
                          {"end_s", v[4]}});
    }
  record["pipeline_timeline"] = std::move(timeline);
}

}  // namespace moe4d
