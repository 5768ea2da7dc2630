// Jinja2's built-in filters (and Hugging Face's tojson), with Jinja2's argument names and
// defaults, as a table from name to function.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "template/jinja_args.h"
#include "template/jinja_builtins.h"
#include "template/jinja_name_table.h"
#include "template/jinja_text.h"

namespace kiln::jinja {

namespace {

Result<std::string> soft_str(Interpreter& in, const Value& v) { return in.text(v); }

Status undefined_value_error(const Value& u) {
  return invalid_argument(u.undefined_hint().empty() ? "an undefined value was used" : u.undefined_hint());
}

// A lookup by a dotted path ("function.name", "0"), as Jinja's make_attrgetter does.
struct AttrGetter {
  std::vector<Value> parts;
  bool lower = false;  // lowercase strings (case-insensitive comparisons)
  const Value* fallback = nullptr;

  Result<Value> operator()(Interpreter& in, const Value& item) const {
    Value v = item;
    for (const Value& p : parts) {
      KILN_ASSIGN_OR_RETURN(v, in.getitem(v, p));
    }
    if (fallback && v.is_undefined()) v = *fallback;
    if (lower && v.is_string()) return Value::string(py_lower(v.str()));
    return v;
  }
};

Result<AttrGetter> make_getter(const Value* attribute, bool lower) {
  AttrGetter g;
  g.lower = lower;
  if (attribute == nullptr || attribute->is_none()) return g;
  if (attribute->is_int()) {
    g.parts.push_back(*attribute);
    return g;
  }
  if (!attribute->is_string()) return invalid_argument("attribute must be a string or an integer");
  const std::string dot = ".";
  for (const std::string& part : py_split(attribute->str(), &dot, -1)) {
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits && part.size() < 18)
      g.parts.push_back(Value::integer(std::strtoll(part.c_str(), nullptr, 10)));
    else
      g.parts.push_back(Value::string(part));
  }
  return g;
}

Value generator(ValueList items, const char* type = "generator") {
  auto it = std::make_shared<IterState>();
  it->items = std::move(items);
  it->type_name = type;
  return Value::iterator(std::move(it));
}

Result<size_t> length_of(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return size_t{0};
    case Kind::kString:
      return count_code_points(v.str());
    case Kind::kList:
      return v.items().size();
    case Kind::kDict:
      return v.object().items.size();
    case Kind::kLoop:
      return v.loop_state().items->items.size();
    default:
      return invalid_argument("object of type '" + v.type_name() + "' has no len()");
  }
}

Result<Value> parse_int_text(const std::string& text, int64_t base, bool* ok) {
  *ok = false;
  std::string s = py_strip(text, nullptr, true, true);
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (base == 16 && s.compare(i, 2, "0x") == 0)
    i += 2;
  else if (base == 8 && s.compare(i, 2, "0o") == 0)
    i += 2;
  else if (base == 2 && s.compare(i, 2, "0b") == 0)
    i += 2;
  if (i >= s.size()) return Value();
  unsigned __int128 v = 0;
  bool prev_digit = false;
  for (; i < s.size(); ++i) {
    char c = static_cast<char>(s[i] | 0x20);
    if (s[i] == '_' && prev_digit && i + 1 < s.size() && s[i + 1] != '_') {
      prev_digit = false;
      continue;
    }
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'z') ? c - 'a' + 10 : 99;
    if (d >= base) return Value();
    v = v * static_cast<unsigned>(base) + static_cast<unsigned>(d);
    if (v > static_cast<unsigned __int128>(INT64_MAX)) return invalid_argument("int(): the value is beyond 64 bits");
    prev_digit = true;
  }
  if (!prev_digit) return Value();
  *ok = true;
  int64_t r = static_cast<int64_t>(v);
  return Value::integer(neg ? -r : r);
}

// Python's float(str); nullopt when the text is not a number.
std::optional<double> parse_float_text(const std::string& text) {
  std::string s = py_strip(text, nullptr, true, true);
  std::string t;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) t += s[i++];
  std::string rest = py_lower(s.substr(i));
  if (rest == "inf" || rest == "infinity") return t == "-" ? -INFINITY : INFINITY;
  if (rest == "nan") return NAN;
  bool digits = false, dot = false, exp = false;
  for (size_t k = 0; k < rest.size(); ++k) {
    char c = rest[k];
    if (c >= '0' && c <= '9') {
      digits = true;
      t += c;
    } else if (c == '_' && k > 0 && k + 1 < rest.size() && rest[k - 1] >= '0' && rest[k - 1] <= '9' &&
               rest[k + 1] >= '0' && rest[k + 1] <= '9') {
      continue;
    } else if (c == '.' && !dot && !exp) {
      dot = true;
      t += c;
    } else if (c == 'e' && digits && !exp) {
      exp = true;
      t += c;
      if (k + 1 < rest.size() && (rest[k + 1] == '+' || rest[k + 1] == '-')) t += rest[++k];
      if (k + 1 >= rest.size()) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  if (!digits) return std::nullopt;
  return std::strtod(t.c_str(), nullptr);
}

Result<Value> to_int_value(const Value& v, const Value* fallback, int64_t base) {
  Value def = fallback ? *fallback : Value::integer(0);
  if (v.is_int()) return v;
  if (v.is_bool()) return Value::integer(v.as_int());
  if (v.is_float()) {
    double d = v.as_double();
    if (std::isnan(d)) return def;
    if (std::isinf(d)) return invalid_argument("cannot convert float infinity to integer");
    if (std::fabs(d) >= 9.2e18) return invalid_argument("int(): the value is beyond 64 bits");
    return Value::integer(static_cast<int64_t>(d));
  }
  if (v.is_string()) {
    bool ok = false;
    KILN_ASSIGN_OR_RETURN(Value r, parse_int_text(v.str(), base, &ok));
    if (ok) return r;
    auto d = parse_float_text(v.str());
    if (d && !std::isnan(*d)) {
      if (std::isinf(*d)) return invalid_argument("cannot convert float infinity to integer");
      if (std::fabs(*d) >= 9.2e18) return invalid_argument("int(): the value is beyond 64 bits");
      return Value::integer(static_cast<int64_t>(*d));
    }
  }
  return def;
}

Result<Value> filter_tojson(Interpreter& in, const std::string&, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonStyle st;
  st.ensure_ascii = bool_arg(b.get(0), false);
  st.sort_keys = bool_arg(b.get(3), false);
  if (const Value* ind = b.get(1); ind && !ind->is_none()) {
    st.indent_set = true;
    if (ind->is_string())
      st.indent = ind->str();
    else if (ind->is_int() || ind->is_bool())
      st.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(ind->as_int(), 0, 1024)), ' ');
    else
      return invalid_argument("tojson: indent must be an integer or a string");
    st.item_sep = ",";
  }
  if (const Value* sep = b.get(2); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->items().size() != 2 || !sep->items()[0].is_string() || !sep->items()[1].is_string())
      return invalid_argument("tojson: separators must be a pair of strings");
    st.item_sep = sep->items()[0].str();
    st.key_sep = sep->items()[1].str();
  }
  std::string out;
  KILN_RETURN_IF_ERROR(to_json_text(v, st, out, in.limits().max_output_bytes));
  return in.make_string(std::move(out));
}

// select / reject / selectattr / rejectattr.
Result<Value> filter_select(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  const bool with_attr = name.ends_with("attr");
  const bool keep_if = name.starts_with("select");
  if (!v.truthy()) return generator({});  // Jinja checks nothing when the input is empty or None
  if (!args.kw.empty()) return invalid_argument("select filters take no keyword arguments");
  size_t k = 0;
  AttrGetter getter;
  if (with_attr) {
    if (args.pos.empty()) return invalid_argument("selectattr/rejectattr need an attribute name");
    KILN_ASSIGN_OR_RETURN(getter, make_getter(&args.pos[0], false));
    k = 1;
  }
  std::string test;
  CallArgs test_args;
  if (k < args.pos.size()) {
    if (!args.pos[k].is_string()) return invalid_argument("the test name must be a string");
    test = args.pos[k].str();
    if (!is_supported_test(test)) return invalid_argument("No test named '" + test + "'.");
    test_args.pos.assign(args.pos.begin() + static_cast<std::ptrdiff_t>(k + 1), args.pos.end());
  }
  KILN_ASSIGN_OR_RETURN(ValueList items, in.iterate(v));
  ValueList kept;
  for (Value& item : items) {
    Value probe = item;
    if (with_attr) {
      KILN_ASSIGN_OR_RETURN(probe, getter(in, item));
    }
    bool r;
    if (test.empty()) {
      r = probe.truthy();
    } else {
      KILN_ASSIGN_OR_RETURN(r, call_test(in, test, probe, test_args));
    }
    if (r == keep_if) kept.push_back(std::move(item));
  }
  return generator(std::move(kept));
}

Result<Value> filter_map(Interpreter& in, const std::string&, const Value& v, const CallArgs& args) {
  if (!v.truthy()) return generator({});
  KILN_ASSIGN_OR_RETURN(ValueList items, in.iterate(v));
  ValueList out;
  out.reserve(items.size());
  if (args.pos.empty()) {
    const Value* attribute = nullptr;
    const Value* fallback = nullptr;
    for (const auto& [k, val] : args.kw) {
      if (k == "attribute")
        attribute = &val;
      else if (k == "default")
        fallback = &val;
      else
        return invalid_argument("map: unexpected keyword argument '" + k + "'");
    }
    if (attribute == nullptr) return invalid_argument("map requires a filter name or attribute=...");
    KILN_ASSIGN_OR_RETURN(AttrGetter g, make_getter(attribute, false));
    g.fallback = fallback;
    for (const Value& item : items) {
      KILN_ASSIGN_OR_RETURN(Value r, g(in, item));
      out.push_back(std::move(r));
    }
    return generator(std::move(out));
  }
  if (!args.pos[0].is_string()) return invalid_argument("map: the filter name must be a string");
  const std::string& filter = args.pos[0].str();
  if (!is_supported_filter(filter)) return invalid_argument("No filter named '" + filter + "'.");
  CallArgs fargs;
  fargs.pos.assign(args.pos.begin() + 1, args.pos.end());
  fargs.kw = args.kw;
  for (const Value& item : items) {
    KILN_ASSIGN_OR_RETURN(Value r, call_filter(in, filter, item, fargs));
    out.push_back(std::move(r));
  }
  return generator(std::move(out));
}

Result<Value> filter_min_max(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  const bool want_max = name == "max";
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, name, {"case_sensitive", "attribute"}));
  KILN_ASSIGN_OR_RETURN(AttrGetter g, make_getter(b.get(1), !bool_arg(b.get(0), false)));
  KILN_ASSIGN_OR_RETURN(ValueList items, in.iterate(v));
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  KILN_ASSIGN_OR_RETURN(Value best_key, g(in, items[0]));
  for (size_t i = 1; i < items.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value key, g(in, items[i]));
    KILN_ASSIGN_OR_RETURN(bool better,
                          want_max ? py_less(best_key, key, in.work()) : py_less(key, best_key, in.work()));
    if (better) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}

std::string indent_text(const std::string& s0, const std::string& ind, bool first, bool blank) {
  std::string s = s0 + "\n";
  std::vector<std::string> lines = py_splitlines(s, false);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv.append("\n").append(ind);
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += '\n';
      if (!lines[i].empty()) rv.append(ind).append(lines[i]);
    }
  }
  if (first) rv.insert(0, ind);
  return rv;
}

std::string jinja_title(const std::string& s) {
  std::u32string u = to_u32(s);
  std::string out;
  bool start = true;
  for (char32_t c : u) {
    bool sep = py_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    std::string one;
    append_utf8(one, c);
    if (sep) {
      out += one;
      start = true;
    } else if (start) {
      out += py_upper(one);
      start = false;
    } else {
      out += py_lower(one);
    }
  }
  return out;
}

bool is_word_char(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (py_isspace(c)) return false;
  if ((c >= 0xa1 && c <= 0xbf && c != 0xaa && c != 0xb5 && c != 0xba) || c == 0xd7 || c == 0xf7) return false;
  if ((c >= 0x2000 && c <= 0x206f) || (c >= 0x3000 && c <= 0x303f) || (c >= 0xff00 && c <= 0xff0f) ||
      (c >= 0xff1a && c <= 0xff20) || (c >= 0xff3b && c <= 0xff40) || (c >= 0xff5b && c <= 0xff65))
    return false;
  return true;
}

Result<Value> filter_round(Interpreter&, const std::string&, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, "round", {"precision", "method"}));
  KILN_ASSIGN_OR_RETURN(int64_t precision, int_arg(b.get(0), 0, "round: precision"));
  KILN_ASSIGN_OR_RETURN(std::string method, str_arg(b.get(1), "common", "round: method"));
  if (method != "common" && method != "ceil" && method != "floor")
    return invalid_argument("round: method must be common, ceil or floor");
  if (!v.is_number()) return invalid_argument("round: a number is required, not " + v.type_name());
  precision = std::clamp<int64_t>(precision, -300, 300);
  if (method != "common") {
    double scale = std::pow(10.0, static_cast<double>(precision));
    double x = v.as_double() * scale;
    return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
  }
  if (!v.is_float()) {
    if (precision >= 0) return Value::integer(v.as_int());
    double scale = std::pow(10.0, static_cast<double>(-precision));
    return Value::integer(static_cast<int64_t>(std::nearbyint(static_cast<double>(v.as_int()) / scale) * scale));
  }
  double d = v.as_double();
  if (!std::isfinite(d)) return v;
  if (precision < 0) {
    double scale = std::pow(10.0, static_cast<double>(-precision));
    return Value::number(std::nearbyint(d / scale) * scale);
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(precision, 100)), d);
  return Value::number(std::strtod(buf, nullptr));
}

Status no_args(const std::string& name, const CallArgs& args) {
  if (!args.pos.empty() || !args.kw.empty()) return invalid_argument("the '" + name + "' filter takes no arguments");
  return Status::ok();
}

Result<Value> filter_trim(Interpreter& in, const std::string&, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, "trim", {"chars"}));
  KILN_ASSIGN_OR_RETURN(std::string s, soft_str(in, v));
  if (const Value* c = b.get(0); c && !c->is_none()) {
    if (!c->is_string()) return invalid_argument("trim: chars must be a string");
    std::u32string set = to_u32(c->str());
    return in.make_string(py_strip(s, &set, true, true), v.is_markup());
  }
  return in.make_string(py_strip(s, nullptr, true, true), v.is_markup());
}

Result<Value> filter_length(Interpreter&, const std::string& name, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(no_args(name, args));
  KILN_ASSIGN_OR_RETURN(size_t n, length_of(v));
  return Value::integer(static_cast<int64_t>(n));
}

Result<Value> filter_string(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(no_args(name, args));
  if (v.is_string()) return v;
  KILN_ASSIGN_OR_RETURN(std::string s, soft_str(in, v));
  return in.make_string(std::move(s));
}

Result<Value> filter_default(Interpreter&, const std::string& name, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, name, {"default_value", "boolean"}));
  Value def = b.has(0) ? *b.get(0) : Value::string("");
  if (v.is_undefined() || (bool_arg(b.get(1), false) && !v.truthy())) return def;
  return v;
}

Result<Value> filter_case(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(no_args(name, args));
  KILN_ASSIGN_OR_RETURN(std::string s, soft_str(in, v));
  std::string r = name == "upper"        ? py_upper(s)
                  : name == "lower"      ? py_lower(s)
                  : name == "capitalize" ? py_capitalize(s)
                                         : jinja_title(s);
  return in.make_string(std::move(r), v.is_markup());
}

Result<Value> filter_join(Interpreter& in, const std::string&, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, "join", {"d", "attribute"}));
  std::string sep;
  if (b.has(0)) {
    KILN_ASSIGN_OR_RETURN(sep, soft_str(in, *b.get(0)));
  }
  KILN_ASSIGN_OR_RETURN(AttrGetter g, make_getter(b.get(1), false));
  KILN_ASSIGN_OR_RETURN(ValueList items, in.iterate(v));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    Value item = items[i];
    if (b.has(1)) {
      KILN_ASSIGN_OR_RETURN(item, g(in, items[i]));
    }
    KILN_ASSIGN_OR_RETURN(std::string s, soft_str(in, item));
    out += s;
    if (out.size() > in.limits().max_output_bytes)
      return invalid_argument("join: the text is larger than the output limit");
  }
  return in.make_string(std::move(out));
}

Result<Value> filter_items(Interpreter&, const std::string& name, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(no_args(name, args));
  if (v.is_undefined()) return generator({}, "generator");
  if (!v.is_dict()) return invalid_argument("Can only get item pairs from a mapping.");
  ValueList pairs;
  for (const auto& kv : v.object().items) pairs.push_back(Value::list({kv.first, kv.second}, ListKind::kTuple));
  return generator(std::move(pairs));
}

Result<Value> filter_list(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(no_args(name, args));
  KILN_ASSIGN_OR_RETURN(ValueList items, in.iterate(v));
  KILN_RETURN_IF_ERROR(in.alloc(32 * items.size()));
  return Value::list(std::move(items));
}

Result<Value> filter_first(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(no_args(name, args));
  if (v.is_iterator()) {
    IterState& it = v.iter();
    if (it.pos < it.items.size()) return it.items[it.pos++];
    return Value::undefined("No first item, sequence was empty.");
  }
  if (v.is_list() && !v.items().empty()) return v.items()[0];
  if (v.is_dict() && !v.object().items.empty()) return v.object().items[0].first;
  if (v.is_string() && !v.str().empty()) return in.getitem(v, Value::integer(0));
  if (v.is_list() || v.is_dict() || v.is_string() || v.is_undefined())
    return Value::undefined("No first item, sequence was empty.");
  return invalid_argument("'" + v.type_name() + "' object is not iterable");
}

Result<Value> filter_last(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(no_args(name, args));
  if (v.is_list() && v.list_kind() != ListKind::kDictKeys && v.list_kind() != ListKind::kDictValues &&
      v.list_kind() != ListKind::kDictItems) {
    if (v.items().empty()) return Value::undefined("No last item, sequence was empty.");
    return v.items().back();
  }
  if (v.is_dict()) {
    if (v.object().items.empty()) return Value::undefined("No last item, sequence was empty.");
    return v.object().items.back().first;
  }
  if (v.is_string()) {
    if (v.str().empty()) return Value::undefined("No last item, sequence was empty.");
    return in.getitem(v, Value::integer(-1));
  }
  return invalid_argument("'" + v.type_name() + "' object is not reversible");
}

Result<Value> filter_replace(Interpreter& in, const std::string&, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, "replace", {"old", "new", "count"}));
  if (!b.has(0) || !b.has(1)) return invalid_argument("replace() needs old and new");
  KILN_ASSIGN_OR_RETURN(std::string s, soft_str(in, v));
  KILN_ASSIGN_OR_RETURN(std::string old, soft_str(in, *b.get(0)));
  KILN_ASSIGN_OR_RETURN(std::string repl, soft_str(in, *b.get(1)));
  KILN_ASSIGN_OR_RETURN(int64_t count, int_arg(b.get(2), -1, "replace: count"));
  if (old.empty() && repl.size() * (count_code_points(s) + 1) > in.limits().max_output_bytes)
    return invalid_argument("replace: the text would be larger than the output limit");
  std::string r = py_replace(s, old, repl, count);
  return in.make_string(std::move(r));
}

Result<Value> filter_int(Interpreter&, const std::string&, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, "int", {"default", "base"}));
  KILN_ASSIGN_OR_RETURN(int64_t base, int_arg(b.get(1), 10, "int: base"));
  if (base < 2 || base > 36) return invalid_argument("int() base must be >= 2 and <= 36");
  if (v.is_undefined()) return undefined_value_error(v);
  return to_int_value(v, b.get(0), base);
}

Result<Value> filter_float(Interpreter&, const std::string&, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, "float", {"default"}));
  Value def = b.has(0) ? *b.get(0) : Value::number(0.0);
  if (v.is_undefined()) return undefined_value_error(v);
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_string()) {
    auto d = parse_float_text(v.str());
    if (d) return Value::number(*d);
  }
  return def;
}

Result<Value> filter_abs(Interpreter&, const std::string& name, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(no_args(name, args));
  if (v.is_float()) return Value::number(std::fabs(v.as_double()));
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) return invalid_argument("abs: integer overflow");
    return Value::integer(std::llabs(v.as_int()));
  }
  return invalid_argument("bad operand type for abs(): '" + v.type_name() + "'");
}

Result<Value> filter_reverse(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(no_args(name, args));
  if (v.is_string()) {
    std::u32string u = to_u32(v.str());
    std::reverse(u.begin(), u.end());
    return in.make_string(to_utf8(u));
  }
  if (v.is_undefined()) return generator({}, "reversed");
  KILN_ASSIGN_OR_RETURN(ValueList items, in.iterate(v));
  std::reverse(items.begin(), items.end());
  const char* type = v.is_dict()                                        ? "dict_reversekeyiterator"
                     : v.is_list() && v.list_kind() == ListKind::kTuple ? "reversed"
                     : v.is_list() && v.list_kind() == ListKind::kRange ? "range_iterator"
                                                                        : "list_reverseiterator";
  if (v.is_iterator()) return Value::list(std::move(items));
  return generator(std::move(items), type);
}

// The values of (key, value) pairs as a list, in the order of their keys.
Result<Value> sorted_values(Interpreter& in, std::vector<std::pair<Value, Value>> kv, bool reverse) {
  KILN_RETURN_IF_ERROR(in.step(kv.size() * 8));
  KILN_RETURN_IF_ERROR(sort_by_key(kv, reverse, in.work()));
  ValueList out;
  for (auto& p : kv) out.push_back(std::move(p.second));
  return Value::list(std::move(out));
}

Result<Value> filter_sort(Interpreter& in, const std::string&, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, "sort", {"reverse", "case_sensitive", "attribute"}));
  KILN_ASSIGN_OR_RETURN(AttrGetter g, make_getter(b.get(2), !bool_arg(b.get(1), false)));
  KILN_ASSIGN_OR_RETURN(ValueList items, in.iterate(v));
  std::vector<std::pair<Value, Value>> kv;
  for (Value& item : items) {
    KILN_ASSIGN_OR_RETURN(Value key, g(in, item));
    kv.emplace_back(std::move(key), std::move(item));
  }
  return sorted_values(in, std::move(kv), bool_arg(b.get(0), false));
}

Result<Value> filter_dictsort(Interpreter& in, const std::string&, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, "dictsort", {"case_sensitive", "by", "reverse"}));
  KILN_ASSIGN_OR_RETURN(std::string by, str_arg(b.get(1), "key", "dictsort: by"));
  if (by != "key" && by != "value") return invalid_argument("You can only sort by either \"key\" or \"value\"");
  if (!v.is_dict()) return invalid_argument("dictsort: a mapping is required, not " + v.type_name());
  bool lower = !bool_arg(b.get(0), false);
  std::vector<std::pair<Value, Value>> kv;
  for (const auto& p : v.object().items) {
    Value key = by == "key" ? p.first : p.second;
    if (lower && key.is_string()) key = Value::string(py_lower(key.str()));
    kv.emplace_back(std::move(key), Value::list({p.first, p.second}, ListKind::kTuple));
  }
  return sorted_values(in, std::move(kv), bool_arg(b.get(2), false));
}

Result<Value> filter_unique(Interpreter& in, const std::string&, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, "unique", {"case_sensitive", "attribute"}));
  KILN_ASSIGN_OR_RETURN(AttrGetter g, make_getter(b.get(1), !bool_arg(b.get(0), false)));
  KILN_ASSIGN_OR_RETURN(ValueList items, in.iterate(v));
  ValueList seen, out;
  for (Value& item : items) {
    KILN_ASSIGN_OR_RETURN(Value key, g(in, item));
    if (!key.hashable()) return invalid_argument("unhashable type: '" + key.type_name() + "'");
    bool dup = false;
    KILN_RETURN_IF_ERROR(in.step(seen.size()));
    for (const Value& s : seen) dup = dup || py_equal(s, key, in.work());
    if (dup) continue;
    seen.push_back(std::move(key));
    out.push_back(std::move(item));
  }
  return generator(std::move(out));
}

Result<Value> filter_sum(Interpreter& in, const std::string&, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, "sum", {"attribute", "start"}));
  KILN_ASSIGN_OR_RETURN(AttrGetter g, make_getter(b.get(0), false));
  Value total = b.has(1) ? *b.get(1) : Value::integer(0);
  if (total.is_string()) return invalid_argument("sum() can't sum strings [use ''.join(seq) instead]");
  KILN_ASSIGN_OR_RETURN(ValueList items, in.iterate(v));
  for (const Value& item : items) {
    KILN_ASSIGN_OR_RETURN(Value x, g(in, item));
    KILN_ASSIGN_OR_RETURN(total, in.binary(BinOp::kAdd, total, x));
  }
  return total;
}

Result<Value> filter_batch(Interpreter& in, const std::string&, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, "batch", {"linecount", "fill_with"}));
  KILN_ASSIGN_OR_RETURN(int64_t n, int_arg(b.get(0), 0, "batch: linecount"));
  if (n <= 0) return invalid_argument("batch: linecount must be positive");
  KILN_ASSIGN_OR_RETURN(ValueList items, in.iterate(v));
  ValueList out, cur;
  for (Value& item : items) {
    cur.push_back(std::move(item));
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (b.has(1) && !b.get(1)->is_none())
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*b.get(1));
    out.push_back(Value::list(std::move(cur)));
  }
  return generator(std::move(out));
}

Result<Value> filter_indent(Interpreter& in, const std::string&, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, "indent", {"width", "first", "blank"}));
  std::string ind = "    ";
  if (const Value* w = b.get(0)) {
    if (w->is_string())
      ind = w->str();
    else if (w->is_int() || w->is_bool())
      ind = std::string(static_cast<size_t>(std::clamp<int64_t>(w->as_int(), 0, 1024)), ' ');
    else
      return invalid_argument("indent: width must be an integer or a string");
  }
  KILN_ASSIGN_OR_RETURN(std::string s, soft_str(in, v));
  if (ind.size() * (s.size() + 1) > in.limits().max_output_bytes)
    return invalid_argument("indent: the text would be larger than the output limit");
  return in.make_string(indent_text(s, ind, bool_arg(b.get(1), false), bool_arg(b.get(2), false)));
}

Result<Value> filter_center(Interpreter& in, const std::string&, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, "center", {"width"}));
  KILN_ASSIGN_OR_RETURN(int64_t width, int_arg(b.get(0), 80, "center: width"));
  KILN_ASSIGN_OR_RETURN(std::string s, soft_str(in, v));
  int64_t n = static_cast<int64_t>(count_code_points(s));
  if (width > static_cast<int64_t>(in.limits().max_output_bytes)) return invalid_argument("center: width too large");
  if (width <= n) return in.make_string(s);
  int64_t marg = width - n;
  int64_t left = marg / 2 + (marg & width & 1);
  return in.make_string(std::string(static_cast<size_t>(left), ' ') + s +
                        std::string(static_cast<size_t>(marg - left), ' '));
}

Result<Value> filter_wordcount(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(no_args(name, args));
  KILN_ASSIGN_OR_RETURN(std::string s, soft_str(in, v));
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : to_u32(s)) {
    bool w = is_word_char(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Result<Value> filter_safe(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(no_args(name, args));
  if (v.is_markup()) return v;
  KILN_ASSIGN_OR_RETURN(std::string s, soft_str(in, v));
  return in.make_string(std::move(s), true);
}

Result<Value> filter_escape(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(no_args(name, args));
  if (v.is_markup() && name != "forceescape") return v;
  KILN_ASSIGN_OR_RETURN(std::string s, soft_str(in, v));
  return in.make_string(html_escape(s), true);
}

Result<Value> filter_attr(Interpreter& in, const std::string&, const Value& v, const CallArgs& args) {
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, "attr", {"name"}));
  KILN_ASSIGN_OR_RETURN(std::string attr, str_arg(b.get(0), "", "attr: name"));
  return in.getattr_only(v, attr);
}

Result<Value> filter_format(Interpreter& in, const std::string&, const Value& v, const CallArgs& args) {
  if (!args.pos.empty() && !args.kw.empty())
    return invalid_argument("can't handle positional and keyword arguments at the same time");
  KILN_ASSIGN_OR_RETURN(std::string s, soft_str(in, v));
  Value fmt = Value::string(s);
  if (!args.kw.empty()) {
    std::vector<std::pair<Value, Value>> kv;
    for (const auto& [k, val] : args.kw) kv.emplace_back(Value::string(k), val);
    KILN_ASSIGN_OR_RETURN(Value d, make_dict(std::move(kv)));
    return percent_format(in, fmt, d);
  }
  return percent_format(in, fmt, Value::list(args.pos, ListKind::kTuple));
}

// Every filter by name, sorted: the one list of the filters kiln runs.
using FilterFn = Result<Value> (*)(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args);
struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", filter_abs},
    {"attr", filter_attr},
    {"batch", filter_batch},
    {"capitalize", filter_case},
    {"center", filter_center},
    {"count", filter_length},
    {"d", filter_default},
    {"default", filter_default},
    {"dictsort", filter_dictsort},
    {"e", filter_escape},
    {"escape", filter_escape},
    {"first", filter_first},
    {"float", filter_float},
    {"forceescape", filter_escape},
    {"format", filter_format},
    {"indent", filter_indent},
    {"int", filter_int},
    {"items", filter_items},
    {"join", filter_join},
    {"last", filter_last},
    {"length", filter_length},
    {"list", filter_list},
    {"lower", filter_case},
    {"map", filter_map},
    {"max", filter_min_max},
    {"min", filter_min_max},
    {"reject", filter_select},
    {"rejectattr", filter_select},
    {"replace", filter_replace},
    {"reverse", filter_reverse},
    {"round", filter_round},
    {"safe", filter_safe},
    {"select", filter_select},
    {"selectattr", filter_select},
    {"sort", filter_sort},
    {"string", filter_string},
    {"sum", filter_sum},
    {"title", filter_case},
    {"tojson", filter_tojson},
    {"trim", filter_trim},
    {"unique", filter_unique},
    {"upper", filter_case},
    {"wordcount", filter_wordcount},
};
static_assert(sorted_by_name<FilterEntry>(kFilters));

// Jinja2's filters that kiln does not run: naming one is a clearer error than "unknown".
constexpr std::string_view kJinjaOnlyFilters[] = {"filesizeformat", "groupby",   "pprint",   "random",
                                                  "slice",          "striptags", "truncate", "urlencode",
                                                  "urlize",         "wordwrap",  "xmlattr"};
static_assert(std::is_sorted(std::begin(kJinjaOnlyFilters), std::end(kJinjaOnlyFilters)));

}  // namespace

bool is_supported_filter(std::string_view name) { return find_by_name<FilterEntry>(kFilters, name) != nullptr; }
bool is_jinja_only_filter(std::string_view name) {
  return std::find(std::begin(kJinjaOnlyFilters), std::end(kJinjaOnlyFilters), name) != std::end(kJinjaOnlyFilters);
}

std::vector<std::string_view> supported_filter_names() { return names_of<FilterEntry>(kFilters); }
std::vector<std::string_view> jinja_only_filter_names() {
  return {std::begin(kJinjaOnlyFilters), std::end(kJinjaOnlyFilters)};
}

Result<Value> call_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(in.step());
  const FilterEntry* f = find_by_name<FilterEntry>(kFilters, name);
  if (f == nullptr) return invalid_argument("unknown filter '" + name + "'");
  return f->fn(in, name, v, args);
}

}  // namespace kiln::jinja
