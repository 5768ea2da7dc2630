#include "template/jinja_eval.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "template/jinja_builtins.h"
#include "template/jinja_lexer.h"
#include "template/jinja_text.h"

namespace kiln::jinja {

Status locate(int line, int col, const Status& s) {
  if (s.is_ok() || s.message().rfind("line ", 0) == 0) return s;
  return {s.code(), where(line, col) + ": " + s.message()};
}

const Value* Frame::find(std::string_view name) const {
  for (const Frame* f = this; f != nullptr; f = f->parent)
    for (const auto& kv : f->vars)
      if (kv.first == name) return &kv.second;
  return nullptr;
}

void Frame::set(const std::string& name, Value v) {
  for (auto& kv : vars)
    if (kv.first == name) {
      kv.second = std::move(v);
      return;
    }
  vars.emplace_back(name, std::move(v));
}

namespace {

struct DepthGuard {
  explicit DepthGuard(int& d) : d_(d) { ++d_; }
  ~DepthGuard() { --d_; }
  int& d_;
};

Status undefined_error(const Value& u) {
  const std::string& h = u.undefined_hint();
  return invalid_argument(h.empty() ? "an undefined value was used" : h);
}

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  if (v.is_namespace()) return "jinja2.utils.Namespace object";
  if (v.is_loop()) return "jinja2.runtime.LoopContext object";
  return v.type_name() + " object";
}

Value missing_attribute(const Value& obj, const std::string& name) {
  std::string m = "'";  // appended, not "'" + a temporary: that sets off a false -Wrestrict in g++ 12
  m.append(object_type_repr(obj)).append("' has no attribute '").append(name).append("'");
  return Value::undefined(m);
}

Value missing_item(const Value& obj, const Value& key) {
  if (key.is_string()) return missing_attribute(obj, key.str());
  auto r = to_repr(key, 200);
  return Value::undefined(object_type_repr(obj) + " has no element " + (r.is_ok() ? r.value() : key.type_name()));
}

// Python's slice.indices(len) and the picked positions.
std::vector<size_t> slice_positions(int64_t len, std::optional<int64_t> start, std::optional<int64_t> stop,
                                    int64_t step, int64_t* out_start, int64_t* out_stop) {
  int64_t lo, hi;
  if (step > 0) {
    lo = start ? *start : 0;
    hi = stop ? *stop : len;
    if (lo < 0) lo = std::max<int64_t>(lo + len, 0);
    if (hi < 0) hi = std::max<int64_t>(hi + len, 0);
    lo = std::min(lo, len);
    hi = std::min(hi, len);
  } else {
    lo = start ? *start : len - 1;
    hi = stop ? *stop : -1;
    if (start) {
      if (lo < 0) lo = std::max<int64_t>(lo + len, -1);
      lo = std::min(lo, len - 1);
    }
    if (stop) {
      if (hi < 0) hi = std::max<int64_t>(hi + len, -1);
      hi = std::min(hi, len - 1);
    }
  }
  std::vector<size_t> pos;
  if (step > 0)
    for (int64_t i = lo; i < hi; i += step) pos.push_back(static_cast<size_t>(i));
  else
    for (int64_t i = lo; i > hi; i += step) pos.push_back(static_cast<size_t>(i));
  *out_start = lo;
  *out_stop = hi;
  return pos;
}

Result<std::optional<int64_t>> slice_bound(const Value& v) {
  if (v.is_none()) return std::optional<int64_t>();
  if (v.is_int() || v.is_bool()) return std::optional<int64_t>(v.as_int());
  return invalid_argument("slice indices must be integers or None or have an __index__ method");
}

bool is_sequence_like(const Value& v) {
  return v.is_list() &&
         (v.list_kind() == ListKind::kList || v.list_kind() == ListKind::kTuple || v.list_kind() == ListKind::kRange);
}

double py_float_mod(double a, double b) {
  double mod = std::fmod(a, b);
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod;
}

double py_float_floordiv(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div != 0) {
    double fl = std::floor(div);
    if (div - fl > 0.5) fl += 1.0;
    return fl;
  }
  return std::copysign(0.0, a / b);
}

Status type_error_operands(const char* op, const Value& a, const Value& b) {
  return invalid_argument(std::string("unsupported operand type(s) for ") + op + ": '" + a.type_name() + "' and '" +
                          b.type_name() + "'");
}

}  // namespace

Status Interpreter::step(uint64_t n) {
  steps_ += n + work_ / 4;
  work_ = 0;
  if (steps_ > limits_.max_steps)
    return invalid_argument("the template ran too long (more than " + std::to_string(limits_.max_steps) +
                            " steps); it may loop without end");
  return Status::ok();
}

Status Interpreter::alloc(uint64_t bytes) {
  alloc_ += bytes;
  if (alloc_ > limits_.max_alloc_bytes)
    return invalid_argument("the template built more than " + std::to_string(limits_.max_alloc_bytes) +
                            " bytes of values");
  return Status::ok();
}

Result<Value> Interpreter::make_string(std::string s, bool markup) {
  if (s.size() > limits_.max_output_bytes)
    return invalid_argument("a string would be larger than the output limit (" +
                            std::to_string(limits_.max_output_bytes) + " bytes)");
  KILN_RETURN_IF_ERROR(alloc(s.size()));
  return Value::string(std::move(s), markup);
}

Status Interpreter::write(std::string_view text) {
  if (out_->size() + text.size() > limits_.max_output_bytes)
    return invalid_argument("the rendered text is larger than the output limit (" +
                            std::to_string(limits_.max_output_bytes) + " bytes)");
  out_->append(text);
  return Status::ok();
}

Result<std::string> Interpreter::render(const Template& tpl, Frame& root) {
  std::string out;
  out_ = &out;
  root_ = &root;
  flow_ = Flow::kNormal;
  KILN_RETURN_IF_ERROR(exec_body(tpl.body, root));
  out_ = nullptr;
  return out;
}

Result<std::string> Interpreter::capture(const Body& body, Frame& f) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  Status st = exec_body(body, f);
  out_ = saved;
  if (!st.is_ok()) return st;
  return buf;
}

Status Interpreter::exec_body(const Body& body, Frame& f) {
  for (const StmtPtr& s : body) {
    KILN_RETURN_IF_ERROR(exec(*s, f));
    if (flow_ != Flow::kNormal) break;
  }
  return Status::ok();
}

Status Interpreter::exec(const Stmt& s, Frame& f) {
  DepthGuard g(eval_depth_);
  if (eval_depth_ > limits_.max_eval_depth)
    return locate(s.line, s.col, invalid_argument("the template recurses too deeply"));
  KILN_RETURN_IF_ERROR(locate(s.line, s.col, step()));
  switch (s.kind) {
    case StmtKind::kText:
      return write(s.text);
    case StmtKind::kOutput: {
      KILN_ASSIGN_OR_RETURN(Value v, eval(*s.expr, f));
      if (v.is_string()) return write(v.str());
      auto text = this->text(v);
      if (!text.is_ok()) return locate(s.line, s.col, text.status());
      return write(text.value());
    }
    case StmtKind::kIf:
      for (const auto& [cond, body] : s.branches) {
        KILN_ASSIGN_OR_RETURN(Value c, eval(*cond, f));
        if (c.truthy()) return exec_body(body, f);
      }
      return exec_body(s.else_body, f);
    case StmtKind::kFor:
      return exec_for(s, f);
    case StmtKind::kSet:
    case StmtKind::kSetBlock:
      return exec_set(s, f);
    case StmtKind::kMacro: {
      auto fn = std::make_shared<Callable>();
      fn->type = Callable::Type::kMacro;
      fn->name = s.macro->name;
      fn->macro = s.macro.get();
      fn->closure = &f;
      f.set(s.macro->name, Value::callable(std::move(fn)));
      return Status::ok();
    }
    case StmtKind::kCallBlock:
      return exec_call_block(s, f);
    case StmtKind::kFilterBlock: {
      Frame inner{&f, {}};
      KILN_ASSIGN_OR_RETURN(std::string body, capture(s.body, inner));
      KILN_ASSIGN_OR_RETURN(Value v, make_string(std::move(body)));
      KILN_ASSIGN_OR_RETURN(v, apply_filters(s.filters, std::move(v), f));
      auto out = this->text(v);
      if (!out.is_ok()) return locate(s.line, s.col, out.status());
      return write(out.value());
    }
    case StmtKind::kWith: {
      Frame inner{&f, {}};
      for (size_t i = 0; i < s.targets.size(); ++i) {
        KILN_ASSIGN_OR_RETURN(Value v, eval(*s.values[i], f));
        inner.set(s.targets[i], std::move(v));
      }
      return exec_body(s.body, inner);
    }
    case StmtKind::kScope: {
      Frame inner{&f, {}};
      return exec_body(s.body, inner);
    }
    case StmtKind::kBreak:
      flow_ = Flow::kBreak;
      return Status::ok();
    case StmtKind::kContinue:
      flow_ = Flow::kContinue;
      return Status::ok();
  }
  return Status::ok();
}

Status Interpreter::assign(const Stmt& s, Frame& f, Value v) {
  if (v.depth() >= kMaxDepth)
    return locate(s.line, s.col, invalid_argument("values nest deeper than " + std::to_string(kMaxDepth) + " levels"));
  if (!s.ns_attr.empty()) {
    const Value* ns = f.find(s.targets[0]);
    if (ns == nullptr || !ns->is_namespace())
      return locate(s.line, s.col, invalid_argument("cannot assign attribute on non-namespace object"));
    if (s.ns_attr[0] == '_')
      return locate(s.line, s.col,
                    invalid_argument("Chat templates cannot store underscore-prefixed attributes on a namespace, but "
                                     "got '" +
                                     s.ns_attr + "'. Please rename the attribute."));
    if (v.pins_frame())
      return locate(s.line, s.col,
                    unsupported("kiln's template engine does not store a namespace, loop, iterator or macro in a "
                                "namespace attribute"));
    ns->ns().set(Value::string(s.ns_attr), std::move(v));
    return Status::ok();
  }
  if (!s.unpack) {
    f.set(s.targets[0], std::move(v));
    return Status::ok();
  }
  auto items = iterate(v);
  if (!items.is_ok()) return locate(s.line, s.col, items.status());
  if (items->size() != s.targets.size())
    return locate(s.line, s.col,
                  invalid_argument(items->size() > s.targets.size()
                                       ? "too many values to unpack (expected " + std::to_string(s.targets.size()) + ")"
                                       : "not enough values to unpack (expected " + std::to_string(s.targets.size()) +
                                             ", got " + std::to_string(items->size()) + ")"));
  for (size_t i = 0; i < s.targets.size(); ++i) f.set(s.targets[i], std::move((*items)[i]));
  return Status::ok();
}

Status Interpreter::exec_set(const Stmt& s, Frame& f) {
  if (s.kind == StmtKind::kSet) {
    KILN_ASSIGN_OR_RETURN(Value v, eval(*s.expr, f));
    return assign(s, f, std::move(v));
  }
  Frame inner{&f, {}};
  KILN_ASSIGN_OR_RETURN(std::string text, capture(s.body, inner));
  KILN_ASSIGN_OR_RETURN(Value v, make_string(std::move(text)));
  KILN_ASSIGN_OR_RETURN(v, apply_filters(s.filters, std::move(v), f));
  return assign(s, f, std::move(v));
}

Result<Value> Interpreter::apply_filters(const std::vector<ExprPtr>& filters, Value v, Frame& f) {
  for (const ExprPtr& flt : filters) {
    if (!flt->deferred_error.empty()) return locate(flt->line, flt->col, unsupported(flt->deferred_error));
    KILN_ASSIGN_OR_RETURN(CallArgs args, eval_args(*flt, 1, f));
    auto r = call_filter(*this, flt->name, v, args);
    if (!r.is_ok()) return locate(flt->line, flt->col, r.status());
    v = std::move(r).value();
  }
  return v;
}

Status Interpreter::exec_for(const Stmt& s, Frame& f) {
  KILN_ASSIGN_OR_RETURN(Value iterable, eval(*s.expr, f));
  auto listed = iterate(iterable);
  if (!listed.is_ok()) return locate(s.expr->line, s.expr->col, listed.status());
  ValueList items = std::move(listed).value();
  Stmt bind;  // the loop's targets, as an assignment
  bind.line = s.line;
  bind.col = s.col;
  bind.targets = s.targets;
  bind.unpack = s.unpack;
  if (s.cond) {
    ValueList kept;
    for (Value& item : items) {
      Frame probe{&f, {}};
      KILN_RETURN_IF_ERROR(assign(bind, probe, item));
      KILN_ASSIGN_OR_RETURN(Value c, eval(*s.cond, probe));
      if (c.truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    Frame inner{&f, {}};
    return exec_body(s.else_body, inner);
  }
  auto arr = std::make_shared<Array>();
  arr->items = std::move(items);
  auto state = std::make_shared<LoopState>();
  state->items = arr;
  Value loopv = Value::loop(state);
  for (size_t i = 0; i < arr->items.size(); ++i) {
    KILN_RETURN_IF_ERROR(locate(s.line, s.col, step()));
    state->index0 = i;
    Frame it{&f, {}};
    KILN_RETURN_IF_ERROR(assign(bind, it, arr->items[i]));
    it.set("loop", loopv);
    KILN_RETURN_IF_ERROR(exec_body(s.body, it));
    if (flow_ == Flow::kBreak) {
      flow_ = Flow::kNormal;
      break;
    }
    flow_ = Flow::kNormal;
  }
  return Status::ok();
}

Status Interpreter::exec_call_block(const Stmt& s, Frame& f) {
  auto caller = std::make_shared<Callable>();
  caller->type = Callable::Type::kMacro;
  caller->name = "caller";
  caller->macro = s.macro.get();
  caller->closure = &f;
  caller->is_caller = true;
  const Expr& call = *s.expr;
  KILN_ASSIGN_OR_RETURN(Value callee, eval(*call.args[0], f));
  KILN_ASSIGN_OR_RETURN(CallArgs args, eval_args(call, 1, f));
  args.kw.emplace_back("caller", Value::callable(std::move(caller)));
  auto r = this->call(callee, std::move(args));
  if (!r.is_ok()) return locate(call.line, call.col, r.status());
  auto text = this->text(r.value());
  if (!text.is_ok()) return locate(s.line, s.col, text.status());
  return write(text.value());
}

Result<Value> Interpreter::call_macro(const Callable& fn, CallArgs args) {
  const MacroStmt& m = *fn.macro;
  if (call_depth_ >= limits_.max_call_depth)
    return invalid_argument("macro calls nest deeper than " + std::to_string(limits_.max_call_depth));
  DepthGuard g(call_depth_);
  Frame mf{fn.closure, {}};
  const size_t np = m.params.size();
  if (args.pos.size() > np && !m.uses_varargs)
    return invalid_argument("macro '" + m.name + "' takes not more than " + std::to_string(np) + " argument(s)");
  std::vector<bool> bound(np, false);
  for (size_t i = 0; i < np && i < args.pos.size(); ++i) {
    mf.set(m.params[i], args.pos[i]);
    bound[i] = true;
  }
  std::vector<std::pair<Value, Value>> extra_kw;
  for (auto& [key, v] : args.kw) {
    size_t idx = np;
    for (size_t i = 0; i < np; ++i)
      if (m.params[i] == key) idx = i;
    if (idx < np) {
      if (bound[idx]) return invalid_argument("macro '" + m.name + "' got multiple values for argument '" + key + "'");
      mf.set(key, v);
      bound[idx] = true;
    } else if (key == "caller") {
      mf.set("caller", v);
    } else if (m.uses_kwargs) {
      extra_kw.emplace_back(Value::string(key), v);
    } else {
      return invalid_argument("macro '" + m.name + "' takes no keyword argument '" + key + "'");
    }
  }
  for (size_t i = 0; i < np; ++i) {
    if (bound[i]) continue;
    if (m.defaults[i]) {
      KILN_ASSIGN_OR_RETURN(Value d, eval(*m.defaults[i], mf));
      mf.set(m.params[i], std::move(d));
    } else {
      mf.set(m.params[i], Value::undefined("parameter '" + m.params[i] + "' was not provided"));
    }
  }
  if (m.uses_varargs) {
    ValueList rest;
    for (size_t i = np; i < args.pos.size(); ++i) rest.push_back(args.pos[i]);
    mf.set("varargs", Value::list(std::move(rest), ListKind::kTuple));
  }
  if (m.uses_kwargs) {
    KILN_ASSIGN_OR_RETURN(Value kw, make_dict(std::move(extra_kw)));
    mf.set("kwargs", std::move(kw));
  }
  if (m.uses_caller && mf.vars.end() == std::find_if(mf.vars.begin(), mf.vars.end(),
                                                     [](const auto& kv) { return kv.first == "caller"; }))
    mf.set("caller", Value::undefined("No caller defined"));
  for (const auto& kv : mf.vars)
    if (kv.second.depth() >= kMaxDepth) return invalid_argument("values nest deeper than " + std::to_string(kMaxDepth));
  KILN_ASSIGN_OR_RETURN(std::string text, capture(m.body, mf));
  return make_string(std::move(text));
}

Result<Value> Interpreter::call(const Value& fn, CallArgs args) {
  if (fn.is_undefined()) return undefined_error(fn);
  if (!fn.is_callable()) return invalid_argument("'" + fn.type_name() + "' object is not callable");
  const Callable& c = fn.fn();
  switch (c.type) {
    case Callable::Type::kMacro:
      return call_macro(c, std::move(args));
    case Callable::Type::kBuiltin:
      return call_global(*this, c.name, args);
    case Callable::Type::kMethod:
      return call_method(*this, c.self, c.name, args);
  }
  return invalid_argument("not callable");
}

Result<Value> Interpreter::getattr_only(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (!name.empty() && name[0] == '_')
    return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe");
  if (obj.is_namespace()) {
    const Value* v = obj.ns().find(Value::string(name));
    return v ? *v : missing_attribute(obj, name);
  }
  if (obj.is_loop()) {
    Value v = loop_attribute(obj, name);
    return v.is_undefined() ? missing_attribute(obj, name) : v;
  }
  if (has_method(obj, name)) {
    auto fn = std::make_shared<Callable>();
    fn->type = Callable::Type::kMethod;
    fn->name = name;
    fn->self = obj;
    return Value::callable(std::move(fn));
  }
  return missing_attribute(obj, name);
}

Result<Value> Interpreter::getattr(const Value& obj, const std::string& name) {
  KILN_ASSIGN_OR_RETURN(Value v, getattr_only(obj, name));
  if (!v.is_undefined()) return v;
  if (obj.is_dict() && (name.empty() || name[0] != '_')) {
    const Value* item = obj.object().find(Value::string(name));
    if (item) return *item;
  }
  return v;
}

Result<Value> Interpreter::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (obj.is_dict()) {
    if (key.hashable()) {
      const Value* item = obj.object().find(key);
      if (item) return *item;
    }
  } else if (obj.is_list() || obj.is_string()) {
    bool subscriptable = obj.is_string() || is_sequence_like(obj);
    if (subscriptable && (key.is_int() || key.is_bool())) {
      int64_t n = obj.is_string() ? static_cast<int64_t>(count_code_points(obj.str()))
                                  : static_cast<int64_t>(obj.items().size());
      int64_t i = key.as_int();
      if (i < 0) i += n;
      if (i >= 0 && i < n) {
        if (obj.is_list()) return obj.items()[static_cast<size_t>(i)];
        const std::string& s = obj.str();
        size_t b = byte_offset_of(s, static_cast<size_t>(i));
        size_t e = byte_offset_of(std::string_view(s).substr(b), 1) + b;
        return make_string(s.substr(b, e - b));
      }
      return missing_item(obj, key);
    }
  }
  if (key.is_string()) {
    KILN_ASSIGN_OR_RETURN(Value v, getattr_only(obj, key.str()));
    if (!v.is_undefined()) return v;
  }
  return missing_item(obj, key);
}

Result<ValueList> Interpreter::iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return ValueList{};
    case Kind::kList:
      KILN_RETURN_IF_ERROR(step(v.items().size()));
      return v.items();
    case Kind::kDict: {
      KILN_RETURN_IF_ERROR(step(v.object().items.size()));
      ValueList keys;
      keys.reserve(v.object().items.size());
      for (const auto& kv : v.object().items) keys.push_back(kv.first);
      return keys;
    }
    case Kind::kString: {
      std::u32string u = to_u32(v.str());
      KILN_RETURN_IF_ERROR(step(u.size()));
      KILN_RETURN_IF_ERROR(alloc(u.size() * 40));
      ValueList chars;
      chars.reserve(u.size());
      for (char32_t c : u) {
        std::string one;
        append_utf8(one, c);
        chars.push_back(Value::string(std::move(one)));
      }
      return chars;
    }
    case Kind::kIterator: {
      IterState& it = v.iter();
      KILN_RETURN_IF_ERROR(step(it.items.size() - it.pos));
      ValueList rest(it.items.begin() + static_cast<std::ptrdiff_t>(it.pos), it.items.end());
      it.pos = it.items.size();
      return rest;
    }
    default:
      return invalid_argument("'" + v.type_name() + "' object is not iterable");
  }
}

Result<bool> Interpreter::contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kUndefined:
      return false;
    case Kind::kString:
      if (!item.is_string())
        return invalid_argument("'in <string>' requires string as left operand, not " + item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList:
      KILN_RETURN_IF_ERROR(step(container.items().size()));
      for (const Value& e : container.items())
        if (py_equal(e, item, &work_)) return true;
      return false;
    case Kind::kDict:
      if (!item.hashable()) return invalid_argument("unhashable type: '" + item.type_name() + "'");
      return container.object().find(item) != nullptr;
    case Kind::kIterator: {
      IterState& it = container.iter();
      while (it.pos < it.items.size()) {
        KILN_RETURN_IF_ERROR(step());
        if (py_equal(it.items[it.pos++], item, &work_)) return true;
      }
      return false;
    }
    default:
      return invalid_argument("argument of type '" + container.type_name() + "' is not iterable");
  }
}

Result<Value> Interpreter::binary(BinOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  const bool nums = a.is_number() && b.is_number();
  const bool floats = nums && (a.is_float() || b.is_float());
  switch (op) {
    case BinOp::kAdd: {
      if (nums) {
        if (floats) return Value::number(a.as_double() + b.as_double());
        int64_t r;
        if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) return invalid_argument("integer overflow in '+'");
        return Value::integer(r);
      }
      if (a.is_string() && b.is_string()) {
        if (a.is_markup() == b.is_markup()) return make_string(a.str() + b.str(), a.is_markup());
        if (a.is_markup()) return make_string(a.str() + html_escape(b.str()), true);
        return make_string(html_escape(a.str()) + b.str(), true);
      }
      if (a.is_list() && b.is_list() && a.list_kind() == b.list_kind() &&
          (a.list_kind() == ListKind::kList || a.list_kind() == ListKind::kTuple)) {
        KILN_RETURN_IF_ERROR(step(a.items().size() + b.items().size()));
        KILN_RETURN_IF_ERROR(alloc(32 * (a.items().size() + b.items().size())));
        ValueList items = a.items();
        items.insert(items.end(), b.items().begin(), b.items().end());
        return Value::list(std::move(items), a.list_kind());
      }
      if (a.is_string()) return invalid_argument("can only concatenate str (not \"" + b.type_name() + "\") to str");
      if (a.is_list() && (a.list_kind() == ListKind::kList || a.list_kind() == ListKind::kTuple))
        return invalid_argument("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " +
                                a.type_name());
      return type_error_operands("+", a, b);
    }
    case BinOp::kSub: {
      if (!nums) return type_error_operands("-", a, b);
      if (floats) return Value::number(a.as_double() - b.as_double());
      int64_t r;
      if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) return invalid_argument("integer overflow in '-'");
      return Value::integer(r);
    }
    case BinOp::kMul: {
      if (nums) {
        if (floats) return Value::number(a.as_double() * b.as_double());
        int64_t r;
        if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) return invalid_argument("integer overflow in '*'");
        return Value::integer(r);
      }
      const Value* seq = nullptr;
      const Value* count = nullptr;
      if ((a.is_int() || a.is_bool()) && !b.is_number()) {
        seq = &b;
        count = &a;
      } else if ((b.is_int() || b.is_bool()) && !a.is_number()) {
        seq = &a;
        count = &b;
      }
      if (seq == nullptr || !(seq->is_string() || (seq->is_list() && (seq->list_kind() == ListKind::kList ||
                                                                      seq->list_kind() == ListKind::kTuple))))
        return type_error_operands("*", a, b);
      int64_t n = std::max<int64_t>(count->as_int(), 0);
      size_t unit = seq->is_string() ? seq->str().size() : seq->items().size();
      if (unit != 0 && static_cast<uint64_t>(n) > limits_.max_output_bytes / unit)
        return invalid_argument("a repeated sequence would be larger than the output limit");
      KILN_RETURN_IF_ERROR(step(unit * static_cast<size_t>(n) / 16 + 1));
      if (seq->is_string()) {
        std::string out;
        out.reserve(unit * static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) out += seq->str();
        return make_string(std::move(out), seq->is_markup());
      }
      KILN_RETURN_IF_ERROR(alloc(32 * unit * static_cast<size_t>(n)));
      ValueList items;
      items.reserve(unit * static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq->items().begin(), seq->items().end());
      return Value::list(std::move(items), seq->list_kind());
    }
    case BinOp::kDiv: {
      if (!nums) return type_error_operands("/", a, b);
      if (b.as_double() == 0) return invalid_argument("division by zero");
      return Value::number(a.as_double() / b.as_double());
    }
    case BinOp::kFloorDiv: {
      if (!nums) return type_error_operands("//", a, b);
      if (floats) {
        if (b.as_double() == 0) return invalid_argument("float floor division by zero");
        return Value::number(py_float_floordiv(a.as_double(), b.as_double()));
      }
      int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) return invalid_argument("integer division or modulo by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1) return invalid_argument("integer overflow in '//'");
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return Value::integer(q);
    }
    case BinOp::kMod: {
      if (a.is_string()) return percent_format(*this, a, b);
      if (!nums) return type_error_operands("%", a, b);
      if (floats) {
        if (b.as_double() == 0) return invalid_argument("float modulo");
        return Value::number(py_float_mod(a.as_double(), b.as_double()));
      }
      int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) return invalid_argument("integer division or modulo by zero");
      if (y == -1) return Value::integer(0);
      int64_t r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return Value::integer(r);
    }
    case BinOp::kPow: {
      if (!nums) return type_error_operands("** or pow()", a, b);
      if (!floats && b.as_int() >= 0) {
        int64_t base = a.as_int(), e = b.as_int(), r = 1;
        while (e > 0) {
          if (e & 1)
            if (__builtin_mul_overflow(r, base, &r)) return invalid_argument("integer overflow in '**'");
          e >>= 1;
          if (e > 0 && __builtin_mul_overflow(base, base, &base)) return invalid_argument("integer overflow in '**'");
        }
        return Value::integer(r);
      }
      if (a.as_double() == 0 && b.as_double() < 0) return invalid_argument("0.0 cannot be raised to a negative power");
      double r = std::pow(a.as_double(), b.as_double());
      if (std::isnan(r) && !std::isnan(a.as_double()) && !std::isnan(b.as_double()))
        return unsupported("a negative number raised to a fractional power is complex");
      return Value::number(r);
    }
  }
  return invalid_argument("unknown operator");
}

Result<CallArgs> Interpreter::eval_args(const Expr& e, size_t first, Frame& f) {
  CallArgs args;
  for (size_t i = first; i < e.args.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value v, eval(*e.args[i], f));
    args.pos.push_back(std::move(v));
  }
  for (const auto& [k, ex] : e.kwargs) {
    KILN_ASSIGN_OR_RETURN(Value v, eval(*ex, f));
    args.kw.emplace_back(k, std::move(v));
  }
  return args;
}

Result<Value> Interpreter::eval(const Expr& e, Frame& f) {
  DepthGuard g(eval_depth_);
  if (eval_depth_ > limits_.max_eval_depth)
    return locate(e.line, e.col, invalid_argument("the template recurses too deeply"));
  KILN_RETURN_IF_ERROR(locate(e.line, e.col, step()));
  auto r = eval_inner(e, f);
  if (!r.is_ok()) return locate(e.line, e.col, r.status());
  return r;
}

Result<Value> Interpreter::eval_slice(const Expr& e, Frame& f) {
  KILN_ASSIGN_OR_RETURN(Value obj, eval(*e.args[0], f));
  std::optional<int64_t> bounds[3];
  for (int k = 0; k < 3; ++k) {
    if (!e.args[static_cast<size_t>(k) + 1]) continue;
    KILN_ASSIGN_OR_RETURN(Value b, eval(*e.args[static_cast<size_t>(k) + 1], f));
    KILN_ASSIGN_OR_RETURN(bounds[k], slice_bound(b));
  }
  if (obj.is_undefined()) return undefined_error(obj);
  int64_t step_v = bounds[2] ? *bounds[2] : 1;
  if (step_v == 0) return invalid_argument("slice step cannot be zero");
  int64_t lo = 0, hi = 0;
  if (obj.is_string()) {
    std::u32string u = to_u32(obj.str());
    std::vector<size_t> pos = slice_positions(static_cast<int64_t>(u.size()), bounds[0], bounds[1], step_v, &lo, &hi);
    std::u32string r;
    r.reserve(pos.size());
    for (size_t p : pos) r += u[p];
    return make_string(to_utf8(r), obj.is_markup());
  }
  if (is_sequence_like(obj)) {
    const ValueList& items = obj.items();
    std::vector<size_t> pos =
        slice_positions(static_cast<int64_t>(items.size()), bounds[0], bounds[1], step_v, &lo, &hi);
    KILN_RETURN_IF_ERROR(step(pos.size()));
    ValueList r;
    r.reserve(pos.size());
    for (size_t p : pos) r.push_back(items[p]);
    if (obj.list_kind() == ListKind::kRange) {
      const Array& a = obj.array();
      return Value::range(a.r_start + lo * a.r_step, a.r_start + hi * a.r_step, a.r_step * step_v, std::move(r));
    }
    return Value::list(std::move(r), obj.list_kind());
  }
  if (obj.is_dict()) return invalid_argument("unhashable type: 'slice'");
  return invalid_argument("'" + obj.type_name() + "' object is not subscriptable");
}

Result<Value> Interpreter::eval_compare(const Expr& e, Frame& f) {
  KILN_ASSIGN_OR_RETURN(Value left, eval(*e.args[0], f));
  for (size_t i = 0; i < e.cmp.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value right, eval(*e.args[i + 1], f));
    bool r = false;
    switch (e.cmp[i]) {
      case CmpOp::kEq:
        r = py_equal(left, right, &work_);
        break;
      case CmpOp::kNe:
        r = !py_equal(left, right, &work_);
        break;
      case CmpOp::kLt: {
        KILN_ASSIGN_OR_RETURN(r, py_less(left, right, &work_));
        break;
      }
      case CmpOp::kGt: {
        KILN_ASSIGN_OR_RETURN(r, py_less(right, left, &work_));
        break;
      }
      case CmpOp::kLe:
      case CmpOp::kGe: {
        const Value& x = e.cmp[i] == CmpOp::kLe ? left : right;
        const Value& y = e.cmp[i] == CmpOp::kLe ? right : left;
        if (x.is_number() && y.is_number()) {
          r = (x.is_float() || y.is_float()) ? x.as_double() <= y.as_double() : x.as_int() <= y.as_int();
        } else {
          KILN_ASSIGN_OR_RETURN(bool lt, py_less(x, y, &work_));
          r = lt || py_equal(x, y, &work_);
        }
        break;
      }
      case CmpOp::kIn: {
        KILN_ASSIGN_OR_RETURN(r, contains(right, left));
        break;
      }
      case CmpOp::kNotIn: {
        KILN_ASSIGN_OR_RETURN(bool in, contains(right, left));
        r = !in;
        break;
      }
    }
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Result<Value> Interpreter::eval_inner(const Expr& e, Frame& f) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.literal;
    case ExprKind::kName: {
      const Value* v = f.find(e.name);
      if (v) return *v;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      ValueList items;
      items.reserve(e.args.size());
      for (const ExprPtr& a : e.args) {
        KILN_ASSIGN_OR_RETURN(Value v, eval(*a, f));
        items.push_back(std::move(v));
      }
      KILN_RETURN_IF_ERROR(alloc(32 * items.size()));
      return make_list(std::move(items), e.kind == ExprKind::kTuple ? ListKind::kTuple : ListKind::kList);
    }
    case ExprKind::kDict: {
      std::vector<std::pair<Value, Value>> kv;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        KILN_ASSIGN_OR_RETURN(Value k, eval(*e.args[i], f));
        KILN_ASSIGN_OR_RETURN(Value v, eval(*e.args[i + 1], f));
        kv.emplace_back(std::move(k), std::move(v));
      }
      KILN_RETURN_IF_ERROR(alloc(64 * kv.size()));
      return make_dict(std::move(kv));
    }
    case ExprKind::kGetAttr: {
      KILN_ASSIGN_OR_RETURN(Value obj, eval(*e.args[0], f));
      return getattr(obj, e.name);
    }
    case ExprKind::kGetItem: {
      KILN_ASSIGN_OR_RETURN(Value obj, eval(*e.args[0], f));
      KILN_ASSIGN_OR_RETURN(Value key, eval(*e.args[1], f));
      return getitem(obj, key);
    }
    case ExprKind::kSlice:
      return eval_slice(e, f);
    case ExprKind::kCall: {
      KILN_ASSIGN_OR_RETURN(Value fn, eval(*e.args[0], f));
      KILN_ASSIGN_OR_RETURN(CallArgs args, eval_args(e, 1, f));
      return call(fn, std::move(args));
    }
    case ExprKind::kFilter: {
      if (!e.deferred_error.empty()) return unsupported(e.deferred_error);
      Value input;
      if (e.args[0]) {
        KILN_ASSIGN_OR_RETURN(input, eval(*e.args[0], f));
      }
      KILN_ASSIGN_OR_RETURN(CallArgs args, eval_args(e, 1, f));
      return call_filter(*this, e.name, input, args);
    }
    case ExprKind::kTest: {
      if (!e.deferred_error.empty()) return unsupported(e.deferred_error);
      KILN_ASSIGN_OR_RETURN(Value input, eval(*e.args[0], f));
      KILN_ASSIGN_OR_RETURN(CallArgs args, eval_args(e, 1, f));
      KILN_ASSIGN_OR_RETURN(bool r, call_test(*this, e.name, input, args));
      return Value::boolean(r);
    }
    case ExprKind::kNot: {
      KILN_ASSIGN_OR_RETURN(Value v, eval(*e.args[0], f));
      return Value::boolean(!v.truthy());
    }
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      KILN_ASSIGN_OR_RETURN(Value v, eval(*e.args[0], f));
      if (v.is_undefined()) return undefined_error(v);
      if (!v.is_number())
        return invalid_argument(std::string("bad operand type for unary ") + (e.kind == ExprKind::kNeg ? "-" : "+") +
                                ": '" + v.type_name() + "'");
      if (e.kind == ExprKind::kPos) return v.is_float() ? v : Value::integer(v.as_int());
      if (v.is_float()) return Value::number(-v.as_double());
      if (v.as_int() == std::numeric_limits<int64_t>::min()) return invalid_argument("integer overflow in unary '-'");
      return Value::integer(-v.as_int());
    }
    case ExprKind::kBinary: {
      KILN_ASSIGN_OR_RETURN(Value a, eval(*e.args[0], f));
      KILN_ASSIGN_OR_RETURN(Value b, eval(*e.args[1], f));
      return binary(e.op, a, b);
    }
    case ExprKind::kAnd: {
      KILN_ASSIGN_OR_RETURN(Value a, eval(*e.args[0], f));
      if (!a.truthy()) return a;
      return eval(*e.args[1], f);
    }
    case ExprKind::kOr: {
      KILN_ASSIGN_OR_RETURN(Value a, eval(*e.args[0], f));
      if (a.truthy()) return a;
      return eval(*e.args[1], f);
    }
    case ExprKind::kConcat: {
      std::string out;
      for (const ExprPtr& a : e.args) {
        KILN_ASSIGN_OR_RETURN(Value v, eval(*a, f));
        KILN_ASSIGN_OR_RETURN(std::string s, text(v));
        out += s;
        if (out.size() > limits_.max_output_bytes)
          return invalid_argument("a string would be larger than the output limit");
      }
      return make_string(std::move(out));
    }
    case ExprKind::kCompare:
      return eval_compare(e, f);
    case ExprKind::kCond: {
      KILN_ASSIGN_OR_RETURN(Value c, eval(*e.args[1], f));
      if (c.truthy()) return eval(*e.args[0], f);
      if (e.args[2]) return eval(*e.args[2], f);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return invalid_argument("unknown expression");
}

}  // namespace kiln::jinja
