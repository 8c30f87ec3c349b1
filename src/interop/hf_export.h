// interop/hf_export.h — a moe4d checkpoint as a Hugging Face model folder, and back.
//
// Export writes, into a new (or empty) directory, atomically (built under a temporary name, then
// renamed):
//   config.json                    the architecture of interop/hf_architecture.h, eos_token_id =
//                                  moe4d's end-of-document id, the padded vocab_size kept and the
//                                  tokenizer's real size as tokenizer_vocab_size
//   generation_config.json         eos_token_id (HF's default 2 would be wrong for moe4d tokenizers)
//   model.safetensors              F32 (or BF16 with dtype kBF16), metadata {"format": "pt"}; above
//                                  max_shard_bytes instead
//   model-0000i-of-0000N.safetensors + model.safetensors.index.json (as save_pretrained shards)
//   tokenizer.model + tokenizer_config.json   for a sentencepiece tokenizer (LlamaTokenizer, no BOS
//                                  added, eos_token = the end-of-document piece);
//   tokenizer.json + tokenizer_config.json    for a Hugging Face tokenizer (the file as it is,
//                                  PreTrainedTokenizerFast, eos_token = moe4d's end of document); the byte
//                                  tokenizer has no HF equivalent and is not written (a warning says so)
// Import reads config.json and model.safetensors (or the index and its shards, any float dtype,
// upcast to fp32) and writes a moe4d checkpoint at step 0: model.safetensors, state.json with the
// config and the router biases (GLM-4-MoE's e_score_correction_bias, else zero), and the folder's
// tokenizer (tokenizer.model, else tokenizer.json; a copy beside config.yaml as data.tokenizer and
// one in the checkpoint, recorded in state.json). It has no optimizer state: train from it with
// train.init_from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/tensor.h"
#include "interop/hf_architecture.h"

namespace moe4d {

struct HfExportOptions {
  std::string checkpoint;  // step directory, or checkpoint root (follows latest)
  std::string output_dir;  // must not exist, or be empty
  uint64_t max_shard_bytes = 5'000'000'000;  // save_pretrained's default max_shard_size "5GB"
  std::string tokenizer;   // tokenizer spec; empty: the one the checkpoint's config names
  DType dtype = DType::kF32;  // kF32 (exact), or kBF16 (rounded to nearest even; config.json torch_dtype bfloat16)
};

struct HfExportResult {
  HfArchitecture arch = HfArchitecture::kMixtral;
  std::vector<std::string> files;  // written, relative to output_dir
  uint64_t tensor_bytes = 0;
};

HfExportResult export_hf(const HfExportOptions& options);

struct HfImportOptions {
  std::string input_dir;   // HF model folder
  std::string output;      // checkpoint root to create (step_00000000 inside)
  std::string train_data;  // data.train of the written config
  std::string tokenizer;   // data.tokenizer of the written config and the checkpoint's tokenizer; empty:
                           // input_dir/tokenizer.model, else input_dir/tokenizer.json, if present (copied)
};

struct HfImportResult {
  HfArchitecture arch = HfArchitecture::kMixtral;
  std::string checkpoint_path;  // the step directory
  std::string config_path;      // <output>/config.yaml
  Config config;
};

HfImportResult import_hf(const HfImportOptions& options);

}  // namespace moe4d
