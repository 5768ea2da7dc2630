#include "tokenizer/unicode_text.h"

#include <utf8proc.h>

#include <cstdlib>

namespace kiln::unicode {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | cp >> 6);
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | cp >> 12);
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | cp >> 18);
    out += static_cast<char>(0x80 | (cp >> 12 & 0x3f));
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

namespace {

bool is_mark(const utf8proc_property_t* p) {
  return p->category == UTF8PROC_CATEGORY_MN || p->category == UTF8PROC_CATEGORY_MC ||
         p->category == UTF8PROC_CATEGORY_ME;
}
bool is_jamo(uint32_t cp) {
  return (cp >= 0x1100 && cp <= 0x11ff) || (cp >= 0xa960 && cp <= 0xa97f) || (cp >= 0xd7b0 && cp <= 0xd7ff);
}
bool is_hangul_syllable(uint32_t cp) { return cp >= 0xac00 && cp <= 0xd7a3; }

// A code point that the form leaves as it is and that starts a new normalization segment: a
// starter (combining class 0, not a mark) that nothing before it can combine with and that has no
// decomposition the form applies. The text then normalizes segment by segment (UAX #15), and a
// segment of one such code point is already normalized. Conservative: a code point that fails
// this only takes the slow path.
bool is_stable(uint32_t cp, NormalForm form) {
  const bool compat = form == NormalForm::kNfkc || form == NormalForm::kNfkd;
  const bool compose = form == NormalForm::kNfc || form == NormalForm::kNfkc;
  if (cp < (compat ? 0xa0u : compose ? 0x300u : 0xc0u)) return true;
  if (is_jamo(cp)) return false;
  if (is_hangul_syllable(cp)) return compose;
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  if (p->combining_class != 0 || is_mark(p)) return false;
  if (p->decomp_seqindex == UINT16_MAX) return true;
  // Only a compatibility decomposition, which the canonical forms ignore.
  return !compat && p->decomp_type != 0;
}

void normalize_slow(std::string_view in, NormalForm form, std::string& out) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNfc: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::kNfd: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* dst = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(in.data()),
                                          static_cast<utf8proc_ssize_t>(in.size()), &dst,
                                          static_cast<utf8proc_option_t>(options));
  if (n < 0) {
    out.append(in);  // not reached for valid UTF-8; keep the text rather than lose it
  } else {
    out.append(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
  }
  std::free(dst);
}

}  // namespace

bool normalize(std::string_view in, NormalForm form, std::string& out) {
  size_t i = 0;
  const size_t n = in.size();
  // Find the first segment that may change; before it everything stays.
  size_t seg = 0;  // start of the current segment
  bool trivial = true;
  size_t slow_from = kNpos;  // start of the first non-trivial segment
  while (i < n) {
    const size_t at = i;
    const uint32_t cp = next_code_point(in, i);
    if (is_stable(cp, form)) {
      if (!trivial) {
        slow_from = seg;
        break;
      }
      seg = at;
    } else {
      trivial = false;
    }
  }
  if (slow_from == kNpos) {
    if (trivial) return false;
    slow_from = seg;
  }
  out.clear();
  out.reserve(n + n / 8);
  out.append(in.substr(0, slow_from));
  // From slow_from on: runs of non-trivial segments go through utf8proc together; the text
  // between them (segments of one stable code point) is copied in one piece.
  size_t copied = slow_from;  // in[copied, ...) is not in `out` yet
  size_t run = kNpos;         // start of the pending run of non-trivial segments
  seg = slow_from;
  trivial = false;
  auto close_segment = [&](size_t end) {
    if (seg == end) return;
    if (trivial) {
      if (run != kNpos) {
        normalize_slow(in.substr(run, seg - run), form, out);
        run = kNpos;
        copied = seg;
      }
    } else if (run == kNpos) {
      out.append(in.substr(copied, seg - copied));
      run = seg;
    }
  };
  for (i = slow_from; i < n;) {
    const size_t at = i;
    const bool stable = is_stable(next_code_point(in, i), form);
    if (at == slow_from) {
      trivial = stable;
    } else if (stable) {
      close_segment(at);
      seg = at;
      trivial = true;
    } else {
      trivial = false;
    }
  }
  close_segment(n);
  if (run != kNpos) {
    normalize_slow(in.substr(run), form, out);
  } else {
    out.append(in.substr(copied));
  }
  return true;
}

std::string normalized(std::string_view in, NormalForm form) {
  std::string out;
  if (!normalize(in, form, out)) return std::string(in);
  return out;
}

std::string lowercase(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size();) {
    const auto c = static_cast<unsigned char>(in[i]);
    if (c < 0x80) {
      out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
      ++i;
      continue;
    }
    const uint32_t cp = next_code_point(in, i);
    if (cp == 0x130) {  // the one unconditional multi-character lowercase mapping: İ → i + U+0307
      out += "i\xCC\x87";
      continue;
    }
    append_utf8(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
  }
  return out;
}

bool is_whitespace(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0d);
  return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

bool is_numeric(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  const auto c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

bool is_word_char(uint32_t cp) {
  if (cp < 0x80)
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  if (cp == 0x200c || cp == 0x200d) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

bool is_punctuation(uint32_t cp) {
  if (cp < 0x80)
    return (cp >= 0x21 && cp <= 0x2f) || (cp >= 0x3a && cp <= 0x40) || (cp >= 0x5b && cp <= 0x60) ||
           (cp >= 0x7b && cp <= 0x7e);
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS: case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF: case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

}  // namespace kiln::unicode
