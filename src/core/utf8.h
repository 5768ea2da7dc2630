// Well-formed UTF-8 (Unicode 3.9, table 3-7: no overlongs, no surrogates, nothing above
// U+10FFFF): the one validator every layer uses.
#pragma once

#include <cstddef>
#include <string_view>

namespace kiln {

// What a lead byte promises: the sequence's length (0: no sequence starts with this byte, e.g. a
// continuation byte, C0, C1, F5..FF) and the allowed range of the second byte.
struct Utf8Lead {
  size_t length = 0;
  unsigned char lo = 0x80, hi = 0xbf;
};
Utf8Lead utf8_lead(unsigned char c);

// The length (1..4) of the well-formed sequence that starts at s[i], or 0 when none does.
size_t utf8_sequence_length(std::string_view s, size_t i);

// The offset of the first byte that is not part of well-formed UTF-8, or std::string_view::npos
// when all of `s` is.
size_t invalid_utf8_offset(std::string_view s);

inline bool is_valid_utf8(std::string_view s) { return invalid_utf8_offset(s) == std::string_view::npos; }

}  // namespace kiln
