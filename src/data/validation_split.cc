// data/validation_split.cc — hash draw per document plus the minimum count rule for small corpora.
#include "data/validation_split.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/rng.h"

namespace moe4d {

ValidationSplit::ValidationSplit(double fraction, int64_t min_valid, uint64_t seed)
    : fraction_(fraction), min_valid_(min_valid), key_(hash_combine(seed, hash_string("train/valid split"))) {
  if (!(fraction >= 0.0 && fraction < 1.0)) fail("prepare: valid fraction {} is outside [0, 1)", fraction);
  if (fraction == 0.0 && min_valid != 0)
    fail("prepare: --min-valid-documents {} was given with --valid-fraction 0 (no validation split); expected one "
         "of them",
         min_valid);
  if (fraction > 0.0 && min_valid < 1) fail("prepare: minimum validation documents {} must be >= 1", min_valid);
}

double ValidationSplit::draw(int64_t document) const {
  return uniform_from_bits(hash_combine(key_, static_cast<uint64_t>(document)));
}

std::vector<bool> ValidationSplit::small_corpus(int64_t documents) {
  note_.clear();
  if (documents < 2)
    fail("corpus has only {} document; at least 2 are needed to split it into train and valid", documents);
  if (documents <= min_valid_)
    fail("corpus has {} documents, too few to hold out {} for validation (--min-valid-documents) and keep one for "
         "training",
         documents, min_valid_);
  std::vector<int64_t> order(static_cast<size_t>(documents));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return draw(a) < draw(b); });
  int64_t valid = 0;
  while (valid < documents && draw(order[size_t(valid)]) < fraction_) ++valid;
  valid = std::clamp(valid, min_valid_, documents - 1);
  std::vector<bool> is_valid(static_cast<size_t>(documents), false);
  for (int64_t k = 0; k < valid; ++k) is_valid[size_t(order[size_t(k)])] = true;
  const double share = double(valid) / double(documents);
  if (share > 2 * fraction_)
    note_ = fmt::format(
        "the validation split holds {} of {} documents ({:.0f}%), more than the asked fraction {} because at least {} "
        "must be held out (--min-valid-documents); a larger corpus gets the asked share",
        valid, documents, 100 * share, fraction_, min_valid_);
  return is_valid;
}

}  // namespace moe4d
