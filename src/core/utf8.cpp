#include "core/utf8.h"

#include <cstdint>
#include <cstring>

namespace kiln {

Utf8Lead utf8_lead(unsigned char c) {
  Utf8Lead l;
  if (c < 0x80) {
    l.length = 1;
  } else if (c >= 0xc2 && c <= 0xdf) {
    l.length = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    l.length = 3;
    if (c == 0xe0) l.lo = 0xa0;  // no overlongs
    if (c == 0xed) l.hi = 0x9f;  // no surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    l.length = 4;
    if (c == 0xf0) l.lo = 0x90;  // no overlongs
    if (c == 0xf4) l.hi = 0x8f;  // nothing above U+10FFFF
  }
  return l;
}

size_t utf8_sequence_length(std::string_view s, size_t i) {
  const Utf8Lead l = utf8_lead(static_cast<unsigned char>(s[i]));
  if (l.length <= 1) return l.length;
  if (i + l.length > s.size()) return 0;
  for (size_t k = 1; k < l.length; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if (k == 1 ? (cc < l.lo || cc > l.hi) : (cc & 0xc0) != 0x80) return 0;
  }
  return l.length;
}

size_t invalid_utf8_offset(std::string_view s) {
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // Eight ASCII bytes at a time: most text a tokenizer sees.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    const size_t len = utf8_sequence_length(s, i);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace kiln
