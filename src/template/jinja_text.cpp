#include "template/jinja_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kiln::jinja {

namespace {

// Decodes one code point of valid UTF-8 at s[i], advancing i.
char32_t next_cp(std::string_view s, size_t& i) {
  auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    ++i;
    return c;
  }
  int len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
  char32_t cp = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
  for (int k = 1; k < len && i + static_cast<size_t>(k) < s.size(); ++k)
    cp = cp << 6 | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3f);
  i += static_cast<size_t>(len);
  return cp;
}

// Pairs where the upper case is even and the lower case odd (or the reverse), by range.
bool in_even_odd(char32_t c, char32_t lo, char32_t hi) { return c >= lo && c <= hi; }

char32_t simple_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (c >= 0xe0 && c <= 0xfe && c != 0xf7) return c - 32;
  if (c == 0xff) return 0x178;
  if (c == 0xb5) return 0x39c;
  if (c < 0x100) return c;
  if (c == 0x131) return 'I';
  if (c == 0x17f) return 'S';
  if ((in_even_odd(c, 0x100, 0x12f) || in_even_odd(c, 0x132, 0x137) || in_even_odd(c, 0x14a, 0x177)) && (c & 1))
    return c - 1;
  if ((in_even_odd(c, 0x139, 0x148) || in_even_odd(c, 0x179, 0x17e)) && !(c & 1)) return c - 1;
  if (c >= 0x3b1 && c <= 0x3cb && c != 0x3c2) return c - 32;
  if (c == 0x3c2) return 0x3a3;
  if (c == 0x3ac) return 0x386;
  if (c >= 0x3ad && c <= 0x3af) return c - 37;
  if (c == 0x3cc) return 0x38c;
  if (c == 0x3cd || c == 0x3ce) return c - 63;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  if ((in_even_odd(c, 0x460, 0x481) || in_even_odd(c, 0x48a, 0x4bf) || in_even_odd(c, 0x4d0, 0x52f)) && (c & 1))
    return c - 1;
  if (c >= 0x561 && c <= 0x586) return c - 48;
  if ((in_even_odd(c, 0x1e00, 0x1e95) || in_even_odd(c, 0x1ea0, 0x1eff)) && (c & 1)) return c - 1;
  if (c >= 0xff41 && c <= 0xff5a) return c - 32;
  return c;
}

char32_t simple_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 32;
  if (c < 0x100) return c;
  if (c == 0x178) return 0xff;
  if ((in_even_odd(c, 0x100, 0x12f) || in_even_odd(c, 0x132, 0x137) || in_even_odd(c, 0x14a, 0x177)) && !(c & 1))
    return c + 1;
  if ((in_even_odd(c, 0x139, 0x148) || in_even_odd(c, 0x179, 0x17e)) && (c & 1)) return c + 1;
  if (c >= 0x391 && c <= 0x3ab && c != 0x3a2) return c + 32;
  if (c == 0x386) return 0x3ac;
  if (c >= 0x388 && c <= 0x38a) return c + 37;
  if (c == 0x38c) return 0x3cc;
  if (c == 0x38e || c == 0x38f) return c + 63;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  if ((in_even_odd(c, 0x460, 0x481) || in_even_odd(c, 0x48a, 0x4bf) || in_even_odd(c, 0x4d0, 0x52f)) && !(c & 1))
    return c + 1;
  if (c >= 0x531 && c <= 0x556) return c + 48;
  if ((in_even_odd(c, 0x1e00, 0x1e95) || in_even_odd(c, 0x1ea0, 0x1eff)) && !(c & 1)) return c + 1;
  if (c >= 0xff21 && c <= 0xff3a) return c + 32;
  return c;
}

void append_upper(std::string& out, char32_t c) {
  if (c == 0xdf) {  // ß
    out += "SS";
    return;
  }
  append_utf8(out, simple_upper(c));
}

void append_lower(std::string& out, char32_t c) {
  if (c == 0x130) {  // İ lowers to i + combining dot above
    out += "i\xcc\x87";
    return;
  }
  append_utf8(out, simple_lower(c));
}

bool is_cased(char32_t c) { return simple_upper(c) != c || simple_lower(c) != c || c == 0xdf || c == 0x138; }

bool in_set(char32_t c, const std::u32string* chars) {
  if (chars == nullptr) return py_isspace(c);
  return chars->find(c) != std::u32string::npos;
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

void append_hex(std::string& out, const char* prefix, uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%s%0*x", prefix, digits, v);
  out += buf;
}

}  // namespace

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

std::u32string to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) out += next_cp(s, i);
  return out;
}

std::string to_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

size_t count_code_points(std::string_view s) {
  size_t n = 0;
  for (char ch : s)
    if ((static_cast<unsigned char>(ch) & 0xc0) != 0x80) ++n;
  return n;
}

size_t byte_offset_of(std::string_view s, size_t index) {
  size_t i = 0;
  for (size_t k = 0; k < index && i < s.size(); ++k) next_cp(s, i);
  return i;
}

bool py_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

bool py_isprintable(char32_t c) {
  if (c < 0x20 || (c >= 0x7f && c <= 0xa0)) return false;
  if (c == 0xad || c == 0x1680 || (c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) ||
      (c >= 0x205f && c <= 0x2064) || (c >= 0x2066 && c <= 0x206f) || c == 0x3000 || c == 0xfeff ||
      (c >= 0xfff9 && c <= 0xfffb) || c == 0xfffe || c == 0xffff)
    return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61c || c == 0x6dd || c == 0x70f || c == 0x8e2 || c == 0x180e) return false;
  if ((c >= 0xd800 && c <= 0xf8ff) || c >= 0xf0000) return false;  // surrogates, private use
  if (c == 0xe0001 || (c >= 0xe0020 && c <= 0xe007f)) return false;
  return true;
}

bool py_is_cased_lower(char32_t c) { return simple_upper(c) != c || c == 0xdf || c == 0x138; }
bool py_is_cased_upper(char32_t c) { return simple_lower(c) != c; }

std::string py_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) append_upper(out, next_cp(s, i));
  return out;
}

std::string py_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::u32string u = to_u32(s);
  for (size_t i = 0; i < u.size(); ++i) {
    // Python's Final_Sigma rule: a capital sigma after a cased letter and not before one is final.
    if (u[i] == 0x3a3 && i > 0 && is_cased(u[i - 1]) && (i + 1 == u.size() || !is_cased(u[i + 1]))) {
      append_utf8(out, 0x3c2);
      continue;
    }
    append_lower(out, u[i]);
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  bool first = true;
  while (i < s.size()) {
    char32_t c = next_cp(s, i);
    if (first)
      append_upper(out, c);
    else
      append_lower(out, c);
    first = false;
  }
  return out;
}

std::string py_title(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  bool prev_cased = false;
  while (i < s.size()) {
    char32_t c = next_cp(s, i);
    if (prev_cased)
      append_lower(out, c);
    else
      append_upper(out, c);
    prev_cased = is_cased(c);
  }
  return out;
}

std::string py_swapcase(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    char32_t c = next_cp(s, i);
    if (simple_lower(c) != c)
      append_lower(out, c);
    else if (simple_upper(c) != c || c == 0xdf)
      append_upper(out, c);
    else
      append_utf8(out, c);
  }
  return out;
}

std::string py_strip(std::string_view s, const std::u32string* chars, bool left, bool right) {
  std::u32string u = to_u32(s);
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && in_set(u[b], chars)) ++b;
  if (right)
    while (e > b && in_set(u[e - 1], chars)) --e;
  if (b == 0 && e == u.size()) return std::string(s);
  return to_utf8(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep != nullptr) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t f = s.find(*sep, pos);
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, f - pos));
      pos = f + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  std::u32string u = to_u32(s);
  size_t i = 0, n = u.size();
  while (true) {
    while (i < n && py_isspace(u[i])) ++i;
    if (i >= n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      out.push_back(to_utf8(std::u32string_view(u).substr(i)));
      break;
    }
    size_t j = i;
    while (j < n && !py_isspace(u[j])) ++j;
    out.push_back(to_utf8(std::u32string_view(u).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep != nullptr) {
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t f = s.rfind(*sep, end - sep->size());
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
      end = f;
    }
    out.emplace_back(s.substr(0, end));
    return {out.rbegin(), out.rend()};
  }
  std::u32string u = to_u32(s);
  size_t e = u.size();
  while (true) {
    while (e > 0 && py_isspace(u[e - 1])) --e;
    if (e == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      out.push_back(to_utf8(std::u32string_view(u).substr(0, e)));
      break;
    }
    size_t b = e;
    while (b > 0 && !py_isspace(u[b - 1])) --b;
    out.push_back(to_utf8(std::u32string_view(u).substr(b, e - b)));
    e = b;
  }
  return {out.rbegin(), out.rend()};
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  std::u32string u = to_u32(s);
  size_t i = 0, start = 0, n = u.size();
  while (i < n) {
    if (!is_line_break(u[i])) {
      ++i;
      continue;
    }
    size_t eol = i;
    size_t next = (u[i] == '\r' && i + 1 < n && u[i + 1] == '\n') ? i + 2 : i + 1;
    out.push_back(to_utf8(std::u32string_view(u).substr(start, (keepends ? next : eol) - start)));
    start = i = next;
  }
  if (start < n) out.push_back(to_utf8(std::u32string_view(u).substr(start)));
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    int64_t done = 0;
    size_t i = 0;
    while (true) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (i >= s.size()) break;
      size_t j = i;
      next_cp(s, j);
      out += s.substr(i, j - i);
      i = j;
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t f = s.find(old, pos);
    if (f == std::string_view::npos) break;
    out += s.substr(pos, f - pos);
    out += repl;
    pos = f + old.size();
    ++done;
  }
  out += s.substr(pos);
  return out;
}

int64_t py_find(std::string_view s, std::string_view sub, bool reverse) {
  size_t f = reverse ? s.rfind(sub) : s.find(sub);
  if (f == std::string_view::npos) return -1;
  return static_cast<int64_t>(count_code_points(s.substr(0, f)));
}

int64_t py_count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(count_code_points(s)) + 1;
  int64_t n = 0;
  size_t pos = 0;
  while ((pos = s.find(sub, pos)) != std::string_view::npos) {
    ++n;
    pos += sub.size();
  }
  return n;
}

std::string py_repr_str(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  size_t i = 0;
  while (i < s.size()) {
    char32_t c = next_cp(s, i);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (!py_isprintable(c)) {
      if (c < 0x100)
        append_hex(out, "\\x", c, 2);
      else if (c < 0x10000)
        append_hex(out, "\\u", c, 4);
      else
        append_hex(out, "\\U", c, 8);
    } else {
      append_utf8(out, c);
    }
  }
  out += quote;
  return out;
}

std::string py_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  // sci is "[-]d[.ddd]e[+-]xx": pull out the digits and the decimal exponent.
  bool neg = sci[0] == '-';
  size_t epos = sci.find('e');
  std::string mant = sci.substr(neg ? 1 : 0, epos - (neg ? 1 : 0));
  int exp10 = std::atoi(sci.c_str() + epos + 1);
  std::string digits;
  for (char ch : mant)
    if (ch != '.') digits += ch;
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  int decpt = exp10 + 1;  // value = 0.digits * 10^decpt
  std::string out = neg ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out += digits.substr(1);
    }
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  } else if (decpt <= 0) {
    out += "0.";
    out += std::string(static_cast<size_t>(-decpt), '0');
    out += digits;
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    out += digits;
    out += std::string(static_cast<size_t>(decpt) - digits.size(), '0');
    out += ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(decpt));
    out += '.';
    out += digits.substr(static_cast<size_t>(decpt));
  }
  return out;
}

void json_quote(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    char32_t c = next_cp(s, i);
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20) {
      append_hex(out, "\\u", c, 4);
    } else if (ensure_ascii && c >= 0x80) {
      if (c >= 0x10000) {
        char32_t v = c - 0x10000;
        append_hex(out, "\\u", 0xd800 + (v >> 10), 4);
        append_hex(out, "\\u", 0xdc00 + (v & 0x3ff), 4);
      } else {
        append_hex(out, "\\u", c, 4);
      }
    } else {
      out += s.substr(start, i - start);
    }
  }
  out += '"';
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

}  // namespace kiln::jinja
