// data/unicode_tables.h — Unicode character data as generated tables (data/unicode_tables.cc,
// written by scripts/gen_unicode_tables.py from Python's unicodedata; Unicode 14.0.0). Read through
// data/unicode_text.h, not directly.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moe4d::unicode_tables {

extern const char* const kUnicodeVersion;
extern const uint32_t kCategoryRuns[];  // (first code point << 8) | class, sorted
extern const size_t kCategoryRunCount;
extern const uint32_t kCombiningRuns[];  // (first code point << 8) | canonical combining class, sorted
extern const size_t kCombiningRunCount;
extern const uint32_t kDecomposable[];          // sorted code points with a canonical decomposition
extern const uint16_t kDecompositionOffsets[];  // kDecomposableCount + 1 offsets into kDecomposed
extern const uint32_t kDecomposed[];            // full canonical decompositions, concatenated
extern const size_t kDecomposableCount;
extern const uint32_t kCompositions[];  // kCompositionCount triples (first, second, composite), sorted
extern const size_t kCompositionCount;

}  // namespace moe4d::unicode_tables
