// data/unicode_text.cc — UTF-8, category lookup and NFC over the generated tables.
#include "data/unicode_text.h"

#include <algorithm>

#include "data/unicode_tables.h"

namespace moe4d::unicode {
namespace {

namespace t = unicode_tables;

// The value of the run holding `cp` in a table of (first << 8) | value runs.
uint32_t run_value(const uint32_t* runs, size_t count, char32_t cp) {
  if (cp >= kInvalidByte) return 0;
  const uint32_t key = (static_cast<uint32_t>(cp) << 8) | 0xff;
  const uint32_t* it = std::upper_bound(runs, runs + count, key);
  return it == runs ? 0 : (*(it - 1) & 0xff);
}

int combining_class(char32_t cp) { return static_cast<int>(run_value(t::kCombiningRuns, t::kCombiningRunCount, cp)); }

// Hangul syllables decompose and compose algorithmically (Unicode 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

void decompose(char32_t cp, std::u32string& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out += kLBase + s / kNCount;
    out += kVBase + (s % kNCount) / kTCount;
    if (s % kTCount) out += kTBase + s % kTCount;
    return;
  }
  const uint32_t* end = t::kDecomposable + t::kDecomposableCount;
  const uint32_t* it = std::lower_bound(t::kDecomposable, end, static_cast<uint32_t>(cp));
  if (it == end || *it != cp) {
    out += cp;
    return;
  }
  const size_t i = it - t::kDecomposable;
  for (size_t k = t::kDecompositionOffsets[i]; k < t::kDecompositionOffsets[i + 1]; ++k) out += t::kDecomposed[k];
}

// The primary composite of (first, second), or 0.
char32_t compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount)
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 && second > kTBase &&
      second < kTBase + kTCount)
    return first + (second - kTBase);
  size_t lo = 0, hi = t::kCompositionCount;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    const uint32_t a = t::kCompositions[3 * mid], b = t::kCompositions[3 * mid + 1];
    if (a < first || (a == first && b < second)) lo = mid + 1;
    else hi = mid;
  }
  if (lo < t::kCompositionCount && t::kCompositions[3 * lo] == first && t::kCompositions[3 * lo + 1] == second)
    return t::kCompositions[3 * lo + 2];
  return 0;
}

}  // namespace

Category category(char32_t cp) {
  if (cp >= kInvalidByte) return Category::kOther;
  return static_cast<Category>(run_value(t::kCategoryRuns, t::kCategoryRunCount, cp));
}

bool is_white_space(char32_t cp) {
  // PropList.txt, White_Space (unchanged since Unicode 6.1).
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

std::u32string decode_utf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    int len = 0;
    char32_t cp = 0, min = 0;
    if (c < 0x80) len = 1, cp = c;
    else if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
    bool ok = len > 0 && i + len <= n;
    for (int k = 1; ok && k < len; ++k) {
      ok = (s[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    ok = ok && cp >= min && cp < 0x110000 && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) {
      out += kInvalidByte + c;
      ++i;
      continue;
    }
    out += cp;
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp >= kInvalidByte) {
    out += static_cast<char>(cp - kInvalidByte);
  } else if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string encode_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : text) append_utf8(out, cp);
  return out;
}

std::u32string nfc(std::u32string_view text) {
  // Fast path: ASCII is NFC.
  if (std::all_of(text.begin(), text.end(), [](char32_t c) { return c < 0x80; })) return std::u32string(text);
  std::u32string d;
  d.reserve(text.size());
  for (char32_t cp : text) decompose(cp, d);
  // Canonical ordering: stable-sort each run of non-starters by combining class.
  for (size_t i = 0; i < d.size();) {
    if (combining_class(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && combining_class(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + i, d.begin() + j,
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
  // Canonical composition.
  std::u32string out;
  out.reserve(d.size());
  size_t starter = std::u32string::npos;  // index in `out` of the last starter
  int last_class = -1;                    // combining class of the last character appended after it
  for (char32_t cp : d) {
    const int cc = combining_class(cp);
    if (starter != std::u32string::npos && (last_class < cc || (last_class == 0 && out.size() == starter + 1))) {
      // Not blocked: nothing between the starter and cp has a class >= cp's (or nothing at all).
      if (const char32_t composite = compose(out[starter], cp)) {
        out[starter] = composite;
        continue;
      }
    }
    if (cc == 0) {
      starter = out.size();
      last_class = 0;
    } else {
      last_class = cc;
    }
    out += cp;
  }
  return out;
}

}  // namespace moe4d::unicode
