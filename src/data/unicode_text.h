// data/unicode_text.h — the Unicode a byte-level BPE tokenizer needs: UTF-8 <-> code points,
// general-category classes, White_Space, and NFC normalisation (data/unicode_tables.h holds the data).
//
// Invalid UTF-8 is not replaced: each byte of an invalid sequence decodes to the pseudo code point
// kInvalidByte + byte (category kOther, no decomposition) and encodes back to that byte, so
// decode/encode round-trip any bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moe4d::unicode {

enum class Category : uint8_t { kLetter, kMark, kNumber, kPunctuation, kSymbol, kSeparator, kOther };

inline constexpr char32_t kInvalidByte = 0x110000;  // + byte value

// The general-category class (the first letter of the category: L, M, N, P, S, Z, C).
Category category(char32_t cp);
// The White_Space property (what \s means in the regex of Hugging Face pre-tokenizers).
bool is_white_space(char32_t cp);

std::u32string decode_utf8(std::string_view text);
void append_utf8(std::string& out, char32_t cp);
std::string encode_utf8(std::u32string_view text);

// Canonical composition (NFC) as Unicode's normalisation algorithm defines it.
std::u32string nfc(std::u32string_view text);

}  // namespace moe4d::unicode
