// The Python methods templates call (str, dict, list, tuple, the loop object), the globals
// (range, dict, namespace, raise_exception, strftime_now) and %-formatting.
#include <cmath>
#include <cstdio>
#include <ctime>
#include <set>

#include "template/jinja_args.h"
#include "template/jinja_builtins.h"
#include "template/jinja_text.h"

namespace kiln::jinja {

namespace {

constexpr int64_t kMaxRange = 100000;  // Jinja's sandbox refuses larger ranges

const std::set<std::string_view> kStrMethods = {
    "capitalize",   "casefold",   "center",    "count",       "encode",    "endswith",     "expandtabs",   "find",
    "format",       "format_map", "index",     "isalnum",     "isalpha",   "isascii",      "isdecimal",    "isdigit",
    "isidentifier", "islower",    "isnumeric", "isprintable", "isspace",   "istitle",      "isupper",      "join",
    "ljust",        "lower",      "lstrip",    "maketrans",   "partition", "removeprefix", "removesuffix", "replace",
    "rfind",        "rindex",     "rjust",     "rpartition",  "rsplit",    "rstrip",       "split",        "splitlines",
    "startswith",   "strip",      "swapcase",  "title",       "translate", "upper",        "zfill"};
const std::set<std::string_view> kDictMethods = {"clear", "copy",    "fromkeys",   "get",    "items", "keys",
                                                 "pop",   "popitem", "setdefault", "update", "values"};
const std::set<std::string_view> kDictUnsafe = {"clear", "pop", "popitem", "setdefault", "update"};
const std::set<std::string_view> kListMethods = {"append", "clear", "copy",   "count",   "extend", "index",
                                                 "insert", "pop",   "remove", "reverse", "sort"};
const std::set<std::string_view> kListUnsafe = {"append", "clear",  "extend",  "insert",
                                                "pop",    "remove", "reverse", "sort"};

Status unsafe(const std::string& name, const Value& self) {
  return invalid_argument("access to attribute '" + name + "' of '" + self.type_name() + "' object is unsafe.");
}

Status not_supported(const std::string& type, const std::string& name) {
  return unsupported(type + "." + name + "() is not supported by kiln's template engine");
}

Result<std::string> pad_text(const std::string& s, int64_t width, bool left_justify) {
  int64_t n = static_cast<int64_t>(count_code_points(s));
  if (width > (int64_t{1} << 24)) return invalid_argument("format width too large");
  if (width <= n) return s;
  std::string pad(static_cast<size_t>(width - n), ' ');
  return left_justify ? s + pad : pad + s;
}

bool all_chars(const std::string& s, bool (*pred)(char32_t)) {
  std::u32string u = to_u32(s);
  if (u.empty()) return false;
  for (char32_t c : u)
    if (!pred(c)) return false;
  return true;
}

bool is_digit_cp(char32_t c) { return (c >= '0' && c <= '9') || (c >= 0xff10 && c <= 0xff19); }
bool is_alpha_cp(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (py_isspace(c) || is_digit_cp(c)) return false;
  if ((c >= 0x80 && c <= 0xbf && c != 0xaa && c != 0xb5 && c != 0xba) || c == 0xd7 || c == 0xf7) return false;
  if ((c >= 0x2000 && c <= 0x2bff) || (c >= 0x3000 && c <= 0x303f) || (c >= 0xfe30 && c <= 0xfe4f) ||
      (c >= 0xff00 && c <= 0xff20) || (c >= 0xff3b && c <= 0xff40) || (c >= 0xff5b && c <= 0xff65) ||
      (c >= 0x1f000 && c <= 0x1faff))
    return false;
  return true;
}
bool is_alnum_cp(char32_t c) { return is_alpha_cp(c) || is_digit_cp(c); }
bool is_space_cp(char32_t c) { return py_isspace(c); }
bool is_ascii_cp(char32_t c) { return c < 0x80; }

// Python's str.format with plain fields: {}, {0}, {name}, with !r / !s.
Result<Value> str_format(Interpreter& in, const std::string& f, const CallArgs& args) {
  std::string out;
  size_t auto_idx = 0;
  bool used_auto = false, used_manual = false;
  for (size_t i = 0; i < f.size(); ++i) {
    char c = f[i];
    if (c == '{' && i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    if (c == '}' && i + 1 < f.size() && f[i + 1] == '}') {
      out += '}';
      ++i;
      continue;
    }
    if (c == '}') return invalid_argument("Single '}' encountered in format string");
    if (c != '{') {
      out += c;
      continue;
    }
    size_t close = f.find('}', i);
    if (close == std::string::npos) return invalid_argument("Single '{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    i = close;
    char conv = 0;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      if (colon + 1 < field.size()) return not_supported("str", "format with a format spec");
      field = field.substr(0, colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size() || (field[bang + 1] != 'r' && field[bang + 1] != 's'))
        return invalid_argument("Unknown conversion specifier in str.format");
      conv = field[bang + 1];
      field = field.substr(0, bang);
    }
    if (field.find_first_of(".[") != std::string::npos) return not_supported("str", "format with attribute fields");
    const Value* v = nullptr;
    if (field.empty()) {
      used_auto = true;
      if (auto_idx >= args.pos.size())
        return invalid_argument("Replacement index " + std::to_string(auto_idx) +
                                " out of range for positional args tuple");
      v = &args.pos[auto_idx++];
    } else if (field.find_first_not_of("0123456789") == std::string::npos) {
      used_manual = true;
      size_t k = static_cast<size_t>(std::strtoull(field.c_str(), nullptr, 10));
      if (field.size() > 9 || k >= args.pos.size())
        return invalid_argument("Replacement index " + field + " out of range for positional args tuple");
      v = &args.pos[k];
    } else {
      for (const auto& kv : args.kw)
        if (kv.first == field) v = &kv.second;
      if (v == nullptr) return invalid_argument("KeyError: '" + field + "'");
    }
    if (used_auto && used_manual) return invalid_argument("cannot switch between automatic and manual field numbering");
    KILN_ASSIGN_OR_RETURN(std::string text, conv == 'r' ? in.repr(*v) : in.text(*v));
    out += text;
    if (out.size() > in.limits().max_output_bytes)
      return invalid_argument("format: the text is larger than the output limit");
  }
  return in.make_string(std::move(out));
}

Result<Value> str_method(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args) {
  const std::string& s = self.str();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    KILN_ASSIGN_OR_RETURN(Bound b, bind(args, name, {"chars"}));
    bool l = name != "rstrip", r = name != "lstrip";
    if (const Value* c = b.get(0); c && !c->is_none()) {
      if (!c->is_string()) return invalid_argument(name + " arg must be None or str");
      std::u32string set = to_u32(c->str());
      return in.make_string(py_strip(s, &set, l, r));
    }
    return in.make_string(py_strip(s, nullptr, l, r));
  }
  if (name == "split" || name == "rsplit") {
    KILN_ASSIGN_OR_RETURN(Bound b, bind(args, name, {"sep", "maxsplit"}));
    KILN_ASSIGN_OR_RETURN(int64_t maxsplit, int_arg(b.get(1), -1, name + ": maxsplit"));
    std::string sep;
    bool has_sep = false;
    if (const Value* sv = b.get(0); sv && !sv->is_none()) {
      if (!sv->is_string()) return invalid_argument("must be str or None, not " + sv->type_name());
      sep = sv->str();
      has_sep = true;
      if (sep.empty()) return invalid_argument("empty separator");
    }
    std::vector<std::string> parts = name == "split" ? py_split(s, has_sep ? &sep : nullptr, maxsplit)
                                                     : py_rsplit(s, has_sep ? &sep : nullptr, maxsplit);
    KILN_RETURN_IF_ERROR(in.step(parts.size()));
    KILN_RETURN_IF_ERROR(in.alloc(s.size() + 48 * parts.size()));
    ValueList items;
    items.reserve(parts.size());
    for (std::string& p : parts) items.push_back(Value::string(std::move(p)));
    return Value::list(std::move(items));
  }
  if (name == "splitlines") {
    KILN_ASSIGN_OR_RETURN(Bound b, bind(args, name, {"keepends"}));
    std::vector<std::string> parts = py_splitlines(s, bool_arg(b.get(0), false));
    KILN_RETURN_IF_ERROR(in.alloc(s.size() + 48 * parts.size()));
    ValueList items;
    for (std::string& p : parts) items.push_back(Value::string(std::move(p)));
    return Value::list(std::move(items));
  }
  if (name == "startswith" || name == "endswith") {
    if (args.pos.size() != 1 || !args.kw.empty()) return not_supported("str", name + " with start/end positions");
    const Value& p = args.pos[0];
    auto test = [&](const std::string& x) {
      if (x.size() > s.size()) return false;
      return name == "startswith" ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
    };
    if (p.is_string()) return Value::boolean(test(p.str()));
    if (p.is_list() && p.list_kind() == ListKind::kTuple) {
      for (const Value& x : p.items()) {
        if (!x.is_string()) return invalid_argument("tuple for " + name + " must only contain str");
        if (test(x.str())) return Value::boolean(true);
      }
      return Value::boolean(false);
    }
    return invalid_argument(name + " first arg must be str or a tuple of str, not " + p.type_name());
  }
  if (name == "replace") {
    KILN_ASSIGN_OR_RETURN(Bound b, bind(args, name, {"old", "new", "count"}));
    if (!b.has(0) || !b.has(1) || !b.get(0)->is_string() || !b.get(1)->is_string())
      return invalid_argument("replace() arguments must be str");
    KILN_ASSIGN_OR_RETURN(int64_t count, int_arg(b.get(2), -1, "replace: count"));
    const std::string& old = b.get(0)->str();
    const std::string& repl = b.get(1)->str();
    if (old.empty() && repl.size() * (count_code_points(s) + 1) > in.limits().max_output_bytes)
      return invalid_argument("replace: the text would be larger than the output limit");
    return in.make_string(py_replace(s, old, repl, count));
  }
  if (name == "upper" || name == "lower" || name == "casefold" || name == "title" || name == "capitalize" ||
      name == "swapcase") {
    if (!args.pos.empty() || !args.kw.empty()) return invalid_argument(name + "() takes no arguments");
    std::string r = name == "upper"                           ? py_upper(s)
                    : (name == "lower" || name == "casefold") ? py_lower(s)
                    : name == "title"                         ? py_title(s)
                    : name == "capitalize"                    ? py_capitalize(s)
                                                              : py_swapcase(s);
    return in.make_string(std::move(r));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    if (args.pos.size() != 1 || !args.kw.empty()) return not_supported("str", name + " with start/end positions");
    if (!args.pos[0].is_string()) return invalid_argument("must be str, not " + args.pos[0].type_name());
    const std::string& sub = args.pos[0].str();
    if (name == "count") return Value::integer(py_count(s, sub));
    int64_t r = py_find(s, sub, name[0] == 'r');
    if (r < 0 && (name == "index" || name == "rindex")) return invalid_argument("substring not found");
    return Value::integer(r);
  }
  if (name == "join") {
    if (args.pos.size() != 1 || !args.kw.empty()) return invalid_argument("join() takes exactly one argument");
    KILN_ASSIGN_OR_RETURN(ValueList items, in.iterate(args.pos[0]));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string())
        return invalid_argument("sequence item " + std::to_string(i) + ": expected str instance, " +
                                items[i].type_name() + " found");
      if (i) out += s;
      out += items[i].str();
      if (out.size() > in.limits().max_output_bytes)
        return invalid_argument("join: the text is larger than the output limit");
    }
    return in.make_string(std::move(out));
  }
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") return Value::boolean(all_chars(s, is_digit_cp));
  if (name == "isalpha") return Value::boolean(all_chars(s, is_alpha_cp));
  if (name == "isalnum") return Value::boolean(all_chars(s, is_alnum_cp));
  if (name == "isspace") return Value::boolean(all_chars(s, is_space_cp));
  if (name == "isascii") return Value::boolean(s.empty() || all_chars(s, is_ascii_cp));
  if (name == "islower" || name == "isupper") {
    bool cased = false;
    for (char32_t c : to_u32(s)) {
      if (name == "islower" ? py_is_cased_upper(c) : py_is_cased_lower(c)) return Value::boolean(false);
      if (py_is_cased_upper(c) || py_is_cased_lower(c)) cased = true;
    }
    return Value::boolean(cased);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    if (args.pos.size() != 1 || !args.pos[0].is_string()) return invalid_argument(name + "() argument must be str");
    const std::string& x = args.pos[0].str();
    if (name == "removeprefix" && s.compare(0, x.size(), x) == 0) return in.make_string(s.substr(x.size()));
    if (name == "removesuffix" && !x.empty() && s.size() >= x.size() &&
        s.compare(s.size() - x.size(), x.size(), x) == 0)
      return in.make_string(s.substr(0, s.size() - x.size()));
    return self;
  }
  if (name == "partition" || name == "rpartition") {
    if (args.pos.size() != 1 || !args.pos[0].is_string()) return invalid_argument(name + "() argument must be str");
    const std::string& sep = args.pos[0].str();
    if (sep.empty()) return invalid_argument("empty separator");
    size_t p = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (p == std::string::npos) {
      if (name == "partition") return Value::list({self, Value::string(""), Value::string("")}, ListKind::kTuple);
      return Value::list({Value::string(""), Value::string(""), self}, ListKind::kTuple);
    }
    return Value::list({Value::string(s.substr(0, p)), Value::string(sep), Value::string(s.substr(p + sep.size()))},
                       ListKind::kTuple);
  }
  if (name == "ljust" || name == "rjust" || name == "center" || name == "zfill") {
    KILN_ASSIGN_OR_RETURN(Bound b, bind(args, name, {"width", "fillchar"}));
    KILN_ASSIGN_OR_RETURN(int64_t width, int_arg(b.get(0), 0, name + ": width"));
    KILN_ASSIGN_OR_RETURN(std::string fill, str_arg(b.get(1), name == "zfill" ? "0" : " ", name + ": fillchar"));
    if (count_code_points(fill) != 1) return invalid_argument("The fill character must be exactly one character long");
    int64_t n = static_cast<int64_t>(count_code_points(s));
    if (width > static_cast<int64_t>(in.limits().max_output_bytes)) return invalid_argument(name + ": width too large");
    if (width <= n) return self;
    int64_t marg = width - n;
    auto rep = [&](int64_t k) {
      std::string r;
      for (int64_t i = 0; i < k; ++i) r += fill;
      return r;
    };
    if (name == "ljust") return in.make_string(s + rep(marg));
    if (name == "rjust") return in.make_string(rep(marg) + s);
    if (name == "zfill") {
      if (!s.empty() && (s[0] == '+' || s[0] == '-')) return in.make_string(s.substr(0, 1) + rep(marg) + s.substr(1));
      return in.make_string(rep(marg) + s);
    }
    int64_t left = marg / 2 + (marg & width & 1);
    return in.make_string(rep(left) + s + rep(marg - left));
  }
  if (name == "format") return str_format(in, s, args);
  return not_supported("str", name);
}

Result<Value> dict_method(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args) {
  if (kDictUnsafe.count(name)) return unsafe(name, self);
  const Object& o = self.object();
  if (name == "get") {
    if (!args.kw.empty() || args.pos.empty() || args.pos.size() > 2)
      return invalid_argument("get expected 1 or 2 arguments");
    if (!args.pos[0].hashable()) return invalid_argument("unhashable type: '" + args.pos[0].type_name() + "'");
    const Value* v = o.find(args.pos[0]);
    if (v) return *v;
    return args.pos.size() == 2 ? args.pos[1] : Value::none();
  }
  if (!args.pos.empty() || !args.kw.empty()) return invalid_argument(name + "() takes no arguments");
  if (name == "copy") return self;
  KILN_RETURN_IF_ERROR(in.step(o.items.size()));
  KILN_RETURN_IF_ERROR(in.alloc(48 * o.items.size()));
  ValueList out;
  out.reserve(o.items.size());
  if (name == "items") {
    for (const auto& kv : o.items) out.push_back(Value::list({kv.first, kv.second}, ListKind::kTuple));
    return Value::list(std::move(out), ListKind::kDictItems);
  }
  if (name == "keys") {
    for (const auto& kv : o.items) out.push_back(kv.first);
    return Value::list(std::move(out), ListKind::kDictKeys);
  }
  if (name == "values") {
    for (const auto& kv : o.items) out.push_back(kv.second);
    return Value::list(std::move(out), ListKind::kDictValues);
  }
  return not_supported("dict", name);
}

Result<Value> list_method(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args) {
  if (self.list_kind() == ListKind::kList && kListUnsafe.count(name)) return unsafe(name, self);
  if (name == "copy") return self;
  if ((name == "count" || name == "index") && args.pos.size() == 1 && args.kw.empty()) {
    KILN_RETURN_IF_ERROR(in.step(self.items().size()));
    int64_t count = 0;
    for (size_t i = 0; i < self.items().size(); ++i) {
      if (!py_equal(self.items()[i], args.pos[0], in.work())) continue;
      if (name == "index") return Value::integer(static_cast<int64_t>(i));
      ++count;
    }
    if (name == "index") return invalid_argument("the value is not in the " + self.type_name());
    return Value::integer(count);
  }
  return not_supported(self.type_name(), name);
}

std::string strftime_text(const std::tm& tm, const std::string& fmt, long micros) {
  std::string f;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] == '%' && i + 1 < fmt.size() && fmt[i + 1] == 'f') {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%06ld", micros);
      f += buf;
      ++i;
    } else if (fmt[i] == '%' && i + 1 < fmt.size()) {
      f += fmt.substr(i, 2);
      ++i;
    } else {
      f += fmt[i];
    }
  }
  if (f.empty()) return "";
  for (size_t cap = 256; cap <= (size_t{1} << 20); cap *= 4) {
    std::string buf(cap, '\0');
    size_t n = std::strftime(buf.data(), cap, f.c_str(), &tm);
    if (n > 0) return buf.substr(0, n);
  }
  return "";
}

}  // namespace

bool has_method(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::kString:
      return kStrMethods.count(name) != 0;
    case Kind::kDict:
      return kDictMethods.count(name) != 0;
    case Kind::kList:
      switch (obj.list_kind()) {
        case ListKind::kList:
          return kListMethods.count(name) != 0;
        case ListKind::kTuple:
        case ListKind::kRange:
          return name == "count" || name == "index";
        default:
          return false;
      }
    default:
      return false;
  }
}

Result<Value> call_method(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(in.step());
  switch (self.kind()) {
    case Kind::kString:
      return str_method(in, self, name, args);
    case Kind::kDict:
      return dict_method(in, self, name, args);
    case Kind::kList:
      return list_method(in, self, name, args);
    case Kind::kLoop: {
      if (name == "cycle") {
        if (!args.kw.empty()) return invalid_argument("cycle() takes no keyword arguments");
        if (args.pos.empty()) return invalid_argument("no items for cycling given");
        return args.pos[self.loop_state().index0 % args.pos.size()];
      }
      return not_supported("loop", name);
    }
    default:
      return not_supported(self.type_name(), name);
  }
}

Value loop_attribute(const Value& loop, const std::string& name) {
  const LoopState& st = loop.loop_state();
  const size_t n = st.items->items.size();
  const size_t i = st.index0;
  auto as_int = [](size_t v) { return Value::integer(static_cast<int64_t>(v)); };
  if (name == "index") return as_int(i + 1);
  if (name == "index0") return as_int(i);
  if (name == "revindex") return as_int(n - i);
  if (name == "revindex0") return as_int(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i + 1 == n);
  if (name == "length") return as_int(n);
  if (name == "depth") return Value::integer(st.depth0 + 1);
  if (name == "depth0") return Value::integer(st.depth0);
  if (name == "previtem") return i > 0 ? st.items->items[i - 1] : Value::undefined("there is no previous item");
  if (name == "nextitem") return i + 1 < n ? st.items->items[i + 1] : Value::undefined("there is no next item");
  if (name == "cycle" || name == "changed") {
    auto fn = std::make_shared<Callable>();
    fn->type = Callable::Type::kMethod;
    fn->name = name;
    fn->self = loop;
    return Value::callable(std::move(fn));
  }
  return Value::undefined();
}

void add_globals(Frame& globals) {
  for (const char* name :
       {"range", "dict", "namespace", "raise_exception", "strftime_now", "lipsum", "cycler", "joiner"}) {
    auto fn = std::make_shared<Callable>();
    fn->type = Callable::Type::kBuiltin;
    fn->name = name;
    globals.set(name, Value::callable(std::move(fn)));
  }
}

Result<Value> call_global(Interpreter& in, const std::string& name, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(in.step());
  if (name == "raise_exception") {
    if (args.pos.size() + args.kw.size() != 1) return invalid_argument("raise_exception() takes one argument");
    const Value& m = args.pos.empty() ? args.kw[0].second : args.pos[0];
    KILN_ASSIGN_OR_RETURN(std::string msg, in.text(m));
    return invalid_argument("the template raised an error: " + msg);
  }
  if (name == "range") {
    if (!args.kw.empty()) return invalid_argument("range() takes no keyword arguments");
    if (args.pos.empty() || args.pos.size() > 3)
      return invalid_argument("range expected 1 to 3 arguments, got " + std::to_string(args.pos.size()));
    int64_t v[3] = {0, 0, 1};
    for (size_t i = 0; i < args.pos.size(); ++i) {
      const Value& a = args.pos[i];
      if (!a.is_int() && !a.is_bool())
        return invalid_argument("'" + a.type_name() + "' object cannot be interpreted as an integer");
      v[args.pos.size() == 1 ? 1 : i] = a.as_int();
    }
    int64_t start = v[0], stop = v[1], stepv = v[2];
    if (stepv == 0) return invalid_argument("range() arg 3 must not be zero");
    __int128 len = 0;
    if (stepv > 0 && stop > start) len = (static_cast<__int128>(stop) - start + stepv - 1) / stepv;
    if (stepv < 0 && stop < start) len = (static_cast<__int128>(start) - stop - stepv - 1) / -stepv;
    if (len > kMaxRange)
      return invalid_argument("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    KILN_RETURN_IF_ERROR(in.step(static_cast<uint64_t>(len)));
    KILN_RETURN_IF_ERROR(in.alloc(32 * static_cast<uint64_t>(len)));
    ValueList items;
    items.reserve(static_cast<size_t>(len));
    for (int64_t k = 0; k < len; ++k) items.push_back(Value::integer(start + k * stepv));
    return Value::range(start, stop, stepv, std::move(items));
  }
  if (name == "dict" || name == "namespace") {
    std::vector<std::pair<Value, Value>> kv;
    if (args.pos.size() > 1) return invalid_argument(name + " expected at most 1 argument");
    if (args.pos.size() == 1) {
      const Value& src = args.pos[0];
      if (src.is_dict()) {
        kv = src.object().items;
      } else {
        KILN_ASSIGN_OR_RETURN(ValueList pairs, in.iterate(src));
        for (const Value& p : pairs) {
          KILN_ASSIGN_OR_RETURN(ValueList two, in.iterate(p));
          if (two.size() != 2)
            return invalid_argument("dictionary update sequence element has length " + std::to_string(two.size()) +
                                    "; 2 is required");
          kv.emplace_back(two[0], two[1]);
        }
      }
    }
    for (const auto& [k, v] : args.kw) kv.emplace_back(Value::string(k), v);
    if (name == "dict") return make_dict(std::move(kv));
    auto ns = std::make_shared<Object>();
    for (auto& [k, v] : kv) {
      if (k.is_string() && !k.str().empty() && k.str()[0] == '_')
        return invalid_argument("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
                                k.str() + "'. Please rename the attribute.");
      if (v.pins_frame())
        return unsupported(
            "kiln's template engine does not store a namespace, loop, iterator or macro in a namespace attribute");
      if (!k.hashable()) return invalid_argument("unhashable type: '" + k.type_name() + "'");
      ns->set(k, v);
    }
    return Value::namespace_(std::move(ns));
  }
  if (name == "strftime_now") {
    if (args.pos.size() != 1 || !args.kw.empty() || !args.pos[0].is_string())
      return invalid_argument("strftime_now() takes one format string");
    std::tm tm{};
    long micros = 0;
    if (in.now()) {
      tm = *in.now();
    } else {
      std::timespec ts{};
      std::timespec_get(&ts, TIME_UTC);
      localtime_r(&ts.tv_sec, &tm);
      micros = ts.tv_nsec / 1000;
    }
    return in.make_string(strftime_text(tm, args.pos[0].str(), micros));
  }
  return unsupported("'" + name + "()' is not supported by kiln's template engine");
}

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
    std::string flags;
    while (i < f.size() && std::string_view("-+ #0").find(f[i]) != std::string_view::npos) flags += f[i++];
    auto take_num = [&](int64_t& out_n, bool& given) -> Status {
      given = false;
      if (i < f.size() && f[i] == '*') {
        if (next >= pos.size()) return invalid_argument("not enough arguments for format string");
        const Value& w = pos[next++];
        if (!w.is_int()) return invalid_argument("* wants int");
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
    int64_t width = 0, prec = -1;
    bool has_width = false, has_prec = false;
    KILN_RETURN_IF_ERROR(take_num(width, has_width));
    if (i < f.size() && f[i] == '.') {
      ++i;
      int64_t p = 0;
      KILN_RETURN_IF_ERROR(take_num(p, has_prec));
      prec = p;
      has_prec = true;
    }
    while (i < f.size() && (f[i] == 'h' || f[i] == 'l' || f[i] == 'L')) ++i;
    if (i >= f.size()) return invalid_argument("incomplete format");
    char conv = f[i];
    if (v == nullptr) {
      if (next >= pos.size()) return invalid_argument("not enough arguments for format string");
      v = &pos[next++];
    }
    bool left = flags.find('-') != std::string::npos;
    std::string piece;
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        KILN_ASSIGN_OR_RETURN(piece, conv == 's' ? in.text(*v) : in.repr(*v));
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
        if (v->is_int() || v->is_bool())
          n = v->as_int();
        else if (v->is_float() && (conv == 'd' || conv == 'i' || conv == 'u') && std::isfinite(v->as_double()) &&
                 std::fabs(v->as_double()) < 9.2e18)
          n = static_cast<int64_t>(v->as_double());
        else
          return invalid_argument(std::string("%") + conv + " format: a real number is required, not " +
                                  v->type_name());
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
        if (!v->is_number()) return invalid_argument(std::string("must be real number, not ") + v->type_name());
        std::string spec = "%" + flags + (has_width ? std::to_string(width) : "") +
                           (has_prec ? "." + std::to_string(std::min<int64_t>(prec, 100)) : "") + conv;
        std::string buf(static_cast<size_t>(width) + 400, '\0');
        int len = std::snprintf(buf.data(), buf.size(), spec.c_str(), v->as_double());
        piece = buf.substr(0, static_cast<size_t>(std::max(0, std::min<int>(len, static_cast<int>(buf.size()) - 1))));
        break;
      }
      case 'c': {
        if (v->is_string() && count_code_points(v->str()) == 1)
          piece = v->str();
        else if (v->is_int() && v->as_int() >= 0 && v->as_int() <= 0x10ffff &&
                 !(v->as_int() >= 0xd800 && v->as_int() <= 0xdfff))
          append_utf8(piece, static_cast<char32_t>(v->as_int()));
        else
          return invalid_argument("%c requires an int or a unicode character");
        KILN_ASSIGN_OR_RETURN(piece, pad_text(piece, width, left));
        break;
      }
      default:
        return invalid_argument(std::string("unsupported format character '") + conv + "'");
    }
    out += piece;
    if (out.size() > in.limits().max_output_bytes)
      return invalid_argument("format: the text is larger than the output limit");
  }
  if (mapping == nullptr && next < pos.size())
    return invalid_argument("not all arguments converted during string formatting");
  return in.make_string(std::move(out));
}

}  // namespace kiln::jinja
