// report/metrics_log.cc — parsing and validation of the metrics JSONL file.
#include "report/metrics_log.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace moe4d {

namespace {

using nlohmann::json;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const char* type_name(const json& value) {
  if (value.is_string()) return "a string";
  if (value.is_boolean()) return "a boolean";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  if (value.is_null()) return "null";
  return "a number";
}

// Where in the file we are, for messages: "runs/x/metrics.jsonl:12: ...".
struct Where {
  const std::string& path;
  int line;

  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
    throw Error(fmt::format("{}:{}: {}", path, line, fmt::format(format, std::forward<Args>(args)...)));
  }

  // `object[key]` as a number; NaN when absent or null. `name` is the key's full path for messages.
  double number(const json& object, const char* key, const std::string& name) const {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return kNaN;
    if (!it->is_number()) fail("\"{}\" must be a number, got {}", name, type_name(*it));
    return it->get<double>();
  }

  int64_t integer(const json& value, const std::string& name) const {
    if (value.is_number_integer()) return value.get<int64_t>();
    if (value.is_number_float()) {
      const double v = value.get<double>();
      if (std::isfinite(v) && v == std::floor(v) && std::abs(v) < 9e15) return static_cast<int64_t>(v);
    }
    fail("\"{}\" must be an integer, got {}", name, value.is_number() ? value.dump() : type_name(value));
  }

  const json* object(const json& parent, const char* key, const std::string& name) const {
    const auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) return nullptr;
    if (!it->is_object()) fail("\"{}\" must be an object, got {}", name, type_name(*it));
    return &*it;
  }

  const json* array(const json& parent, const char* key, const std::string& name) const {
    const auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) return nullptr;
    if (!it->is_array()) fail("\"{}\" must be an array, got {}", name, type_name(*it));
    return &*it;
  }
};

void read_time(const Where& at, const json& time, StepMetrics& m) {
  m.step_s = at.number(time, "step_s", "time.step_s");
  m.compute_s = at.number(time, "compute_s", "time.compute_s");
  m.comm_exposed_s = at.number(time, "comm_exposed_s", "time.comm_exposed_s");
  if (const json* ranks = at.array(time, "rank_compute_s", "time.rank_compute_s")) {
    for (size_t r = 0; r < ranks->size(); ++r) {
      const json& v = (*ranks)[r];
      if (!v.is_number() && !v.is_null())
        at.fail("\"time.rank_compute_s[{}]\" must be a number, got {}", r, type_name(v));
      m.rank_compute_s.push_back(v.is_null() ? kNaN : v.get<double>());
    }
  }
  if (const json* ranks = at.array(time, "rank_descheduled_s", "time.rank_descheduled_s")) {
    for (size_t r = 0; r < ranks->size(); ++r) {
      const json& v = (*ranks)[r];
      if (!v.is_number() && !v.is_null())
        at.fail("\"time.rank_descheduled_s[{}]\" must be a number, got {}", r, type_name(v));
      m.rank_descheduled_s.push_back(v.is_null() ? kNaN : v.get<double>());
    }
  }
  if (const json* comm = at.object(time, "comm", "time.comm")) {
    for (const auto& [group, stats] : comm->items()) {
      const std::string name = "time.comm." + group;
      if (!stats.is_object()) at.fail("\"{}\" must be an object, got {}", name, type_name(stats));
      const double exposed = at.number(stats, "exposed_s", name + ".exposed_s");
      if (!std::isnan(exposed)) m.comm_exposed_by_group[group] = exposed;
      const double waiting = at.number(stats, "waiting_s", name + ".waiting_s");
      const double transfer = at.number(stats, "transfer_s", name + ".transfer_s");
      if (!std::isnan(waiting) && !std::isnan(transfer)) {
        m.comm_waiting_by_group[group] = waiting;
        m.comm_transfer_by_group[group] = transfer;
      }
    }
  }
}

void read_moe(const Where& at, const json& moe, StepMetrics& m) {
  m.has_moe = true;
  m.aux_loss = at.number(moe, "aux_loss", "moe.aux_loss");
  m.z_loss = at.number(moe, "z_loss", "moe.z_loss");
  m.dropped_fraction = at.number(moe, "dropped_fraction", "moe.dropped_fraction");
  const json* layers = at.array(moe, "layers", "moe.layers");
  if (!layers) return;
  for (size_t i = 0; i < layers->size(); ++i) {
    const json& entry = (*layers)[i];
    const std::string name = fmt::format("moe.layers[{}]", i);
    if (!entry.is_object()) at.fail("\"{}\" must be an object, got {}", name, type_name(entry));
    if (!entry.contains("layer")) at.fail("\"{}\" has no \"layer\"", name);
    ExpertLoad load;
    load.layer = static_cast<int>(at.integer(entry["layer"], name + ".layer"));
    const json* tokens = at.array(entry, "tokens_per_expert", name + ".tokens_per_expert");
    if (!tokens) at.fail("\"{}\" has no \"tokens_per_expert\"", name);
    for (size_t e = 0; e < tokens->size(); ++e) {
      const json& t = (*tokens)[e];
      if (!t.is_number()) {
        at.fail("\"{}.tokens_per_expert[{}]\" must be a number, got {}", name, e, type_name(t));
      }
      load.tokens_per_expert.push_back(t.get<double>());
    }
    load.imbalance = at.number(entry, "imbalance", name + ".imbalance");
    if (std::isnan(load.imbalance) && !load.tokens_per_expert.empty()) {
      const auto& t = load.tokens_per_expert;
      double sum = 0;
      for (double v : t) sum += v;
      const double mean = sum / double(t.size());
      load.imbalance = mean > 0 ? *std::max_element(t.begin(), t.end()) / mean : kNaN;
    }
    m.expert_loads.push_back(std::move(load));
  }
  if (!moe.contains("replication")) return;
  const json* replicated = at.array(moe["replication"], "layers", "moe.replication.layers");
  if (!replicated) return;
  for (size_t i = 0; i < replicated->size(); ++i) {
    const json& entry = (*replicated)[i];
    const std::string name = fmt::format("moe.replication.layers[{}]", i);
    if (!entry.is_object() || !entry.contains("layer")) at.fail("\"{}\" must be an object with a \"layer\"", name);
    ReplicaLoad r;
    r.layer = static_cast<int>(at.integer(entry["layer"], name + ".layer"));
    r.max_mean = at.number(entry, "max_mean", name + ".max_mean");
    r.max_mean_without = at.number(entry, "max_mean_without", name + ".max_mean_without");
    if (entry.contains("moved_slots")) r.moved_slots = static_cast<int>(at.integer(entry["moved_slots"], name + ".moved_slots"));
    if (const json* ranks = at.array(entry, "next_placement", name + ".next_placement")) {
      for (size_t rank = 0; rank < ranks->size(); ++rank) {
        const std::string rank_name = fmt::format("{}.next_placement[{}]", name, rank);
        if (!(*ranks)[rank].is_array()) at.fail("\"{}\" must be an array, got {}", rank_name, type_name((*ranks)[rank]));
        std::vector<int> slots;
        for (const json& e : (*ranks)[rank]) slots.push_back(static_cast<int>(at.integer(e, rank_name)));
        r.placement.push_back(std::move(slots));
      }
    }
    m.replica_loads.push_back(std::move(r));
  }
}

void read_pipeline(const Where& at, const json& events, StepMetrics& m) {
  static const char* kKinds[] = {"forward", "backward", "send", "recv", "idle"};
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    const std::string name = fmt::format("pipeline_timeline[{}]", i);
    if (!e.is_object()) at.fail("\"{}\" must be an object, got {}", name, type_name(e));
    PipelineEvent event;
    if (!e.contains("stage")) at.fail("\"{}\" has no \"stage\"", name);
    event.stage = static_cast<int>(at.integer(e["stage"], name + ".stage"));
    if (event.stage < 0 || event.stage > 100000) at.fail("\"{}.stage\" is {}, expected 0 or more", name, event.stage);
    if (e.contains("micro_batch") && !e["micro_batch"].is_null()) {
      event.micro_batch = static_cast<int>(at.integer(e["micro_batch"], name + ".micro_batch"));
    }
    if (e.contains("chunk") && !e["chunk"].is_null()) {
      event.chunk = static_cast<int>(at.integer(e["chunk"], name + ".chunk"));
    }
    const auto kind = e.find("kind");
    if (kind == e.end() || !kind->is_string()) at.fail("\"{}.kind\" must be a string", name);
    event.kind = kind->get<std::string>();
    if (std::find(std::begin(kKinds), std::end(kKinds), event.kind) == std::end(kKinds)) {
      at.fail("\"{}.kind\" is \"{}\", expected forward, backward, send, recv or idle", name, event.kind);
    }
    event.start_s = at.number(e, "start_s", name + ".start_s");
    event.end_s = at.number(e, "end_s", name + ".end_s");
    if (std::isnan(event.start_s) || std::isnan(event.end_s)) at.fail("\"{}\" needs start_s and end_s", name);
    m.pipeline_timeline.push_back(std::move(event));
  }
}

void read_pipeline_summary(const Where& at, const json& pipeline, StepMetrics& m) {
  if (const auto it = pipeline.find("schedule"); it != pipeline.end() && !it->is_null()) {
    if (!it->is_string()) at.fail("\"pipeline.schedule\" must be a string, got {}", type_name(*it));
    m.pipeline_schedule = it->get<std::string>();
  }
  auto count = [&](const char* key) {
    const auto it = pipeline.find(key);
    return it == pipeline.end() || it->is_null() ? 0
                                                 : static_cast<int>(at.integer(*it, std::string("pipeline.") + key));
  };
  m.pipeline_stages = count("stages");
  m.pipeline_micro_batches = count("micro_batches");
  m.pipeline_chunks = count("virtual_pipeline");
  m.bubble_measured = at.number(pipeline, "bubble_measured", "pipeline.bubble_measured");
  m.bubble_formula = at.number(pipeline, "bubble_formula", "pipeline.bubble_formula");
}

StepMetrics read_record(const Where& at, const std::string& text) {
  json record;
  try {
    record = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number overflow
    std::string what = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " tag; the rest says where and why.
    if (const size_t tag_end = what.find("] "); tag_end != std::string::npos) what = what.substr(tag_end + 2);
    at.fail("not valid JSON: {}", what);
  }
  if (!record.is_object()) at.fail("expected one JSON object per line, got {}", type_name(record));
  if (!record.contains("step")) at.fail("record has no \"step\" (each line must be one optimizer step)");

  StepMetrics m;
  m.line = at.line;
  m.step = at.integer(record["step"], "step");
  m.loss = at.number(record, "loss", "loss");
  m.total_loss = at.number(record, "total_loss", "total_loss");
  m.val_loss = at.number(record, "val_loss", "val_loss");
  m.lr = at.number(record, "lr", "lr");
  m.grad_norm = at.number(record, "grad_norm", "grad_norm");
  m.tokens = at.number(record, "tokens", "tokens");
  m.tokens_per_s = at.number(record, "tokens_per_s", "tokens_per_s");
  m.model_tflops_per_s = at.number(record, "model_tflops_per_s", "model_tflops_per_s");
  if (const json* time = at.object(record, "time", "time")) read_time(at, *time, m);
  if (const json* moe = at.object(record, "moe", "moe")) read_moe(at, *moe, m);
  if (const json* hosts = at.array(record, "rank_hosts", "rank_hosts")) {
    for (size_t r = 0; r < hosts->size(); ++r) {
      if (!(*hosts)[r].is_string()) at.fail("\"rank_hosts[{}]\" must be a string, got {}", r, type_name((*hosts)[r]));
      m.rank_hosts.push_back((*hosts)[r].get<std::string>());
    }
  }
  if (const json* over = at.object(record, "oversubscription", "oversubscription"))
    if (const json* hosts = at.array(*over, "hosts", "oversubscription.hosts"))
      for (size_t i = 0; i < hosts->size(); ++i) {
        const json& h = (*hosts)[i];
        const std::string name = fmt::format("oversubscription.hosts[{}]", i);
        if (!h.is_object() || !h.contains("host") || !h["host"].is_string())
          at.fail("\"{}\" must be an object with a string \"host\", got {}", name, h.dump());
        auto count = [&](const char* key) {
          const double v = at.number(h, key, name + "." + key);
          return std::isfinite(v) ? int(v) : 0;
        };
        m.oversubscribed.push_back({h["host"].get<std::string>(), count("ranks"), count("threads"), count("cores")});
      }
  if (const json* memory = at.object(record, "memory", "memory"))
    if (const json* ranks = at.array(*memory, "per_rank", "memory.per_rank"))
      for (size_t r = 0; r < ranks->size(); ++r) {
        const json& rank = (*ranks)[r];
        const std::string name = fmt::format("memory.per_rank[{}]", r);
        if (!rank.is_object()) at.fail("\"{}\" must be an object, got {}", name, type_name(rank));
        auto bytes = [&](const char* key) {
          const double v = at.number(rank, key, name + "." + key);
          return std::isnan(v) ? 0.0 : v;
        };
        m.memory.push_back({bytes("params_bytes"), bytes("grads_bytes"), bytes("optimizer_bytes"),
                            bytes("activations_peak_bytes"), bytes("device_bytes")});
      }
  if (const json* pipeline = at.object(record, "pipeline", "pipeline")) read_pipeline_summary(at, *pipeline, m);
  if (const json* events = at.array(record, "pipeline_timeline", "pipeline_timeline")) read_pipeline(at, *events, m);
  return m;
}

}  // namespace

StepMetrics::StepMetrics()
    : loss(kNaN),
      total_loss(kNaN),
      val_loss(kNaN),
      lr(kNaN),
      grad_norm(kNaN),
      tokens(kNaN),
      tokens_per_s(kNaN),
      model_tflops_per_s(kNaN),
      step_s(kNaN),
      compute_s(kNaN),
      comm_exposed_s(kNaN),
      aux_loss(kNaN),
      z_loss(kNaN),
      dropped_fraction(kNaN),
      bubble_measured(kNaN),
      bubble_formula(kNaN) {}

MetricsLog read_metrics_log(const std::string& path) {
  if (std::filesystem::is_directory(path)) fail("metrics file {} is a directory, expected a JSONL file", path);
  std::ifstream in(path);
  if (!in) fail("cannot open metrics file {}: {}", path, std::strerror(errno));
  MetricsLog log;
  log.path = path;
  std::map<int, size_t> experts_of_layer;  // layer -> expert count
  std::map<int, int> layer_first_line;
  std::string text;
  for (int line = 1; std::getline(in, text); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    // A last line without its newline that does not parse is a write cut off by a kill: not a record.
    if (in.eof() && json::parse(text, nullptr, false).is_discarded()) break;
    const Where at{path, line};
    StepMetrics m = read_record(at, text);
    for (const ExpertLoad& load : m.expert_loads) {
      auto [it, inserted] = experts_of_layer.emplace(load.layer, load.tokens_per_expert.size());
      if (inserted) layer_first_line[load.layer] = line;
      if (it->second != load.tokens_per_expert.size()) {
        at.fail("MoE layer {} has {} experts here but {} at line {}", load.layer, load.tokens_per_expert.size(),
                it->second, layer_first_line[load.layer]);
      }
    }
    log.steps.push_back(std::move(m));
  }
  if (in.bad()) fail("cannot read metrics file {}: {}", path, std::strerror(errno));
  if (log.steps.empty()) fail("metrics file {} has no records (expected one JSON object per line)", path);
  // Stable sort keeps file order within a step; then the last record of each step survives.
  std::stable_sort(log.steps.begin(), log.steps.end(),
                   [](const StepMetrics& a, const StepMetrics& b) { return a.step < b.step; });
  std::vector<StepMetrics> unique;
  for (StepMetrics& m : log.steps) {
    if (!unique.empty() && unique.back().step == m.step) {
      unique.back() = std::move(m);
    } else {
      unique.push_back(std::move(m));
    }
  }
  log.steps = std::move(unique);
  return log;
}

std::string oversubscription_note(const MetricsLog& log) {
  const StepMetrics* first = nullptr;  // the newest run's first step that says
  for (const StepMetrics& m : log.steps)
    if (!m.oversubscribed.empty() || !m.rank_hosts.empty()) first = &m;
  if (!first || first->oversubscribed.empty()) return "";
  const OversubscribedHost& h = first->oversubscribed.front();
  std::string note = fmt::format("oversubscribed: {} rank threads on {} cores of host {}{}", h.threads, h.cores, h.host,
                                 first->oversubscribed.size() > 1
                                     ? fmt::format(" (and {} more hosts)", first->oversubscribed.size() - 1)
                                     : "");
  // The measured part: the ranks' run-queue wait over their step time, from that step on.
  double waited = 0, stepped = 0;
  for (const StepMetrics& m : log.steps) {
    if (m.step < first->step || !(m.step_s > 0)) continue;
    for (double d : m.rank_descheduled_s)
      if (std::isfinite(d)) {
        waited += d;
        stepped += m.step_s;
      }
  }
  if (stepped > 0)
    return note + fmt::format(": the ranks waited for a CPU {:.0f}% of their step time, so exposed communication is "
                              "mostly that, not waiting for a peer",
                              std::min(100.0, 100 * waited / stepped));
  return note + ": exposed communication is mostly waiting for a CPU, not for a peer";
}

}  // namespace moe4d
