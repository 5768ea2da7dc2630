// Unicode helpers for the tokenizers: UTF-8 validation and decoding, the normalization forms
// (NFC, NFD, NFKC, NFKD through utf8proc), lowercasing, and the character classes that HF
// tokenizers' Rust code uses (char::is_whitespace, char::is_numeric, regex \w).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/utf8.h"

namespace kiln::unicode {

constexpr size_t kNpos = static_cast<size_t>(-1);

// The offset of the first byte that is not part of well-formed UTF-8, or kNpos when `s` is all
// valid (core/utf8.h).
using kiln::invalid_utf8_offset;

// The code point at s[i] of valid UTF-8; advances i past it.
inline uint32_t next_code_point(std::string_view s, size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    ++i;
    return c;
  }
  auto cont = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(s[i + k]) & 0x3f); };
  uint32_t cp;
  if (c < 0xe0) {
    cp = (c & 0x1fu) << 6 | cont(1);
    i += 2;
  } else if (c < 0xf0) {
    cp = (c & 0x0fu) << 12 | cont(1) << 6 | cont(2);
    i += 3;
  } else {
    cp = (c & 0x07u) << 18 | cont(1) << 12 | cont(2) << 6 | cont(3);
    i += 4;
  }
  return cp;
}

// The byte length of the UTF-8 sequence that starts with lead byte `c` (1 for anything else).
inline size_t utf8_length(unsigned char c) { return c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4; }

void append_utf8(std::string& out, uint32_t cp);

enum class NormalForm : uint8_t { kNfc, kNfd, kNfkc, kNfkd };

// Normalizes valid UTF-8 `in`. Returns false (and leaves `out` alone) when `in` is already in
// that form, as most text is; else writes the normalized text to `out` and returns true.
bool normalize(std::string_view in, NormalForm form, std::string& out);
std::string normalized(std::string_view in, NormalForm form);

// Full lowercase mapping, character by character (Rust's char::to_lowercase).
std::string lowercase(std::string_view in);

// Rust's char::is_whitespace (the Unicode White_Space property).
bool is_whitespace(uint32_t cp);
// Rust's char::is_numeric (general categories Nd, Nl, No).
bool is_numeric(uint32_t cp);
// The Rust regex crate's Unicode \w: letters, marks, Nd, Pc, ZWNJ/ZWJ.
bool is_word_char(uint32_t cp);
// HF tokenizers' is_punc: ASCII punctuation or a Unicode P* category.
bool is_punctuation(uint32_t cp);

}  // namespace kiln::unicode
