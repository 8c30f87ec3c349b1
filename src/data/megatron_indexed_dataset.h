// data/megatron_indexed_dataset.h — Megatron-LM's indexed dataset (.bin + .idx), read and written.
//
// Layout, as Megatron-Core's megatron/core/datasets/indexed_dataset.py (_IndexWriter,
// _IndexReader, IndexedDatasetBuilder) writes and reads it, all little-endian:
//   <prefix>.idx  9 bytes  "MMIDIDX\0\0"
//                 uint64   version (1)
//                 uint8    dtype code of the tokens: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
//                          6 float64, 7 float32, 8 uint16
//                 uint64   sequence count S
//                 uint64   document count D (the length of the document index array, so D - 1
//                          documents)
//                 int32[S] sequence lengths (tokens)
//                 int64[S] sequence pointers (byte offset of each sequence in the .bin)
//                 int64[D] document indices: 0, then after each document the number of sequences
//                          so far (a document may hold several sequences, e.g. sentences)
//                 int8[S]  sequence modes (multimodal datasets only; accepted and ignored)
//   <prefix>.bin  the sequences' tokens, back to back
// Megatron stores tokens as uint16 when the vocabulary has fewer than 65500 ids, else int32
// (DType.optimal_dtype); the writer follows that rule.
//
// Training reads the .bin as one stream of tokens in sequence order (as Megatron's GPTDataset
// concatenates documents); the reader therefore requires the pointers to lay the sequences out
// contiguously, as every Megatron writer does, and rejects anything else with a clear error.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/atomic_file.h"
#include "data/token_source.h"

namespace moe4d {

inline constexpr char kMegatronIndexHeader[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};

// `path`: the prefix, or the prefix's .bin or .idx.
std::string megatron_prefix(const std::string& path);

// Megatron dtype code for a vocabulary size: 8 (uint16) below 65500 ids, else 4 (int32).
int megatron_dtype_code_for_vocab(int64_t vocab_size);

class MegatronIndexedDataset final : public TokenSource {
 public:
  // Maps <prefix>.idx and <prefix>.bin and validates the index completely (header, version, dtype,
  // counts against the file size, document indices, contiguous pointers, .bin size). Ids are
  // checked on every read against [0, id_limit) (the model's vocab_size), since the format does
  // not record a vocabulary. Throws moe4d::Error naming the file and the field.
  MegatronIndexedDataset(const std::string& path, int64_t id_limit);
  ~MegatronIndexedDataset() override;
  MegatronIndexedDataset(const MegatronIndexedDataset&) = delete;
  MegatronIndexedDataset& operator=(const MegatronIndexedDataset&) = delete;

  int64_t num_tokens() const override { return num_tokens_; }
  int64_t num_documents() const override { return document_count_ - 1; }
  int64_t vocab_size() const override { return 0; }
  std::string name() const override { return prefix_ + ".bin"; }
  void read(int64_t offset, int64_t count, int32_t* out) const override;
  // The tokenizer named by the sidecar <prefix>.tokenizer.json that `moe4d prepare` writes
  // (data/tokenizer_record.h); empty for a dataset without one (Megatron's own).
  std::string tokenizer_spec() const override { return tokenizer_spec_; }

  int dtype_code() const { return dtype_code_; }
  int64_t num_sequences() const { return sequence_count_; }
  // The index arrays start at offset 34, so they are not aligned: read element by element.
  int32_t sequence_length(int64_t i) const;
  int64_t sequence_pointer(int64_t i) const;
  int64_t document_index(int64_t i) const;

 private:
  std::string prefix_;
  std::string tokenizer_spec_;
  int64_t id_limit_;
  int dtype_code_ = 0;
  size_t itemsize_ = 0;
  int64_t sequence_count_ = 0, document_count_ = 0, num_tokens_ = 0;
  const unsigned char* idx_ = nullptr;
  size_t idx_bytes_ = 0;
  const unsigned char* bin_ = nullptr;
  size_t bin_bytes_ = 0;
  size_t lengths_at_ = 0, pointers_at_ = 0, documents_at_ = 0;  // byte offsets in the .idx
};

// Writes one document per sequence (the prepare layout, like preprocess_data.py without sentence
// splitting). Both files are written atomically on finish(); an unfinished writer leaves nothing.
class MegatronIndexedDatasetWriter {
 public:
  // Throws moe4d::Error if the .bin cannot be created or vocab_size is not positive.
  MegatronIndexedDatasetWriter(const std::string& prefix, int64_t vocab_size);
  // Appends one document of ids (each checked against vocab_size) as one sequence.
  void add_document(std::span<const int> ids);
  void finish();
  int64_t num_tokens() const { return num_tokens_; }
  int64_t num_documents() const { return static_cast<int64_t>(lengths_.size()); }

 private:
  std::string prefix_;
  int64_t vocab_size_;
  int dtype_code_;
  AtomicFile bin_;
  std::vector<int32_t> lengths_;  // 4 bytes per document: the only state that grows
  std::vector<unsigned char> staging_;
  int64_t num_tokens_ = 0;
};

}  // namespace moe4d
