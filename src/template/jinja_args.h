// Binding a call's positional and keyword arguments to a builtin's parameters, Python style,
// and the argument conversions the builtins share.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "core/status.h"
#include "template/jinja_eval.h"
#include "template/jinja_value.h"

namespace kiln::jinja {

struct Bound {
  std::vector<const Value*> v;  // one per parameter, null when not given
  const Value* get(size_t i) const { return i < v.size() ? v[i] : nullptr; }
  bool has(size_t i) const { return get(i) != nullptr; }
};

inline Result<Bound> bind(const CallArgs& a, const std::string& fname, std::initializer_list<const char*> names) {
  Bound b;
  b.v.assign(names.size(), nullptr);
  if (a.pos.size() > names.size())
    return invalid_argument(fname + "() takes at most " + std::to_string(names.size()) + " argument(s) (" +
                            std::to_string(a.pos.size()) + " given)");
  for (size_t i = 0; i < a.pos.size(); ++i) b.v[i] = &a.pos[i];
  for (const auto& [k, val] : a.kw) {
    size_t idx = 0;
    bool found = false;
    for (const char* n : names) {
      if (k == n) {
        found = true;
        break;
      }
      ++idx;
    }
    if (!found) return invalid_argument(fname + "() got an unexpected keyword argument '" + k + "'");
    if (b.v[idx]) return invalid_argument(fname + "() got multiple values for argument '" + k + "'");
    b.v[idx] = &val;
  }
  return b;
}

inline Result<int64_t> int_arg(const Value* v, int64_t fallback, const std::string& what) {
  if (v == nullptr || v->is_none()) return fallback;
  if (v->is_int() || v->is_bool()) return v->as_int();
  return invalid_argument(what + " must be an integer, not " + v->type_name());
}

inline bool bool_arg(const Value* v, bool fallback) { return v == nullptr ? fallback : v->truthy(); }

inline Result<std::string> str_arg(const Value* v, const std::string& fallback, const std::string& what) {
  if (v == nullptr) return fallback;
  if (v->is_string()) return v->str();
  return invalid_argument(what + " must be a string, not " + v->type_name());
}

}  // namespace kiln::jinja
