// tests/precision/precision_test_util.h — the fault injector the precision tests pass to the trainer
// (TrainerOptions::fault_injector), a real-text shard, and small helpers.
#pragma once

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "../data/fortunes_sample.h"
#include "data/byte_tokenizer.h"
#include "data/token_shard_writer.h"
#include "train/fault_injector.h"
#include "train/trainer.h"

namespace moe4d::test {

// Overwrites element 0 of every result of (weight `param`, `role`) with `value` during the chosen
// steps, on the ranks whose trainer was given it.
class InjectValue : public FaultInjector {
 public:
  InjectValue(std::set<int64_t> steps, std::string param, TensorRole role, float value)
      : steps_(std::move(steps)), param_(std::move(param)), role_(role), value_(value) {}
  // Every step from `first` on.
  static InjectValue from_step(int64_t first, std::string param, TensorRole role, float value) {
    InjectValue v({}, std::move(param), role, value);
    v.from_ = first;
    return v;
  }

  bool watches(int64_t step) const override { return steps_.count(step) > 0 || (from_ > 0 && step >= from_); }
  void on_result(int64_t step, const TensorSite& site, const ParamStore& params, float* data, int64_t n) override {
    if (site.role != role_ || params.info(site.param_id).name != param_ || n == 0) return;
    data[0] = value_;
    ++hits_[step];
  }
  int hits(int64_t step) const { return hits_.count(step) ? hits_.at(step) : 0; }

 private:
  std::set<int64_t> steps_;
  int64_t from_ = 0;
  std::string param_;
  TensorRole role_;
  float value_;
  std::map<int64_t, int> hits_;
};

// The embedded slice of the Debian fortunes corpus as a byte-level token shard (vocab 257).
inline std::string write_fortunes_shard(const std::string& path) {
  ByteTokenizer tokenizer;
  std::vector<int> ids;
  std::string_view text = kFortunesSample;
  int64_t documents = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find("\n%\n", start);
    if (end == std::string_view::npos) end = text.size();
    const std::vector<int> doc = tokenizer.encode(text.substr(start, end - start));
    ids.insert(ids.end(), doc.begin(), doc.end());
    ids.push_back(ByteTokenizer::kEosId);
    ++documents;
    start = end + 3;
  }
  write_token_shard(path, ids, ByteTokenizer::kVocabSize, "bytes", documents);
  return path;
}

inline bool same_bits(const std::map<std::string, FullTensor>& a, const std::map<std::string, FullTensor>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end() || t.data.bytes() != it->second.data.bytes()) return false;
    if (std::memcmp(t.data.data(), it->second.data.data(), t.data.bytes()) != 0) return false;
  }
  return true;
}

}  // namespace moe4d::test
