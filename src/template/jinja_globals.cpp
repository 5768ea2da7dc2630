// The globals every template sees: Jinja's range, dict and namespace, Hugging Face's
// raise_exception and strftime_now, as a table from name to function.
#include <cstdio>
#include <ctime>

#include "template/jinja_builtins.h"
#include "template/jinja_name_table.h"

namespace kiln::jinja {

namespace {

constexpr int64_t kMaxRange = 100000;  // Jinja's sandbox refuses larger ranges

std::string strftime_text(const std::tm& tm, const std::string& fmt, long micros) {
  std::string f;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] == '%' && i + 1 < fmt.size() && fmt[i + 1] == 'f') {
      char buf[24];  // room for any long, which keeps -Wformat-truncation quiet
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

Result<Value> global_raise_exception(Interpreter& in, const std::string&, const CallArgs& args) {
  if (args.pos.size() + args.kw.size() != 1) return invalid_argument("raise_exception() takes one argument");
  const Value& m = args.pos.empty() ? args.kw[0].second : args.pos[0];
  KILN_ASSIGN_OR_RETURN(std::string msg, in.text(m));
  return invalid_argument("the template raised an error: " + msg);
}

// 'name', built by appending: "'" + a temporary string sets off a false -Wrestrict in g++ 12.
std::string quoted(const std::string& s) {
  std::string q = "'";
  q += s;
  q += '\'';
  return q;
}

Result<Value> global_range(Interpreter& in, const std::string&, const CallArgs& args) {
  if (!args.kw.empty()) return invalid_argument("range() takes no keyword arguments");
  if (args.pos.empty() || args.pos.size() > 3)
    return invalid_argument("range expected 1 to 3 arguments, got " + std::to_string(args.pos.size()));
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < args.pos.size(); ++i) {
    const Value& a = args.pos[i];
    if (!a.is_int() && !a.is_bool())
      return invalid_argument(quoted(a.type_name()) + " object cannot be interpreted as an integer");
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

// dict(...) and namespace(...): the same arguments, a dict or a namespace object.
Result<Value> global_dict(Interpreter& in, const std::string& name, const CallArgs& args) {
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

Result<Value> global_strftime_now(Interpreter& in, const std::string&, const CallArgs& args) {
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

using GlobalFn = Result<Value> (*)(Interpreter& in, const std::string& name, const CallArgs& args);
// fn is null for Jinja's globals kiln does not run: calling one is an error naming it.
struct GlobalEntry {
  std::string_view name;
  GlobalFn fn;
};

// Every global by name, sorted: the one list of them.
constexpr GlobalEntry kGlobals[] = {
    {"cycler", nullptr},
    {"dict", global_dict},
    {"joiner", nullptr},
    {"lipsum", nullptr},
    {"namespace", global_dict},
    {"raise_exception", global_raise_exception},
    {"range", global_range},
    {"strftime_now", global_strftime_now},
};
static_assert(sorted_by_name<GlobalEntry>(kGlobals));

}  // namespace

void add_globals(Frame& globals) {
  for (const GlobalEntry& g : kGlobals) {
    const std::string name(g.name);
    auto fn = std::make_shared<Callable>();
    fn->type = Callable::Type::kBuiltin;
    fn->name = name;
    globals.set(name, Value::callable(std::move(fn)));
  }
}

Result<Value> call_global(Interpreter& in, const std::string& name, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(in.step());
  const GlobalEntry* g = find_by_name<GlobalEntry>(kGlobals, name);
  if (g == nullptr || g->fn == nullptr)
    return unsupported("'" + name + "()' is not supported by kiln's template engine");
  return g->fn(in, name, args);
}

}  // namespace kiln::jinja
