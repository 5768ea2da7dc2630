#include "utf16_stream.h"

#include <cstdint>

namespace kiln_jni {
namespace {

constexpr char16_t kReplacement = 0xFFFD;

// The bytes a character starting with `lead` has, and the range its second byte must be in
// (Unicode's table 3-7: no overlongs, no surrogates, nothing above U+10FFFF); 0 for a byte that
// never starts a character.
int sequence_length(uint8_t lead, uint8_t& lo, uint8_t& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead == 0xE0) { lo = 0xA0; return 3; }
  if (lead == 0xED) { hi = 0x9F; return 3; }
  if (lead >= 0xE1 && lead <= 0xEF) return 3;
  if (lead == 0xF0) { lo = 0x90; return 4; }
  if (lead == 0xF4) { hi = 0x8F; return 4; }
  if (lead >= 0xF1 && lead <= 0xF3) return 4;
  return 0;
}

void append_code_point(uint32_t cp, std::u16string& out) {
  if (cp < 0x10000) {
    out.push_back(static_cast<char16_t>(cp));
  } else {
    cp -= 0x10000;
    out.push_back(static_cast<char16_t>(0xD800 + (cp >> 10)));
    out.push_back(static_cast<char16_t>(0xDC00 + (cp & 0x3FF)));
  }
}

// Decodes whole characters of s[0, n) into `out`; returns where an incomplete final character
// starts (n when there is none).
size_t decode(const uint8_t* s, size_t n, std::u16string& out) {
  size_t i = 0;
  while (i < n) {
    uint8_t lo, hi;
    const int len = sequence_length(s[i], lo, hi);
    if (len == 0) {
      out.push_back(kReplacement);
      ++i;
      continue;
    }
    if (len == 1) {
      out.push_back(static_cast<char16_t>(s[i]));
      ++i;
      continue;
    }
    uint32_t cp = s[i] & (0xFF >> (len + 1));
    int k = 1;
    for (; k < len; ++k) {
      if (i + k >= n) return i;  // the rest may come with the next chunk
      const uint8_t c = s[i + k];
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) break;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (k < len) {
      out.push_back(kReplacement);  // a truncated sequence is one U+FFFD; the byte that broke it starts anew
      i += static_cast<size_t>(k);
      continue;
    }
    append_code_point(cp, out);
    i += static_cast<size_t>(len);
  }
  return n;
}

}  // namespace

void Utf16Stream::push(std::string_view bytes, std::u16string& out) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t n = bytes.size();
  // Complete the held character first, a byte at a time (at most 3 are held).
  while (held_len_ > 0 && n > 0) {
    held_[held_len_++] = static_cast<char>(*p++);
    --n;
    const size_t start = decode(reinterpret_cast<const uint8_t*>(held_), held_len_, out);
    if (start == held_len_) {
      held_len_ = 0;  // decoded (or replaced) whole
    } else if (start > 0) {
      // A broken sequence was replaced and a new incomplete one began inside the held bytes.
      for (size_t j = start; j < held_len_; ++j) held_[j - start] = held_[j];
      held_len_ -= start;
    }
  }
  const size_t start = decode(p, n, out);
  for (size_t j = start; j < n; ++j) held_[held_len_++] = static_cast<char>(p[j]);
}

void Utf16Stream::finish(std::u16string& out) {
  if (held_len_ > 0) out.push_back(kReplacement);
  held_len_ = 0;
}

std::u16string to_utf16(std::string_view utf8) {
  Utf16Stream s;
  std::u16string out;
  out.reserve(utf8.size());
  s.push(utf8, out);
  s.finish(out);
  return out;
}

}  // namespace kiln_jni
