#include "template/jinja_lexer.h"

#include <cstdio>

#include "core/byte_reader.h"
#include "core/utf8.h"
#include "template/jinja_text.h"

namespace kiln::jinja {

std::string where(int line, int col) { return "line " + std::to_string(line) + ", column " + std::to_string(col); }

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's \s at s[i] (Unicode whitespace); returns its byte length, 0 when not whitespace.
size_t space_len(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return py_isspace(c) ? 1 : 0;
  size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
  if (i + len > s.size()) return 0;
  std::u32string u = to_u32(s.substr(i, len));
  return (u.size() == 1 && py_isspace(u[0])) ? len : 0;
}

// Python's str.rstrip() (Unicode whitespace).
std::string_view rstrip_space(std::string_view s) {
  std::u32string u = to_u32(s);
  size_t e = u.size();
  while (e > 0 && py_isspace(u[e - 1])) --e;
  return s.substr(0, byte_offset_of(s, e));
}

// Python's `\s+` fullmatch on s (non-empty, all whitespace).
bool all_space(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  while (i < s.size()) {
    size_t n = space_len(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// `(\d+_)*\d+` at s[i]: the end, or npos.
size_t scan_digits(std::string_view s, size_t i) {
  if (i >= s.size() || !is_digit(s[i])) return std::string_view::npos;
  while (true) {
    while (i < s.size() && is_digit(s[i])) ++i;
    if (i + 1 < s.size() && s[i] == '_' && is_digit(s[i + 1])) {
      ++i;
      continue;
    }
    return i;
  }
}

// Decodes the body of a string literal as Python's unicode-escape codec does.
Result<std::string> unescape(std::string_view raw, int line, int col) {
  std::string out;
  size_t i = 0;
  auto fail = [&](const std::string& m) -> Status { return corrupt(where(line, col) + ": " + m); };
  while (i < raw.size()) {
    char c = raw[i];
    if (c != '\\') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 >= raw.size()) return fail("a string literal ends in a lone backslash");
    char e = raw[i + 1];
    i += 2;
    switch (e) {
      case '\n':
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x':
      case 'u':
      case 'U': {
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t v = 0;
        for (int k = 0; k < digits; ++k) {
          int h = i < raw.size() ? hex_value(raw[i]) : -1;
          if (h < 0) return fail(std::string("truncated \\") + e + " escape in a string literal");
          v = v * 16 + static_cast<uint32_t>(h);
          ++i;
        }
        if (v > 0x10ffff) return fail("a \\U escape beyond U+10FFFF in a string literal");
        if (v >= 0xd800 && v <= 0xdfff) return fail("a surrogate escape (\\ud800-\\udfff) in a string literal");
        append_utf8(out, v);
        break;
      }
      case 'N':
        return fail("\\N{...} escapes are not supported in string literals");
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i < raw.size() && raw[i] >= '0' && raw[i] <= '7'; ++k, ++i)
            v = v * 8 + static_cast<uint32_t>(raw[i] - '0');
          append_utf8(out, v);
        } else if (static_cast<unsigned char>(e) >= 0x80) {
          // Jinja backslash-escapes non-ASCII text before decoding, so "\é" comes out as "\xe9".
          size_t start = i - 1;
          size_t len = (static_cast<unsigned char>(e) & 0xe0) == 0xc0   ? 2
                       : (static_cast<unsigned char>(e) & 0xf0) == 0xe0 ? 3
                                                                        : 4;
          std::u32string u = to_u32(raw.substr(start, len));
          i = start + len;
          char buf[16];
          char32_t cp = u.empty() ? 0 : u[0];
          if (cp < 0x100)
            std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
          else if (cp < 0x10000)
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
          else
            std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(cp));
          out += buf;
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(std::move(src)) {}

  Result<std::vector<Token>> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < s_.size()) {
      size_t tag = find_tag(pos);
      if (tag == std::string::npos) {
        emit_data(std::string_view(s_).substr(pos), pos);
        break;
      }
      char kind = s_[tag + 1];  // '{', '%' or '#'
      size_t after = tag + 2;
      char sign = (after < s_.size() && (s_[after] == '-' || s_[after] == '+')) ? s_[after] : 0;
      std::string_view text = std::string_view(s_).substr(pos, tag - pos);
      size_t raw_end = kind == '%' ? match_raw_begin(tag) : std::string::npos;
      text = strip_text(text, sign, kind != '{', line_starting);
      emit_data(text, pos);
      if (sign) ++after;
      if (raw_end != std::string::npos) {
        KILN_ASSIGN_OR_RETURN(pos, lex_raw(tag, raw_end, line_starting));
        continue;
      }
      if (kind == '#') {
        KILN_ASSIGN_OR_RETURN(pos, lex_comment(tag, after, line_starting));
        continue;
      }
      push(kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin, kind == '{' ? "{{" : "{%", tag);
      KILN_ASSIGN_OR_RETURN(pos, lex_tag(tag, after, kind == '{', line_starting));
    }
    push(Tok::kEof, "", s_.size());
    return std::move(toks_);
  }

 private:
  size_t find_tag(size_t pos) const {
    while (true) {
      size_t p = s_.find('{', pos);
      if (p == std::string::npos || p + 1 >= s_.size()) return std::string::npos;
      char n = s_[p + 1];
      if (n == '{' || n == '%' || n == '#') return p;
      pos = p + 1;
    }
  }

  size_t skip_space(size_t i) const {
    while (size_t n = space_len(s_, i)) i += n;
    return i;
  }

  // `{%(-|+|)\s*raw\s*(-%}\s*|%})` at tag: the end of the match, or npos.
  size_t match_raw_begin(size_t tag) const {
    size_t i = tag + 2;
    if (i < s_.size() && (s_[i] == '-' || s_[i] == '+')) ++i;
    i = skip_space(i);
    if (s_.compare(i, 3, "raw") != 0) return std::string::npos;
    i = skip_space(i + 3);
    if (s_.compare(i, 3, "-%}") == 0) return skip_space(i + 3);
    if (s_.compare(i, 2, "%}") == 0) return i + 2;
    return std::string::npos;
  }

  // Whitespace control on the text before a tag: `-` strips all whitespace; otherwise
  // lstrip_blocks strips the spaces that start the tag's line (block and comment tags only).
  static std::string_view strip_text(std::string_view text, char sign, bool lstrip, bool line_starting) {
    if (sign == '-') return rstrip_space(text);
    if (sign == '+' || !lstrip) return text;
    size_t nl = text.rfind('\n');
    size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
    if ((l_pos > 0 || line_starting) && all_space(text.substr(l_pos))) return text.substr(0, l_pos);
    return text;
  }

  Result<size_t> lex_comment(size_t tag, size_t content, bool& line_starting) {
    size_t q = s_.find("#}", content);
    if (q == std::string::npos) return fail(tag, "missing end of comment tag '#}'");
    size_t end = q + 2;
    if (q > content && s_[q - 1] == '-')
      end = skip_space(end);
    else if (q > content && s_[q - 1] == '+') {
    } else if (end < s_.size() && s_[end] == '\n')
      ++end;
    line_starting = end > 0 && s_[end - 1] == '\n';
    return end;
  }

  Result<size_t> lex_raw(size_t tag, size_t begin_end, bool& line_starting) {
    line_starting = begin_end > 0 && s_[begin_end - 1] == '\n';
    size_t p = begin_end;
    while (true) {
      p = s_.find("{%", p);
      if (p == std::string::npos) return fail(tag, "missing end of raw directive ({% endraw %})");
      size_t i = p + 2;
      char sign = (i < s_.size() && (s_[i] == '-' || s_[i] == '+')) ? s_[i] : 0;
      if (sign) ++i;
      i = skip_space(i);
      if (s_.compare(i, 6, "endraw") == 0) {
        size_t j = skip_space(i + 6);
        size_t end = std::string::npos;
        if (s_.compare(j, 3, "+%}") == 0)
          end = j + 3;
        else if (s_.compare(j, 3, "-%}") == 0)
          end = skip_space(j + 3);
        else if (s_.compare(j, 2, "%}") == 0)
          end = (j + 2 < s_.size() && s_[j + 2] == '\n') ? j + 3 : j + 2;
        if (end != std::string::npos) {
          std::string_view text = std::string_view(s_).substr(begin_end, p - begin_end);
          emit_data(strip_text(text, sign, true, line_starting), begin_end);
          line_starting = s_[end - 1] == '\n';
          return end;
        }
      }
      p += 2;
    }
  }

  Result<size_t> lex_tag(size_t tag, size_t i, bool is_var, bool& line_starting) {
    std::vector<char> balance;
    while (true) {
      if (i >= s_.size())
        return fail(tag, std::string("unexpected end of template inside the ") + (is_var ? "{{ ... }}" : "{% ... %}") +
                             " tag that starts here");
      if (balance.empty()) {
        if (is_var) {
          if (s_.compare(i, 3, "-}}") == 0) {
            push(Tok::kVarEnd, "}}", i);
            size_t end = skip_space(i + 3);
            line_starting = s_[end - 1] == '\n';
            return end;
          }
          if (s_.compare(i, 2, "}}") == 0) {
            push(Tok::kVarEnd, "}}", i);
            line_starting = false;
            return i + 2;
          }
        } else {
          size_t end = std::string::npos;
          if (s_.compare(i, 3, "+%}") == 0)
            end = i + 3;
          else if (s_.compare(i, 3, "-%}") == 0)
            end = skip_space(i + 3);
          else if (s_.compare(i, 2, "%}") == 0)
            end = (i + 2 < s_.size() && s_[i + 2] == '\n') ? i + 3 : i + 2;
          if (end != std::string::npos) {
            push(Tok::kBlockEnd, "%}", i);
            line_starting = s_[end - 1] == '\n';
            return end;
          }
        }
      }
      if (size_t n = space_len(s_, i)) {
        i += n;
        continue;
      }
      char c = s_[i];
      if (is_digit(c)) {
        KILN_ASSIGN_OR_RETURN(i, lex_number(i));
        continue;
      }
      if (is_name_start(c)) {
        size_t j = i;
        while (j < s_.size() && is_name_char(s_[j])) ++j;
        push(Tok::kName, s_.substr(i, j - i), i);
        i = j;
        continue;
      }
      if (c == '\'' || c == '"') {
        size_t j = i + 1;
        while (j < s_.size() && s_[j] != c) j += s_[j] == '\\' ? 2 : 1;
        if (j >= s_.size()) return fail(i, "unterminated string literal");
        auto [line, col] = line_col(i);
        KILN_ASSIGN_OR_RETURN(std::string v, unescape(std::string_view(s_).substr(i + 1, j - i - 1), line, col));
        push(Tok::kString, std::move(v), i);
        i = j + 1;
        continue;
      }
      static const char* const kOps2[] = {"//", "**", "==", "!=", ">=", "<="};
      bool two = false;
      for (const char* op : kOps2)
        if (s_.compare(i, 2, op) == 0) {
          push(Tok::kOp, op, i);
          i += 2;
          two = true;
          break;
        }
      if (two) continue;
      if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
        char buf[8];
        std::snprintf(buf, sizeof buf, static_cast<unsigned char>(c) < 0x80 && c >= 0x20 ? "'%c'" : "0x%02x",
                      static_cast<unsigned char>(c));
        return fail(i, std::string("unexpected character ") + buf + " in a tag");
      }
      if (c == '(' || c == '[' || c == '{') {
        if (balance.size() >= 256) return fail(i, "the template nests too deeply (more than 256 open brackets)");
        balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      } else if (c == ')' || c == ']' || c == '}') {
        if (balance.empty()) return fail(i, std::string("unexpected '") + c + "'");
        if (balance.back() != c)
          return fail(i, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
        balance.pop_back();
      }
      push(Tok::kOp, std::string(1, c), i);
      ++i;
    }
  }

  Result<size_t> lex_number(size_t i) {
    // Float first, as Jinja's rules do: digits, then a fraction and/or an exponent.
    if (i == 0 || s_[i - 1] != '.') {
      size_t d = scan_digits(s_, i);
      size_t q = d;
      bool frac = false, exp = false;
      if (q < s_.size() && s_[q] == '.') {
        size_t f = scan_digits(s_, q + 1);
        if (f != std::string::npos) {
          q = f;
          frac = true;
        }
      }
      if (q < s_.size() && (s_[q] == 'e' || s_[q] == 'E')) {
        size_t e = q + 1;
        if (e < s_.size() && (s_[e] == '+' || s_[e] == '-')) ++e;
        size_t x = scan_digits(s_, e);
        if (x != std::string::npos) {
          q = x;
          exp = true;
        }
      }
      if (frac || exp) {
        std::string t;
        for (size_t k = i; k < q; ++k)
          if (s_[k] != '_') t += s_[k];
        Token tok = make(Tok::kFloat, s_.substr(i, q - i), i);
        tok.fval = std::strtod(t.c_str(), nullptr);
        toks_.push_back(std::move(tok));
        return q;
      }
    }
    // Integers: 0b.., 0o.., 0x.., [1-9](_?\d)*, 0(_?0)*.
    int base = 10;
    size_t j = i;
    std::string digits;
    auto take = [&](auto ok) {
      while (true) {
        if (j < s_.size() && ok(s_[j])) {
          digits += s_[j++];
        } else if (j + 1 < s_.size() && s_[j] == '_' && ok(s_[j + 1])) {
          ++j;
        } else {
          break;
        }
      }
    };
    char p = (s_[i] == '0' && i + 1 < s_.size()) ? static_cast<char>(s_[i + 1] | 0x20) : 0;
    auto is_bin = [](char c) { return c == '0' || c == '1'; };
    auto is_oct = [](char c) { return c >= '0' && c <= '7'; };
    auto is_hex = [](char c) { return hex_value(c) >= 0; };
    if (p == 'b' || p == 'o' || p == 'x') {
      base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
      j = i + 2;
      if (base == 2)
        take(is_bin);
      else if (base == 8)
        take(is_oct);
      else
        take(is_hex);
      if (digits.empty()) {
        base = 10;
        j = i;
      }
    }
    if (base == 10) {
      if (s_[i] == '0')
        take([](char c) { return c == '0'; });
      else
        take(is_digit);
    }
    unsigned __int128 v = 0;
    for (char c : digits) {
      v = v * static_cast<unsigned>(base) + static_cast<unsigned>(hex_value(c));
      if (v > static_cast<unsigned __int128>(INT64_MAX)) return fail(i, "integer literal beyond 64 bits");
    }
    Token tok = make(Tok::kInt, s_.substr(i, j - i), i);
    tok.ival = static_cast<int64_t>(v);
    toks_.push_back(std::move(tok));
    return j;
  }

  std::pair<int, int> line_col(size_t offset) {
    // Positions mostly grow, so walk forward from the last one asked for.
    if (offset < cache_off_) {
      cache_off_ = 0;
      cache_line_ = 1;
      cache_col_ = 1;
    }
    for (size_t k = cache_off_; k < offset && k < s_.size(); ++k) {
      if (s_[k] == '\n') {
        ++cache_line_;
        cache_col_ = 1;
      } else if ((static_cast<unsigned char>(s_[k]) & 0xc0) != 0x80) {
        ++cache_col_;
      }
    }
    cache_off_ = offset;
    return {cache_line_, cache_col_};
  }

  Token make(Tok type, std::string text, size_t offset) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    auto [line, col] = line_col(offset);
    t.line = line;
    t.col = col;
    return t;
  }
  void push(Tok type, std::string text, size_t offset) { toks_.push_back(make(type, std::move(text), offset)); }
  void emit_data(std::string_view text, size_t offset) {
    if (!text.empty()) push(Tok::kData, std::string(text), offset);
  }
  Status fail(size_t offset, const std::string& msg) {
    auto [line, col] = line_col(offset);
    return corrupt(where(line, col) + ": " + msg);
  }

  std::string s_;
  std::vector<Token> toks_;
  size_t cache_off_ = 0;
  int cache_line_ = 1;
  int cache_col_ = 1;
};

}  // namespace

Result<std::vector<Token>> lex_template(std::string_view source) {
  if (!is_valid_utf8(source)) return corrupt("the template is not valid UTF-8");
  // Jinja treats \r\n and \r as \n and drops one trailing newline.
  std::string s;
  s.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      s += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      s += source[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return Lexer(std::move(s)).run();
}

}  // namespace kiln::jinja
