// data/pretokenizer_regex.h — the regular expressions of Hugging Face pre-tokenizers (the Split
// pre-tokenizer's "Regex" pattern and ByteLevel's built-in GPT-2 pattern), over code points.
//
// A small backtracking matcher with Perl/Oniguruma semantics (leftmost, alternatives tried in order,
// greedy quantifiers) for the subset those patterns use: literals, `.`, classes `[...]` / `[^...]`
// with ranges, `\p{X}` / `\P{X}` for the one-letter general categories L M N P S Z C, `\s` / `\S`
// (White_Space), escapes (`\r \n \t \f \v \xHH \x{H..} \uHHHH`, escaped punctuation), groups
// `(...)`, `(?:...)`, `(?i:...)` (ASCII letters, and ſ for s, K for k), lookahead `(?=...)` / `(?!...)`, and the
// quantifiers `? * + {n} {n,} {n,m}` (greedy or lazy). Anything else — anchors, backreferences,
// `\d \w \b`, two-letter categories — is refused with one moe4d::Error line naming it. It is tested
// against Python's `re` on the pre-tokenizer patterns of GPT-2, Llama-3, Qwen2/Qwen3 and DeepSeek-V3
// (tests/data/hf_tokenizer_reference.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moe4d {

class PretokenizerRegex {
 public:
  // `pattern` is UTF-8. Throws moe4d::Error "pre-tokenizer regex <pattern>: <what>" if unsupported.
  explicit PretokenizerRegex(std::string_view pattern);

  // The first match at or after `from`: [start, end). Empty matches are skipped.
  std::optional<std::pair<size_t, size_t>> find(std::u32string_view text, size_t from) const;
  // The length of the preferred match starting exactly at `pos`, or -1.
  long match_at(std::u32string_view text, size_t pos) const;

  struct CharClass {
    bool negated = false;
    std::vector<std::pair<char32_t, char32_t>> ranges;
    uint8_t categories = 0;      // bit per unicode::Category: \p{X}
    uint8_t not_categories = 0;  // \P{X}
    bool space = false, not_space = false, any_but_newline = false;
    bool matches(char32_t cp) const;
  };
  enum class Op : uint8_t { kClass, kSplit, kJmp, kLook, kMatch };
  struct Inst {
    Op op;
    int a = 0, b = 0;  // kClass: class; kSplit: preferred, other; kJmp: target; kLook: program, negate
  };

 private:
  bool run(int program, std::u32string_view text, size_t pos, size_t* end) const;

  std::vector<CharClass> classes_;
  std::vector<std::vector<Inst>> programs_;  // [0] the pattern, then one per lookahead
};

}  // namespace moe4d
