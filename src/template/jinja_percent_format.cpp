// Python's `fmt % args` for strings: the % operator and the format filter.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "template/jinja_builtins.h"
#include "template/jinja_text.h"

namespace kiln::jinja {

namespace {

Result<std::string> pad_text(const std::string& s, int64_t width, bool left_justify) {
  int64_t n = static_cast<int64_t>(count_code_points(s));
  if (width > (int64_t{1} << 24)) return invalid_argument("format width too large");
  if (width <= n) return s;
  std::string pad(static_cast<size_t>(width - n), ' ');
  return left_justify ? s + pad : pad + s;
}

// One conversion: "%-08.3f" is flags "-0", width 8, precision 3, conversion 'f'.
struct ConversionSpec {
  std::string flags;
  int64_t width = 0, prec = -1;
  bool has_width = false, has_prec = false;
  char conv = 0;
};

// The text of one value under one conversion spec.
Result<std::string> convert_one(Interpreter& in, const Value& v, const ConversionSpec& sp) {
  const std::string& flags = sp.flags;
  const int64_t width = sp.width, prec = sp.prec;
  const bool has_width = sp.has_width, has_prec = sp.has_prec, left = flags.find('-') != std::string::npos;
  const char conv = sp.conv;
  std::string piece;
  switch (conv) {
    case 's':
    case 'r':
    case 'a': {
      KILN_ASSIGN_OR_RETURN(piece, conv == 's' ? in.text(v) : in.repr(v));
      if (has_prec) piece = piece.substr(0, byte_offset_of(piece, static_cast<size_t>(std::max<int64_t>(prec, 0))));
      KILN_ASSIGN_OR_RETURN(piece, pad_text(piece, width, left));
      break;
    }
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o': {
      int64_t n;
      if (v.is_int() || v.is_bool())
        n = v.as_int();
      else if (v.is_float() && (conv == 'd' || conv == 'i' || conv == 'u') && std::isfinite(v.as_double()) &&
               std::fabs(v.as_double()) < 9.2e18)
        n = static_cast<int64_t>(v.as_double());
      else
        return invalid_argument(std::string("%") + conv + " format: a real number is required, not " +
                                v.type_name());
      std::string spec = "%" + flags + (has_width ? std::to_string(width) : "") +
                         (has_prec ? "." + std::to_string(prec) : "") + "ll" +
                         (conv == 'u' || conv == 'i' ? 'd' : conv);
      char buf[128];
      int len = std::snprintf(buf, sizeof buf, spec.c_str(), static_cast<long long>(n));
      piece.assign(buf, static_cast<size_t>(std::max(0, std::min<int>(len, sizeof buf - 1))));
      if (len >= static_cast<int>(sizeof buf)) {
        KILN_ASSIGN_OR_RETURN(piece, pad_text(std::to_string(n), width, left));
      }
      if (conv == 'o' && flags.find('#') != std::string::npos) {
        size_t z = piece.find('0');
        if (z != std::string::npos) piece.insert(z + 1, "o");
      }
      break;
    }
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G': {
      if (!v.is_number()) return invalid_argument(std::string("must be real number, not ") + v.type_name());
      std::string spec = "%" + flags + (has_width ? std::to_string(width) : "") +
                         (has_prec ? "." + std::to_string(std::min<int64_t>(prec, 100)) : "") + conv;
      std::string buf(static_cast<size_t>(width) + 400, '\0');
      int len = std::snprintf(buf.data(), buf.size(), spec.c_str(), v.as_double());
      piece = buf.substr(0, static_cast<size_t>(std::max(0, std::min<int>(len, static_cast<int>(buf.size()) - 1))));
      break;
    }
    case 'c': {
      if (v.is_string() && count_code_points(v.str()) == 1)
        piece = v.str();
      else if (v.is_int() && v.as_int() >= 0 && v.as_int() <= 0x10ffff &&
               !(v.as_int() >= 0xd800 && v.as_int() <= 0xdfff))
        append_utf8(piece, static_cast<char32_t>(v.as_int()));
      else
        return invalid_argument("%c requires an int or a unicode character");
      KILN_ASSIGN_OR_RETURN(piece, pad_text(piece, width, left));
      break;
    }
    default:
      return invalid_argument(std::string("unsupported format character '") + conv + "'");
  }
  return piece;
}

}  // namespace

Result<Value> percent_format(Interpreter& in, const Value& fmt, const Value& arg) {
  const std::string& f = fmt.str();
  ValueList pos;
  const Object* mapping = nullptr;
  if (arg.is_list() && arg.list_kind() == ListKind::kTuple) {
    pos = arg.items();
  } else {
    pos.push_back(arg);
    if (arg.is_dict()) mapping = &arg.object();
  }
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i >= f.size()) return invalid_argument("incomplete format");
    if (f[i] == '%') {
      out += '%';
      continue;
    }
    const Value* v = nullptr;
    if (f[i] == '(') {
      size_t close = f.find(')', i);
      if (close == std::string::npos) return invalid_argument("incomplete format key");
      if (mapping == nullptr) return invalid_argument("format requires a mapping");
      v = mapping->find(Value::string(f.substr(i + 1, close - i - 1)));
      if (v == nullptr) return invalid_argument("KeyError: '" + f.substr(i + 1, close - i - 1) + "'");
      i = close + 1;
    }
    ConversionSpec sp;
    while (i < f.size() && std::string_view("-+ #0").find(f[i]) != std::string_view::npos) sp.flags += f[i++];
    auto take_num = [&](int64_t& out_n, bool& given) -> Status {
      given = false;
      if (i < f.size() && f[i] == '*') {
        if (next >= pos.size()) return invalid_argument("not enough arguments for format string");
        const Value& w = pos[next++];
        if (!w.is_int()) return invalid_argument("* wants int");
        // Python runs out of memory past this; a huge width must not reach an allocation.
        if (w.as_int() > (int64_t{1} << 24) || w.as_int() < -(int64_t{1} << 24))
          return invalid_argument("format width too large");
        out_n = w.as_int();
        given = true;
        ++i;
        return Status::ok();
      }
      int64_t n = 0;
      while (i < f.size() && f[i] >= '0' && f[i] <= '9') {
        n = n * 10 + (f[i++] - '0');
        given = true;
        if (n > (int64_t{1} << 24)) return invalid_argument("format width too large");
      }
      out_n = n;
      return Status::ok();
    };
    KILN_RETURN_IF_ERROR(take_num(sp.width, sp.has_width));
    if (sp.width < 0) {  // a negative * width left-justifies, as in Python
      sp.width = -sp.width;
      sp.flags += '-';
    }
    if (i < f.size() && f[i] == '.') {
      ++i;
      int64_t p = 0;
      KILN_RETURN_IF_ERROR(take_num(p, sp.has_prec));
      sp.prec = std::max<int64_t>(p, 0);  // a negative * precision counts as 0, as in Python
      sp.has_prec = true;
    }
    while (i < f.size() && (f[i] == 'h' || f[i] == 'l' || f[i] == 'L')) ++i;
    if (i >= f.size()) return invalid_argument("incomplete format");
    sp.conv = f[i];
    if (v == nullptr) {
      if (next >= pos.size()) return invalid_argument("not enough arguments for format string");
      v = &pos[next++];
    }
    KILN_ASSIGN_OR_RETURN(std::string piece, convert_one(in, *v, sp));
    out += piece;
    if (out.size() > in.limits().max_output_bytes)
      return invalid_argument("format: the text is larger than the output limit");
  }
  if (mapping == nullptr && next < pos.size())
    return invalid_argument("not all arguments converted during string formatting");
  return in.make_string(std::move(out));
}

}  // namespace kiln::jinja
