// data/parallel_encoder.cc — a small ordered work queue around Tokenizer::encode.
#include "data/parallel_encoder.h"

#include "data/corpus_reader.h"

namespace moe4d {

ParallelEncoder::ParallelEncoder(const Tokenizer& tokenizer, int workers, bool check_utf8)
    : tokenizer_(tokenizer), workers_(std::max(workers, 1)), check_utf8_(check_utf8) {
  if (workers_ > 1)
    for (int i = 0; i < workers_; ++i) threads_.emplace_back([this] { work(); });
}

ParallelEncoder::~ParallelEncoder() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

EncodedBatch ParallelEncoder::encode(const std::vector<std::string>& documents) const {
  EncodedBatch batch;
  batch.ends.reserve(documents.size());
  const int eos = tokenizer_.eos_id();
  for (const std::string& d : documents) {
    std::vector<int> ids = tokenizer_.encode(d);
    batch.ids.insert(batch.ids.end(), ids.begin(), ids.end());
    batch.ids.push_back(eos);
    batch.ends.push_back(static_cast<int64_t>(batch.ids.size()));
    batch.text_bytes += static_cast<int64_t>(d.size());
    if (check_utf8_ && find_invalid_utf8(d) >= 0) ++batch.invalid_utf8;
  }
  return batch;
}

void ParallelEncoder::work() {
  for (;;) {
    std::pair<int64_t, std::vector<std::string>> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    EncodedBatch batch;
    std::exception_ptr error;
    try {
      batch = encode(job.second);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (error && !error_) error_ = error;
      done_.emplace(job.first, std::move(batch));
    }
    result_ready_.notify_all();
  }
}

void ParallelEncoder::submit(std::vector<std::string> documents) {
  if (workers_ == 1) {
    done_.emplace(submitted_++, encode(documents));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.emplace_back(submitted_++, std::move(documents));
  }
  work_ready_.notify_one();
}

bool ParallelEncoder::next(EncodedBatch& out, bool wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (returned_ == submitted_) return false;
  if (wait) result_ready_.wait(lock, [&] { return error_ || done_.count(returned_) > 0; });
  if (error_) std::rethrow_exception(error_);
  auto it = done_.find(returned_);
  if (it == done_.end()) return false;
  out = std::move(it->second);
  done_.erase(it);
  ++returned_;
  return true;
}

int64_t ParallelEncoder::in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return submitted_ - returned_;
}

}  // namespace moe4d
