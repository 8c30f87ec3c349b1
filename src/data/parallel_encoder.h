// data/parallel_encoder.h — tokenizes batches of documents on worker threads, in order.
//
// `prepare` reads and splits documents on its own thread and hands them over in batches; workers
// encode them (each document followed by the end-of-sequence id) and the results come back in
// submission order, so the output does not depend on the number of workers. At most
// 2 x workers batches are in flight: the caller takes a result (next with wait) while full(),
// which bounds memory.
// workers == 1 encodes inline on the caller's thread.
//
// One thread calls submit() and next(); the Tokenizer must be safe for concurrent const calls
// (data/tokenizer.h guarantees it).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/tokenizer.h"

namespace moe4d {

struct EncodedBatch {
  std::vector<int> ids;          // the documents' ids back to back, each ending in eos
  std::vector<int64_t> ends;     // end offset in `ids` of each document
  int64_t invalid_utf8 = 0;      // documents with invalid UTF-8 (sentencepiece replaces those bytes)
  int64_t text_bytes = 0;        // bytes of the documents
};

class ParallelEncoder {
 public:
  ParallelEncoder(const Tokenizer& tokenizer, int workers, bool check_utf8);
  ~ParallelEncoder();
  ParallelEncoder(const ParallelEncoder&) = delete;
  ParallelEncoder& operator=(const ParallelEncoder&) = delete;

  void submit(std::vector<std::string> documents);
  // The oldest unreturned batch: blocks for it if `wait`, else returns false when it is not ready
  // (or nothing is in flight). Rethrows an exception a worker hit.
  bool next(EncodedBatch& out, bool wait);
  int64_t in_flight() const;
  bool full() const { return in_flight() >= 2 * int64_t(workers_); }

 private:
  EncodedBatch encode(const std::vector<std::string>& documents) const;
  void work();

  const Tokenizer& tokenizer_;
  const int workers_;
  const bool check_utf8_;
  mutable std::mutex mutex_;
  std::condition_variable work_ready_, result_ready_;
  std::deque<std::pair<int64_t, std::vector<std::string>>> queue_;
  std::map<int64_t, EncodedBatch> done_;
  std::exception_ptr error_;
  int64_t submitted_ = 0, returned_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace moe4d
