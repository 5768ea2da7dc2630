#include "template/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "template/jinja_text.h"

namespace kiln::jinja {

namespace {

std::string py_number_text(const Value& v) {
  if (v.is_none()) return "None";
  if (v.is_bool()) return v.as_bool() ? "True" : "False";
  if (v.is_int()) return std::to_string(v.as_int());
  return py_float_repr(v.as_double());
}

Status not_serializable(const Value& v) {
  return invalid_argument("tojson: Object of type " + v.type_name() + " is not JSON serializable");
}

Status append_repr(const Value& v, std::string& out, size_t max);

Status append_seq(const ValueList& items, std::string& out, size_t max) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    KILN_RETURN_IF_ERROR(append_repr(items[i], out, max));
  }
  return Status::ok();
}

Status append_dict_items(const Object& obj, std::string& out, size_t max) {
  out += '{';
  for (size_t i = 0; i < obj.items.size(); ++i) {
    if (i) out += ", ";
    KILN_RETURN_IF_ERROR(append_repr(obj.items[i].first, out, max));
    out += ": ";
    KILN_RETURN_IF_ERROR(append_repr(obj.items[i].second, out, max));
  }
  out += '}';
  return Status::ok();
}

Status unprintable(const Value& v) {
  return unsupported("cannot print a " + v.type_name() +
                     " object (Python would print its memory address); convert it with |list or |string first");
}

Status append_repr(const Value& v, std::string& out, size_t max) {
  if (out.size() > max) return invalid_argument("the text of a value is larger than the output limit");
  switch (v.kind()) {
    case Kind::kUndefined:
      out += "Undefined";
      return Status::ok();
    case Kind::kNone:
      out += "None";
      return Status::ok();
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
      out += py_number_text(v);
      return Status::ok();
    case Kind::kString:
      if (v.is_markup()) {
        out += "Markup(" + py_repr_str(v.str()) + ")";
      } else {
        out += py_repr_str(v.str());
      }
      return Status::ok();
    case Kind::kList: {
      const Array& a = v.array();
      switch (a.kind) {
        case ListKind::kList:
          out += '[';
          KILN_RETURN_IF_ERROR(append_seq(a.items, out, max));
          out += ']';
          return Status::ok();
        case ListKind::kTuple:
          out += '(';
          KILN_RETURN_IF_ERROR(append_seq(a.items, out, max));
          if (a.items.size() == 1) out += ',';
          out += ')';
          return Status::ok();
        case ListKind::kRange:
          out += "range(" + std::to_string(a.r_start) + ", " + std::to_string(a.r_stop);
          if (a.r_step != 1) out += ", " + std::to_string(a.r_step);
          out += ')';
          return Status::ok();
        case ListKind::kDictKeys:
          out += "dict_keys([";
          break;
        case ListKind::kDictValues:
          out += "dict_values([";
          break;
        case ListKind::kDictItems:
          out += "dict_items([";
          break;
      }
      KILN_RETURN_IF_ERROR(append_seq(a.items, out, max));
      out += "])";
      return Status::ok();
    }
    case Kind::kDict:
      return append_dict_items(v.object(), out, max);
    case Kind::kNamespace:
      out += "<Namespace ";
      KILN_RETURN_IF_ERROR(append_dict_items(v.ns(), out, max));
      out += '>';
      return Status::ok();
    case Kind::kCallable:
    case Kind::kIterator:
    case Kind::kLoop:
      return unprintable(v);
  }
  return Status::ok();
}

Status json_key(const Value& k, std::string& out, const JsonStyle& style) {
  switch (k.kind()) {
    case Kind::kString:
      json_quote(out, k.str(), style.ensure_ascii);
      return Status::ok();
    case Kind::kNone:
      out += "\"null\"";
      return Status::ok();
    case Kind::kBool:
      out += k.as_bool() ? "\"true\"" : "\"false\"";
      return Status::ok();
    case Kind::kInt:
      out += '"' + std::to_string(k.as_int()) + '"';
      return Status::ok();
    case Kind::kFloat: {
      double d = k.as_double();
      std::string t = std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : py_float_repr(d);
      out += '"' + t + '"';
      return Status::ok();
    }
    default:
      return invalid_argument("tojson: keys must be str, int, float, bool or None, not " + k.type_name());
  }
}

Status json_value(const Value& v, const JsonStyle& style, std::string& out, size_t max_bytes, int level) {
  if (out.size() > max_bytes) return invalid_argument("tojson: the text is larger than the output limit");
  auto newline = [&](int lvl) {
    out += '\n';
    for (int i = 0; i < lvl; ++i) out += style.indent;
  };
  switch (v.kind()) {
    case Kind::kNone:
      out += "null";
      return Status::ok();
    case Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return Status::ok();
    case Kind::kInt:
      out += std::to_string(v.as_int());
      return Status::ok();
    case Kind::kFloat: {
      double d = v.as_double();
      if (std::isnan(d))
        out += "NaN";
      else if (std::isinf(d))
        out += d < 0 ? "-Infinity" : "Infinity";
      else
        out += py_float_repr(d);
      return Status::ok();
    }
    case Kind::kString:
      json_quote(out, v.str(), style.ensure_ascii);
      return Status::ok();
    case Kind::kList: {
      const Array& a = v.array();
      if (a.kind != ListKind::kList && a.kind != ListKind::kTuple) return not_serializable(v);
      if (a.items.empty()) {
        out += "[]";
        return Status::ok();
      }
      out += '[';
      for (size_t i = 0; i < a.items.size(); ++i) {
        if (i) out += style.item_sep;
        if (style.indent_set) newline(level + 1);
        KILN_RETURN_IF_ERROR(json_value(a.items[i], style, out, max_bytes, level + 1));
      }
      if (style.indent_set) newline(level);
      out += ']';
      return Status::ok();
    }
    case Kind::kDict: {
      const Object& o = v.object();
      if (o.items.empty()) {
        out += "{}";
        return Status::ok();
      }
      std::vector<std::pair<Value, Value>> order = o.items;
      if (style.sort_keys) KILN_RETURN_IF_ERROR(sort_by_key(order, false, nullptr));
      out += '{';
      for (size_t i = 0; i < order.size(); ++i) {
        if (i) out += style.item_sep;
        if (style.indent_set) newline(level + 1);
        KILN_RETURN_IF_ERROR(json_key(order[i].first, out, style));
        out += style.key_sep;
        KILN_RETURN_IF_ERROR(json_value(order[i].second, style, out, max_bytes, level + 1));
      }
      if (style.indent_set) newline(level);
      out += '}';
      return Status::ok();
    }
    default:
      return not_serializable(v);
  }
}

template <typename J>
Result<Value> json_to_value(const J& j, int depth) {
  if (depth > kMaxDepth) return invalid_argument("JSON nests deeper than " + std::to_string(kMaxDepth) + " levels");
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      auto u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return invalid_argument("JSON integer " + std::to_string(u) + " is beyond 64 bits");
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value::number(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) {
        KILN_ASSIGN_OR_RETURN(Value v, json_to_value(e, depth + 1));
        items.push_back(std::move(v));
      }
      return make_list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      std::vector<std::pair<Value, Value>> kv;
      kv.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        KILN_ASSIGN_OR_RETURN(Value v, json_to_value(it.value(), depth + 1));
        kv.emplace_back(Value::string(it.key()), std::move(v));
      }
      return make_dict(std::move(kv));
    }
    default:
      return invalid_argument("JSON value of an unsupported type (binary)");
  }
}

constexpr size_t kIndexFrom = 8;

}  // namespace

Value Value::undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.ptr_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}
Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.d_ = d;
  return v;
}
Value Value::string(std::string s, bool markup) {
  Value v;
  v.kind_ = Kind::kString;
  v.markup_ = markup;
  v.ptr_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::list(ValueList items, ListKind kind) {
  auto a = std::make_shared<Array>();
  a->kind = kind;
  int depth = 0;
  bool pins = false;
  for (const Value& e : items) {
    depth = std::max(depth, e.depth());
    pins = pins || e.pins_frame();
  }
  a->depth = depth + 1;
  a->pins_frame = pins;
  a->items = std::move(items);
  Value v;
  v.kind_ = Kind::kList;
  v.ptr_ = std::move(a);
  return v;
}
Value Value::range(int64_t start, int64_t stop, int64_t step, ValueList items) {
  Value v = list(std::move(items), ListKind::kRange);
  auto* a = const_cast<Array*>(static_cast<const Array*>(v.ptr_.get()));
  a->r_start = start;
  a->r_stop = stop;
  a->r_step = step;
  return v;
}
Value Value::dict(std::shared_ptr<const Object> obj) {
  Value v;
  v.kind_ = Kind::kDict;
  v.ptr_ = std::move(obj);
  return v;
}
Value Value::namespace_(std::shared_ptr<Object> obj) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.ptr_ = std::move(obj);
  return v;
}
Value Value::callable(std::shared_ptr<const Callable> fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.ptr_ = std::move(fn);
  return v;
}
Value Value::iterator(std::shared_ptr<IterState> it) {
  Value v;
  v.kind_ = Kind::kIterator;
  v.ptr_ = std::move(it);
  return v;
}
Value Value::loop(std::shared_ptr<LoopState> loop) {
  Value v;
  v.kind_ = Kind::kLoop;
  v.ptr_ = std::move(loop);
  return v;
}

const std::string& Value::undefined_hint() const {
  static const std::string kEmpty;
  if (kind_ != Kind::kUndefined || !ptr_) return kEmpty;
  return *static_cast<const std::string*>(ptr_.get());
}

int Value::depth() const {
  switch (kind_) {
    case Kind::kList:
      return array().depth;
    case Kind::kDict:
      return object().depth;
    case Kind::kIterator: {
      int d = 0;
      for (const Value& e : iter().items) d = std::max(d, e.depth());
      return d + 1;
    }
    default:
      return 1;
  }
}

bool Value::pins_frame() const {
  switch (kind_) {
    case Kind::kList:
      return array().pins_frame;
    case Kind::kDict:
      return object().pins_frame;
    case Kind::kNamespace:
    case Kind::kLoop:
    case Kind::kIterator:
      return true;
    case Kind::kCallable:
      return fn().closure != nullptr || fn().type == Callable::Type::kMethod;
    default:
      return false;
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return markup_ ? "Markup" : "str";
    case Kind::kList:
      switch (list_kind()) {
        case ListKind::kList:
          return "list";
        case ListKind::kTuple:
          return "tuple";
        case ListKind::kRange:
          return "range";
        case ListKind::kDictKeys:
          return "dict_keys";
        case ListKind::kDictValues:
          return "dict_values";
        case ListKind::kDictItems:
          return "dict_items";
      }
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return fn().type == Callable::Type::kMacro ? "Macro" : "builtin_function_or_method";
    case Kind::kIterator:
      return iter().type_name;
    case Kind::kLoop:
      return "LoopContext";
  }
  return "object";
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return d_ != 0;
    case Kind::kString:
      return !str().empty();
    case Kind::kList:
      return !items().empty();
    case Kind::kDict:
      return !object().items.empty();
    default:
      return true;
  }
}

bool Value::hashable() const {
  switch (kind_) {
    case Kind::kNone:
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
    case Kind::kString:
      return true;
    case Kind::kList:
      if (list_kind() != ListKind::kTuple) return false;
      for (const Value& e : items())
        if (!e.hashable()) return false;
      return true;
    default:
      return false;
  }
}

const Value* Object::find(const Value& key) const {
  if (key.is_string() && !index_.empty()) {
    auto it = index_.find(key.str());
    return it == index_.end() ? nullptr : &items[it->second].second;
  }
  for (const auto& kv : items)
    if (py_equal(kv.first, key)) return &kv.second;
  return nullptr;
}

void Object::set(Value key, Value value) {
  depth = std::max(depth, std::max(key.depth(), value.depth()) + 1);
  pins_frame = pins_frame || value.pins_frame();
  if (key.is_string() && !index_.empty()) {
    auto it = index_.find(key.str());
    if (it != index_.end()) {
      items[it->second].second = std::move(value);
      return;
    }
  } else {
    for (auto& kv : items)
      if (py_equal(kv.first, key)) {
        kv.second = std::move(value);
        return;
      }
  }
  items.emplace_back(std::move(key), std::move(value));
  if (items.size() >= kIndexFrom) {
    if (index_.empty()) {
      for (size_t i = 0; i < items.size(); ++i)
        if (items[i].first.is_string()) index_.emplace(items[i].first.str(), i);
    } else if (items.back().first.is_string()) {
      index_.emplace(items.back().first.str(), items.size() - 1);
    }
  }
}

bool py_equal(const Value& a, const Value& b, uint64_t* work) {
  if (work) ++*work;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  // Python compares container items with `is` first: the same object is equal to itself.
  if (a.identity() != nullptr && a.identity() == b.identity() && a.kind() != Kind::kUndefined) return true;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.str() == b.str();
    case Kind::kList: {
      auto family = [](ListKind k) { return k == ListKind::kList ? 0 : k == ListKind::kTuple ? 1 : 2; };
      if (family(a.list_kind()) != family(b.list_kind())) return false;
      const ValueList& x = a.items();
      const ValueList& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!py_equal(x[i], y[i], work)) return false;
      return true;
    }
    case Kind::kDict: {
      const Object& x = a.object();
      const Object& y = b.object();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& kv : x.items) {
        const Value* other = y.find(kv.first);
        if (other == nullptr || !py_equal(kv.second, *other, work)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

Result<bool> py_less(const Value& a, const Value& b, uint64_t* work) {
  if (work) ++*work;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list() && a.list_kind() == b.list_kind() &&
      (a.list_kind() == ListKind::kList || a.list_kind() == ListKind::kTuple)) {
    const ValueList& x = a.items();
    const ValueList& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (py_equal(x[i], y[i], work)) continue;
      return py_less(x[i], y[i], work);
    }
    return x.size() < y.size();
  }
  return invalid_argument("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

Status sort_by_key(std::vector<std::pair<Value, Value>>& kv, bool reverse, uint64_t* work) {
  const size_t n = kv.size();
  std::vector<std::pair<Value, Value>> buf(n);
  Status st;
  auto less = [&](const Value& a, const Value& b) {
    if (!st.is_ok()) return false;
    auto r = reverse ? py_less(b, a, work) : py_less(a, b, work);
    if (!r.is_ok()) {
      st = r.status();
      return false;
    }
    return r.value();
  };
  for (size_t width = 1; width < n; width *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * width) {
      size_t mid = std::min(lo + width, n), hi = std::min(lo + 2 * width, n);
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) buf[k++] = less(kv[j].first, kv[i].first) ? std::move(kv[j++]) : std::move(kv[i++]);
      while (i < mid) buf[k++] = std::move(kv[i++]);
      while (j < hi) buf[k++] = std::move(kv[j++]);
    }
    kv.swap(buf);
    KILN_RETURN_IF_ERROR(st);
  }
  return st;
}

Result<std::string> to_str(const Value& v, size_t max) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return std::string();
    case Kind::kString:
      return v.str();
    case Kind::kNone:
      return std::string("None");
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
      return py_number_text(v);
    default: {
      std::string out;
      KILN_RETURN_IF_ERROR(append_repr(v, out, max));
      if (out.size() > max) return invalid_argument("the text of a value is larger than the output limit");
      return out;
    }
  }
}

Result<std::string> to_repr(const Value& v, size_t max) {
  std::string out;
  KILN_RETURN_IF_ERROR(append_repr(v, out, max));
  if (out.size() > max) return invalid_argument("the text of a value is larger than the output limit");
  return out;
}

Status to_json_text(const Value& v, const JsonStyle& style, std::string& out, size_t max_bytes) {
  return json_value(v, style, out, max_bytes, 0);
}

Result<Value> from_json(const nlohmann::ordered_json& j, int depth) { return json_to_value(j, depth); }
Result<Value> from_json(const nlohmann::json& j, int depth) { return json_to_value(j, depth); }

Result<Value> make_dict(std::vector<std::pair<Value, Value>> items) {
  auto obj = std::make_shared<Object>();
  obj->items.reserve(items.size());
  for (auto& kv : items) {
    if (!kv.first.hashable()) return invalid_argument("unhashable type: '" + kv.first.type_name() + "'");
    if (kv.second.depth() >= kMaxDepth) return invalid_argument("values nest deeper than " + std::to_string(kMaxDepth));
    obj->set(std::move(kv.first), std::move(kv.second));
  }
  return Value::dict(std::move(obj));
}

Result<Value> make_list(ValueList items, ListKind kind) {
  for (const Value& e : items)
    if (e.depth() >= kMaxDepth) return invalid_argument("values nest deeper than " + std::to_string(kMaxDepth));
  return Value::list(std::move(items), kind);
}

}  // namespace kiln::jinja
