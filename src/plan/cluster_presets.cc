// plan/cluster_presets.cc — the built-in clusters. Each preset describes 8 nodes (64 devices, the
// size of the articles' example); `--devices` rescales any of them.
#include "plan/cluster_presets.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace moe4d {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;
constexpr double kTFLOPS = 1e12;
constexpr double kUs = 1e-6;

// Per-kernel fixed cost on the accelerators: the launch path of one kernel (driver + runtime, about
// 4-6 us measured per launch on a current NVIDIA GPU and driver; NVIDIA's "Getting Started with CUDA
// Graphs" describes the same per-kernel overhead) is hidden while the host runs ahead, but each kernel
// still ramps up and drains its waves and waits for the previous one; 4 us is the low end of that range.
constexpr double kKernelOverhead = 4e-6;
// Device-to-device speed variation: Sinha et al., "Not All GPUs Are Created Equal" (SC22), measured
// an average 8% performance spread (max 22%) between same-SKU GPUs across clusters of thousands of
// GPUs. Read as the range of ~4000 normally distributed devices (about 2 x 4.1 sigma), sigma ~ 1%.
constexpr double kSpeedVariation = 0.01;

// Accelerator GEMM efficiency: tensor/cube units need large tiles; fp32 (TF32 on NVIDIA) behaves alike.
std::vector<EfficiencyPoint> accelerator_curve(double top) {
  return {{128, 0.10 * top}, {512, 0.45 * top}, {1024, 0.70 * top}, {2048, 0.85 * top}, {4096, 0.95 * top},
          {8192, top}};
}

ClusterSpec atlas_800t_a2() {
  ClusterSpec c;
  c.name = "atlas-800t-a2";
  c.description = "Atlas 800T A2: 8 x Ascend 910B (64 GiB HBM), HCCS full mesh, 200GE RoCE per NPU";
  c.nodes = 8;
  c.devices_per_node = 8;
  c.device.name = "Ascend 910B";
  c.device.memory_bytes = 64 * kGiB;
  // ~300 TFLOPS in 16-bit (the articles' figure); fp32 runs at about a quarter of that.
  c.device.peak_flops = {75 * kTFLOPS, 300 * kTFLOPS, 300 * kTFLOPS};
  c.device.memory_bandwidth = 1600 * kGB;
  for (auto& curve : c.device.gemm_efficiency) curve = accelerator_curve(0.78);
  c.device.fused_attention = true;  // MindFormers' use_flash_attention (FlashAttentionScore)
  c.device.kernel_overhead = kKernelOverhead;  // no public per-operator figure for CANN: the GPUs' is assumed
  c.device.speed_variation = kSpeedVariation;  // likewise assumed as measured on GPUs
  // 7 HCCS links of 28 GB/s per direction per NPU: a full 8-card group sees 196 GB/s ("200 GB/s").
  c.intra = {LinkKind::kFullMesh, 28 * kGB, 2 * kUs};
  // RoCE v2 200 Gb/s per NPU; about an order of magnitude more latency than HCCS.
  c.inter = {25 * kGB, 20 * kUs};
  return c;
}

ClusterSpec dgx(const std::string& name, const std::string& description, const std::string& gpu, double memory_gib,
                double tf32_tflops, double bf16_tflops, double hbm_gbps, double nvswitch_gbps, double nic_gbps, int sms) {
  ClusterSpec c;
  c.name = name;
  c.description = description;
  c.nodes = 8;
  c.devices_per_node = 8;
  c.device.name = gpu;
  c.device.memory_bytes = memory_gib * kGiB;
  // fp32 training on these GPUs runs its GEMMs in TF32.
  c.device.peak_flops = {tf32_tflops * kTFLOPS, bf16_tflops * kTFLOPS, bf16_tflops * kTFLOPS};
  c.device.memory_bandwidth = hbm_gbps * kGB;
  for (auto& curve : c.device.gemm_efficiency) curve = accelerator_curve(0.80);
  c.device.fused_attention = true;  // Megatron-LM's default attention on these GPUs (Transformer Engine / cuDNN)
  c.device.kernel_overhead = kKernelOverhead;
  c.device.speed_variation = kSpeedVariation;
  c.device.compute_units = sms;  // A100 108 SMs, H100 / H200 SXM 132 (NVIDIA's architecture whitepapers)
  c.intra = {LinkKind::kSwitch, nvswitch_gbps * kGB, 3 * kUs};
  c.inter = {nic_gbps * kGB, 8 * kUs};
  return c;
}

}  // namespace

std::vector<std::string> cluster_preset_names() { return {"atlas-800t-a2", "dgx-a100", "dgx-h100", "dgx-h200"}; }

bool is_cluster_preset(const std::string& name) {
  for (const std::string& known : cluster_preset_names())
    if (known == name) return true;
  return false;
}

ClusterSpec cluster_preset(const std::string& name) {
  if (name == "atlas-800t-a2") return atlas_800t_a2();
  if (name == "dgx-a100")
    return dgx(name, "DGX A100: 8 x A100 80GB, NVSwitch (NVLink3), 8 x HDR 200 Gb/s", "A100-SXM4-80GB", 80, 156, 312,
               2039, 240, 25, 108);
  if (name == "dgx-h100")
    return dgx(name, "DGX H100: 8 x H100 80GB, NVSwitch (NVLink4), 8 x NDR 400 Gb/s", "H100-SXM5-80GB", 80, 494, 989,
               3350, 370, 50, 132);
  if (name == "dgx-h200")
    return dgx(name, "DGX H200: 8 x H200 141GB, NVSwitch (NVLink4), 8 x NDR 400 Gb/s", "H200-SXM5-141GB", 140, 494,
               989, 4800, 370, 50, 132);
  fail("unknown cluster preset '{}', expected a cluster YAML file or one of: {}", name,
       fmt::join(cluster_preset_names(), ", "));
}

}  // namespace moe4d
