// plan/replication_model.h — what redundant expert slots (moe.redundant_experts = R,
// docs/expert_replication.md) do to a layout, for `moe4d plan --expert-imbalance F --redundant-experts R`.
//
// The planner knows the routing only as F, the busiest EP device's rows over the balanced share. It is
// modelled as one hot expert: the other experts of the busiest device at the mean, every other expert
// at the same lower load, the hot one making up the rest (capped at T, a token picks an expert once).
// The real placement algorithm (expert_placement/expert_placement.h) then places R replicas over
// the EP group, and the busiest device's share after replication is read off its expected rows.
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.h"
#include "plan/layout.h"
#include "plan/training_setup.h"

namespace moe4d {

// The busiest EP device's rows over the balanced share with the replicas (== F when R == 0 or ep == 1).
double replicated_imbalance(const ModelConfig& model, double imbalance, int ep, int redundant);
// The hot-expert load (integers, 1000 = the mean expert load) that gives share F at EP size ep.
std::vector<int64_t> hot_expert_load(const ModelConfig& model, double imbalance, int ep);
// The same routing on another EP size without replicas: the busiest device's share there.
double imbalance_at_ep(const ModelConfig& model, double imbalance, int ep, int other_ep);
// Why R cannot run on this EP size ("" when it can, and always with R == 0).
std::string replication_problem(const ModelConfig& model, int ep, int redundant);
// Per device and MoE layer: bytes of the replica slots' weights (fp32) — the same again for their
// gradient buffer — and the bytes moved per micro-batch, averaged over the step: one
// weight fetch per step, the gradients returned once per step (ZeRO 0/1) or once per micro-batch
// (ZeRO-2/3, which reduce every micro-batch).
double replica_weight_bytes(const ModelConfig& model, const Layout& layout, int redundant);
double replica_transfer_bytes(const ModelConfig& model, const Layout& layout, int redundant);
// The most replica slots elsewhere that hold copies of one device's home experts, under the
// hot-expert load (the initial placement when F <= 1): that device stages as many slots' weights
// to send and gradients to receive.
int replica_staging_slots(const ModelConfig& model, double imbalance, int ep, int redundant);

}  // namespace moe4d
