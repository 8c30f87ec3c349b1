// data/validation_split.h — which documents of a streamed corpus are held out for validation.
//
// Document i (0-based, in stream order) draws u_i = hash(seed, i) in [0, 1) and is a validation
// document when u_i < fraction. That decides a large corpus document by document while it
// streams. A small corpus — fewer than kDecidedValidCount / fraction documents, so that fewer than
// ~20 validation documents are expected — is decided once its size is known (prepare holds its
// documents back until then) by the minimum count rule:
//   * at least min_valid documents are held out (the ones with the smallest u beyond the draw),
//   * at least one document stays for training (else a moe4d::Error),
//   * fewer than 2 documents is a moe4d::Error,
// and when that rule pushes the held-out share above twice the asked fraction (say 1 of 2
// documents = 50% for 5%), note() says so, and prepare prints it as a warning and in its summary.
// Fraction 0 (with min_valid 0) holds out nothing: every document is a train document.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moe4d {

inline constexpr double kDecidedValidCount = 20.0;

class ValidationSplit {
 public:
  // Throws moe4d::Error unless fraction is in (0, 1) and min_valid >= 1, or both are 0.
  ValidationSplit(double fraction, int64_t min_valid, uint64_t seed);

  double draw(int64_t document) const;
  bool drawn_valid(int64_t document) const { return draw(document) < fraction_; }
  // True once `documents_seen` is large enough for the per-document draw to stand.
  bool streaming(int64_t documents_seen) const {
    return fraction_ == 0.0 || double(documents_seen) * fraction_ >= kDecidedValidCount;
  }
  // The split of a small corpus of exactly `documents` documents (the minimum count rule above).
  std::vector<bool> small_corpus(int64_t documents);
  // Empty unless the last small_corpus() held out more than asked; then one sentence saying so.
  const std::string& note() const { return note_; }

  double fraction() const { return fraction_; }
  int64_t min_valid() const { return min_valid_; }

 private:
  double fraction_;
  int64_t min_valid_;
  uint64_t key_;
  std::string note_;
};

}  // namespace moe4d
