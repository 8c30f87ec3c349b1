// model/tensor_inspector.cc — names of tensor sites.
#include "model/tensor_inspector.h"

#include <string_view>

#include <fmt/format.h>

#include "model/param_store.h"

namespace moe4d {

std::string describe_tensor_site(const TensorSite& site, const ParamStore& params) {
  const ParamInfo& info = params.info(site.param_id);
  // Tensors inside a transformer layer are prefixed with it ("layers.2 attention output"); the
  // head's ("logits") need no prefix.
  const std::string_view name = info.name;
  const bool in_layer = name.substr(0, 7) == "layers.";
  const std::string prefix = in_layer ? fmt::format("layers.{} ", info.layer) : std::string();
  const std::string expert = site.expert >= 0 ? fmt::format(" {}", site.expert) : std::string();
  const std::string weight = site.expert >= 0 ? fmt::format("{}[{}]", info.name, site.expert) : info.name;
  // Expert tensors: "layers.1 expert 3 output" from the label "expert output".
  auto label = [&](const char* text) {
    std::string s = text;
    if (site.expert >= 0 && s.rfind("expert", 0) == 0) s.insert(6, expert);
    return prefix + s;
  };
  switch (site.role) {
    case TensorRole::kForwardInput:
      return fmt::format("{} (forward input of {})", label(site.labels.input), weight);
    case TensorRole::kForwardOutput:
      return fmt::format("{} (forward output of {})", label(site.labels.output), weight);
    case TensorRole::kOutputGradient:
      return fmt::format("gradient of {} (backward input of {})", label(site.labels.output), weight);
    case TensorRole::kInputGradient:
      return fmt::format("gradient of {} (backward output of {})", label(site.labels.input), weight);
    case TensorRole::kWeightGradient:
      return fmt::format("{} gradient", weight);
  }
  return weight;
}

}  // namespace moe4d
