// checkpoint/checkpoint_consolidate.h — `moe4d ckpt consolidate`: a sharded checkpoint (or a full
// one) rewritten as one full-tensor checkpoint: model.safetensors, optimizer.safetensors,
// state.json (its "format" set to "full"), the tokenizer.
//
// Streaming: every tensor is read piece by piece (checkpoint/sharded_index.h) through one buffer of
// `buffer_bytes` and written on, so the memory held is that buffer plus the headers, however large
// the model or any one tensor. The output is an ordinary checkpoint (atomic, checksummed, with
// `latest`) under its own root. One process; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace moe4d {

struct ConsolidateResult {
  std::string path;  // the step directory written
  size_t tensors = 0;
  uint64_t bytes = 0;  // of the tensor files
};

// Verifies `source` (a step directory, or a root whose `latest` is followed) and writes it as a
// full-tensor checkpoint of the same step under `output_root`, which must not be the source's root.
ConsolidateResult consolidate_checkpoint(const std::string& source, const std::string& output_root,
                                         size_t buffer_bytes = size_t{64} << 20);

}  // namespace moe4d
