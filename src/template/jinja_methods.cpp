// The Python methods templates call on strings, dicts, lists, tuples and the loop object, as
// one table per type from method name to function; the tables are also what getattr finds.
#include <cstdlib>
#include <span>

#include "template/jinja_args.h"
#include "template/jinja_builtins.h"
#include "template/jinja_name_table.h"
#include "template/jinja_text.h"

namespace kiln::jinja {

namespace {

Status unsafe(const std::string& name, const Value& self) {
  return invalid_argument("access to attribute '" + name + "' of '" + self.type_name() + "' object is unsafe.");
}

Status not_supported(const std::string& type, const std::string& name) {
  return unsupported(type + "." + name + "() is not supported by kiln's template engine");
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

// Every method takes (in, self, name, args); `name` tells apart the methods that share one.
using MethodFn = Result<Value> (*)(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args);

Result<Value> str_strip(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args) {
  const std::string& s = self.str();
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, name, {"chars"}));
  bool l = name != "rstrip", r = name != "lstrip";
  if (const Value* c = b.get(0); c && !c->is_none()) {
    if (!c->is_string()) return invalid_argument(name + " arg must be None or str");
    std::u32string set = to_u32(c->str());
    return in.make_string(py_strip(s, &set, l, r));
  }
  return in.make_string(py_strip(s, nullptr, l, r));
}

Result<Value> str_split(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args) {
  const std::string& s = self.str();
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

Result<Value> str_splitlines(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args) {
  const std::string& s = self.str();
  KILN_ASSIGN_OR_RETURN(Bound b, bind(args, name, {"keepends"}));
  std::vector<std::string> parts = py_splitlines(s, bool_arg(b.get(0), false));
  KILN_RETURN_IF_ERROR(in.alloc(s.size() + 48 * parts.size()));
  ValueList items;
  for (std::string& p : parts) items.push_back(Value::string(std::move(p)));
  return Value::list(std::move(items));
}

// startswith / endswith, with a string or a tuple of strings.
Result<Value> str_affix(Interpreter&, const Value& self, const std::string& name, const CallArgs& args) {
  const std::string& s = self.str();
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

Result<Value> str_replace(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args) {
  const std::string& s = self.str();
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

// upper / lower / casefold / title / capitalize / swapcase.
Result<Value> str_case(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args) {
  const std::string& s = self.str();
  if (!args.pos.empty() || !args.kw.empty()) return invalid_argument(name + "() takes no arguments");
  std::string r = name == "upper"                           ? py_upper(s)
                  : (name == "lower" || name == "casefold") ? py_lower(s)
                  : name == "title"                         ? py_title(s)
                  : name == "capitalize"                    ? py_capitalize(s)
                                                            : py_swapcase(s);
  return in.make_string(std::move(r));
}

// find / rfind / index / rindex / count, without start/end positions.
Result<Value> str_find(Interpreter&, const Value& self, const std::string& name, const CallArgs& args) {
  const std::string& s = self.str();
  if (args.pos.size() != 1 || !args.kw.empty()) return not_supported("str", name + " with start/end positions");
  if (!args.pos[0].is_string()) return invalid_argument("must be str, not " + args.pos[0].type_name());
  const std::string& sub = args.pos[0].str();
  if (name == "count") return Value::integer(py_count(s, sub));
  int64_t r = py_find(s, sub, name[0] == 'r');
  if (r < 0 && (name == "index" || name == "rindex")) return invalid_argument("substring not found");
  return Value::integer(r);
}

Result<Value> str_join(Interpreter& in, const Value& self, const std::string&, const CallArgs& args) {
  const std::string& s = self.str();
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

// isdigit, isalpha, ...: every character passes (and there is one).
template <bool (*Pred)(char32_t)>
Result<Value> str_all(Interpreter&, const Value& self, const std::string&, const CallArgs&) {
  return Value::boolean(all_chars(self.str(), Pred));
}

Result<Value> str_isascii(Interpreter&, const Value& self, const std::string&, const CallArgs&) {
  return Value::boolean(self.str().empty() || all_chars(self.str(), is_ascii_cp));
}

// islower / isupper: no cased character of the other case, and at least one.
Result<Value> str_cased(Interpreter&, const Value& self, const std::string& name, const CallArgs&) {
  bool cased = false;
  for (char32_t c : to_u32(self.str())) {
    if (name == "islower" ? py_is_cased_upper(c) : py_is_cased_lower(c)) return Value::boolean(false);
    if (py_is_cased_upper(c) || py_is_cased_lower(c)) cased = true;
  }
  return Value::boolean(cased);
}

// removeprefix / removesuffix.
Result<Value> str_remove_affix(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args) {
  const std::string& s = self.str();
  if (args.pos.size() != 1 || !args.pos[0].is_string()) return invalid_argument(name + "() argument must be str");
  const std::string& x = args.pos[0].str();
  if (name == "removeprefix" && s.compare(0, x.size(), x) == 0) return in.make_string(s.substr(x.size()));
  if (name == "removesuffix" && !x.empty() && s.size() >= x.size() &&
      s.compare(s.size() - x.size(), x.size(), x) == 0)
    return in.make_string(s.substr(0, s.size() - x.size()));
  return self;
}

// partition / rpartition.
Result<Value> str_partition(Interpreter&, const Value& self, const std::string& name, const CallArgs& args) {
  const std::string& s = self.str();
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

// ljust / rjust / center / zfill.
Result<Value> str_pad(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args) {
  const std::string& s = self.str();
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

Result<Value> str_format_method(Interpreter& in, const Value& self, const std::string&, const CallArgs& args) {
  return str_format(in, self.str(), args);
}

Result<Value> dict_get(Interpreter&, const Value& self, const std::string&, const CallArgs& args) {
  if (!args.kw.empty() || args.pos.empty() || args.pos.size() > 2)
    return invalid_argument("get expected 1 or 2 arguments");
  if (!args.pos[0].hashable()) return invalid_argument("unhashable type: '" + args.pos[0].type_name() + "'");
  const Value* v = self.object().find(args.pos[0]);
  if (v) return *v;
  return args.pos.size() == 2 ? args.pos[1] : Value::none();
}

Result<Value> dict_copy(Interpreter&, const Value& self, const std::string& name, const CallArgs& args) {
  if (!args.pos.empty() || !args.kw.empty()) return invalid_argument(name + "() takes no arguments");
  return self;
}

// items / keys / values: a view, as a list that knows which.
Result<Value> dict_view(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args) {
  if (!args.pos.empty() || !args.kw.empty()) return invalid_argument(name + "() takes no arguments");
  const Object& o = self.object();
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
  for (const auto& kv : o.items) out.push_back(kv.second);
  return Value::list(std::move(out), ListKind::kDictValues);
}

Result<Value> list_copy(Interpreter&, const Value& self, const std::string&, const CallArgs&) { return self; }

// count / index of one value (lists, tuples and ranges).
Result<Value> list_count_index(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args) {
  if (args.pos.size() != 1 || !args.kw.empty()) return not_supported(self.type_name(), name);
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

Result<Value> loop_cycle(Interpreter&, const Value& self, const std::string&, const CallArgs& args) {
  if (!args.kw.empty()) return invalid_argument("cycle() takes no keyword arguments");
  if (args.pos.empty()) return invalid_argument("no items for cycling given");
  return args.pos[self.loop_state().index0 % args.pos.size()];
}

// Methods that change their object: Jinja's sandbox refuses them.
Result<Value> refuse_mutation(Interpreter&, const Value& self, const std::string& name, const CallArgs&) {
  return unsafe(name, self);
}

// fn is null for a method Python has and kiln does not run: getattr finds it, and calling it
// is an error naming it (not a missing attribute, which a template might test for).
struct MethodEntry {
  std::string_view name;
  MethodFn fn;
};

constexpr MethodEntry kStrMethods[] = {
    {"capitalize", str_case},
    {"casefold", str_case},
    {"center", str_pad},
    {"count", str_find},
    {"encode", nullptr},
    {"endswith", str_affix},
    {"expandtabs", nullptr},
    {"find", str_find},
    {"format", str_format_method},
    {"format_map", nullptr},
    {"index", str_find},
    {"isalnum", str_all<is_alnum_cp>},
    {"isalpha", str_all<is_alpha_cp>},
    {"isascii", str_isascii},
    {"isdecimal", str_all<is_digit_cp>},
    {"isdigit", str_all<is_digit_cp>},
    {"isidentifier", nullptr},
    {"islower", str_cased},
    {"isnumeric", str_all<is_digit_cp>},
    {"isprintable", nullptr},
    {"isspace", str_all<is_space_cp>},
    {"istitle", nullptr},
    {"isupper", str_cased},
    {"join", str_join},
    {"ljust", str_pad},
    {"lower", str_case},
    {"lstrip", str_strip},
    {"maketrans", nullptr},
    {"partition", str_partition},
    {"removeprefix", str_remove_affix},
    {"removesuffix", str_remove_affix},
    {"replace", str_replace},
    {"rfind", str_find},
    {"rindex", str_find},
    {"rjust", str_pad},
    {"rpartition", str_partition},
    {"rsplit", str_split},
    {"rstrip", str_strip},
    {"split", str_split},
    {"splitlines", str_splitlines},
    {"startswith", str_affix},
    {"strip", str_strip},
    {"swapcase", str_case},
    {"title", str_case},
    {"translate", nullptr},
    {"upper", str_case},
    {"zfill", str_pad},
};

constexpr MethodEntry kDictMethods[] = {
    {"clear", refuse_mutation}, {"copy", dict_copy},          {"fromkeys", nullptr},
    {"get", dict_get},          {"items", dict_view},         {"keys", dict_view},
    {"pop", refuse_mutation},   {"popitem", refuse_mutation}, {"setdefault", refuse_mutation},
    {"update", refuse_mutation}, {"values", dict_view},
};

constexpr MethodEntry kListMethods[] = {
    {"append", refuse_mutation}, {"clear", refuse_mutation},   {"copy", list_copy},
    {"count", list_count_index}, {"extend", refuse_mutation},  {"index", list_count_index},
    {"insert", refuse_mutation}, {"pop", refuse_mutation},     {"remove", refuse_mutation},
    {"reverse", refuse_mutation}, {"sort", refuse_mutation},
};

// Tuples and ranges.
constexpr MethodEntry kSequenceMethods[] = {{"count", list_count_index}, {"index", list_count_index}};

// Jinja's loop.cycle(...) and loop.changed(...).
constexpr MethodEntry kLoopMethods[] = {{"changed", nullptr}, {"cycle", loop_cycle}};

static_assert(sorted_by_name<MethodEntry>(kStrMethods) && sorted_by_name<MethodEntry>(kDictMethods) &&
              sorted_by_name<MethodEntry>(kListMethods) && sorted_by_name<MethodEntry>(kSequenceMethods) &&
              sorted_by_name<MethodEntry>(kLoopMethods));

// The table for obj's type; empty for types without methods (dict views, numbers, ...).
std::span<const MethodEntry> methods_of(const Value& obj) {
  switch (obj.kind()) {
    case Kind::kString:
      return kStrMethods;
    case Kind::kDict:
      return kDictMethods;
    case Kind::kLoop:
      return kLoopMethods;
    case Kind::kList:
      switch (obj.list_kind()) {
        case ListKind::kList:
          return kListMethods;
        case ListKind::kTuple:
        case ListKind::kRange:
          return kSequenceMethods;
        default:
          return {};
      }
    default:
      return {};
  }
}

// The type as the "not supported" error names it (a Markup string is still a str).
std::string method_type_name(const Value& obj) {
  switch (obj.kind()) {
    case Kind::kString:
      return "str";
    case Kind::kDict:
      return "dict";
    case Kind::kLoop:
      return "loop";
    default:
      return obj.type_name();
  }
}

}  // namespace

// The loop object's methods are reached through loop_attribute, not getattr's has_method.
bool has_method(const Value& obj, const std::string& name) {
  return !obj.is_loop() && find_by_name(methods_of(obj), name) != nullptr;
}

Result<Value> call_method(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(in.step());
  const MethodEntry* m = find_by_name(methods_of(self), name);
  if (m == nullptr || m->fn == nullptr) return not_supported(method_type_name(self), name);
  return m->fn(in, self, name, args);
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
  if (find_by_name<MethodEntry>(kLoopMethods, name)) {
    auto fn = std::make_shared<Callable>();
    fn->type = Callable::Type::kMethod;
    fn->name = name;
    fn->self = loop;
    return Value::callable(std::move(fn));
  }
  return Value::undefined();
}

}  // namespace kiln::jinja
