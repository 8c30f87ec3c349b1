#include "trace/tensorboard_sink.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

namespace moe4d {
namespace {

void add_if_number(std::vector<std::pair<std::string, float>>& out, const std::string& tag, const nlohmann::json& obj,
                   const char* key) {
  if (obj.is_object() && obj.contains(key) && obj[key].is_number()) out.emplace_back(tag, obj[key].get<float>());
}

}  // namespace

std::vector<std::pair<std::string, float>> tensorboard_scalars(const nlohmann::json& r) {
  std::vector<std::pair<std::string, float>> out;
  for (const char* key : {"loss", "total_loss", "val_loss", "lr", "grad_norm", "loss_scale", "tokens_per_s",
                          "model_tflops_per_s", "mfu"})
    add_if_number(out, key, r, key);
  if (r.contains("time") && r["time"].is_object()) {
    const nlohmann::json& t = r["time"];
    add_if_number(out, "time/step_s", t, "step_s");
    const double step = t.value("step_s", 0.0);
    if (step > 0 && t.contains("comm") && t["comm"].is_object()) {
      for (const auto& [group, c] : t["comm"].items()) {
        if (!c.is_object()) continue;
        for (const char* field : {"exposed_s", "waiting_s", "transfer_s"}) {
          if (!c.contains(field) || !c[field].is_number()) continue;
          const std::string name = std::string(field) == "exposed_s" ? "share"
                                   : std::string(field) == "waiting_s" ? "waiting_share"
                                                                        : "transfer_share";
          out.emplace_back(fmt::format("comm/{}/{}", group, name), float(c[field].get<double>() / step));
        }
      }
    }
  }
  if (r.contains("moe") && r["moe"].is_object()) {
    const nlohmann::json& m = r["moe"];
    for (const char* key : {"aux_loss", "z_loss", "dropped_fraction"}) add_if_number(out, fmt::format("moe/{}", key), m, key);
    if (m.contains("layers") && m["layers"].is_array() && !m["layers"].empty()) {
      double worst = 0;
      for (const nlohmann::json& layer : m["layers"]) worst = std::max(worst, layer.value("imbalance", 0.0));
      out.emplace_back("moe/imbalance_max", float(worst));
      for (const nlohmann::json& layer : m["layers"])
        out.emplace_back(fmt::format("moe/layer{}/imbalance", layer.value("layer", -1)),
                         float(layer.value("imbalance", 0.0)));
    }
  }
  if (r.contains("memory") && r["memory"].contains("per_rank") && r["memory"]["per_rank"].is_array()) {
    const nlohmann::json& ranks = r["memory"]["per_rank"];
    for (size_t i = 0; i < ranks.size(); ++i)
      for (const char* key : {"params_bytes", "grads_bytes", "optimizer_bytes", "activations_peak_bytes", "peak_bytes",
                              "rss_peak_bytes"})
        add_if_number(out, fmt::format("memory/rank{}/{}", i, key), ranks[i], key);
  }
  return out;
}

void TensorBoardSink::on_step(const nlohmann::json& record) {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  writer_.add_scalars(record.value("step", int64_t{0}), now, tensorboard_scalars(record));
}

}  // namespace moe4d
