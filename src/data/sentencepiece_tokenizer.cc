// data/sentencepiece_tokenizer.cc — SentencePieceTokenizer over libsentencepiece.
#include "data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"

namespace moe4d {
namespace {

std::string describe(const sentencepiece::util::Status& status) {
  std::string text = sentencepiece_error_text(status.error_message());
  return text.empty() ? "sentencepiece gave no details" : text;
}

}  // namespace

std::string sentencepiece_error_text(std::string_view error_message) {
  std::string text(error_message);
  size_t location = text.find(") [");
  size_t end = location == std::string::npos ? std::string::npos : text.find("] ", location);
  if (end != std::string::npos && end > location) {
    text = text.substr(end + 2);
  } else if (location != std::string::npos && text.ends_with("]")) {
    text.clear();  // only a code location and a condition
  }
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path)
    : model_path_(model_path), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  std::error_code ec;
  if (std::filesystem::is_directory(model_path, ec))
    fail("tokenizer model {} is a directory, expected \"bytes\", a sentencepiece .model or a Hugging Face tokenizer.json",
         model_path);
  if (!std::filesystem::is_regular_file(model_path, ec))
    fail("tokenizer model {} not found (expected \"bytes\", a sentencepiece .model or a Hugging Face tokenizer.json)", model_path);
  sentencepiece::util::Status status = processor_->Load(model_path);
  if (!status.ok()) fail("tokenizer model {} is not a valid sentencepiece model ({})", model_path, describe(status));
  vocab_size_ = processor_->GetPieceSize();
  eos_id_ = processor_->eos_id();
  if (eos_id_ < 0)
    fail("tokenizer model {} has no end-of-sequence piece (eos_id is -1); moe4d separates documents with it",
         model_path);
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  sentencepiece::util::Status status = processor_->Encode(text, &ids);
  if (!status.ok()) fail("tokenizer {} cannot encode text: {}", model_path_, describe(status));
  return ids;
}

std::string SentencePieceTokenizer::decode(std::span<const int> ids) const {
  for (int id : ids) {
    if (id < 0 || id >= vocab_size_)
      fail("token id {} is outside the vocabulary [0, {}) of tokenizer {}", id, vocab_size_, model_path_);
  }
  std::string text;
  sentencepiece::util::Status status = processor_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!status.ok()) fail("tokenizer {} cannot decode ids: {}", model_path_, describe(status));
  return text;
}

std::string SentencePieceTokenizer::name() const {
  return fmt::format("sentencepiece ({} ids) from {}", vocab_size_, model_path_);
}

}  // namespace moe4d
