// The values a chat template computes with, modelled on the Python objects Jinja2 hands around:
// undefined, None, bool, int, float, str (optionally Markup), list/tuple (and the range and
// dict-view sequences), dict (insertion-ordered), namespace, callables, one-pass iterators and
// the loop object. Values are immutable and cheap to copy (shared), except namespaces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"

namespace kiln::jinja {

class Value;
using ValueList = std::vector<Value>;
struct MacroStmt;
struct Frame;
struct Array;
struct Object;
struct Callable;
struct IterState;
struct LoopState;

enum class Kind : uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kDict,
  kNamespace,
  kCallable,
  kIterator,
  kLoop,
};

// What a kList value prints as and allows.
enum class ListKind : uint8_t { kList, kTuple, kRange, kDictKeys, kDictValues, kDictItems };

// Containers deeper than this are refused, so that printing, comparing and freeing never
// recurse without bound.
constexpr int kMaxDepth = 256;

class Value {
 public:
  Value() = default;  // undefined
  static Value undefined(std::string hint = {});
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s, bool markup = false);
  static Value list(ValueList items, ListKind kind = ListKind::kList);
  static Value range(int64_t start, int64_t stop, int64_t step, ValueList items);
  static Value dict(std::shared_ptr<const Object> obj);
  static Value namespace_(std::shared_ptr<Object> obj);
  static Value callable(std::shared_ptr<const Callable> fn);
  static Value iterator(std::shared_ptr<IterState> it);
  static Value loop(std::shared_ptr<LoopState> loop);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_iterator() const { return kind_ == Kind::kIterator; }
  bool is_loop() const { return kind_ == Kind::kLoop; }
  bool is_markup() const { return markup_; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }  // bool counts as int
  double as_double() const { return kind_ == Kind::kFloat ? d_ : static_cast<double>(as_int()); }
  const std::string& str() const { return *static_cast<const std::string*>(ptr_.get()); }
  const Array& array() const { return *static_cast<const Array*>(ptr_.get()); }
  ListKind list_kind() const;
  const ValueList& items() const;
  const Object& object() const { return *static_cast<const Object*>(ptr_.get()); }
  Object& ns() const { return *static_cast<Object*>(const_cast<void*>(ptr_.get())); }
  const Callable& fn() const { return *static_cast<const Callable*>(ptr_.get()); }
  IterState& iter() const { return *static_cast<IterState*>(const_cast<void*>(ptr_.get())); }
  LoopState& loop_state() const { return *static_cast<LoopState*>(const_cast<void*>(ptr_.get())); }
  const std::string& undefined_hint() const;
  // The shared array, for the loop object.
  std::shared_ptr<const Array> array_ptr() const { return std::static_pointer_cast<const Array>(ptr_); }
  const void* identity() const { return ptr_.get(); }

  // Nesting depth (1 for scalars) and whether the value holds something tied to a frame.
  int depth() const;
  bool pins_frame() const;

  // Python's type(x).__name__, for messages.
  std::string type_name() const;
  // bool(x).
  bool truthy() const;
  // A dict key: str, int, float, bool or None (or a tuple of them).
  bool hashable() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool markup_ = false;
  bool b_ = false;
  union {
    int64_t i_ = 0;
    double d_;
  };
  std::shared_ptr<const void> ptr_;
};

struct Array {
  ValueList items;
  ListKind kind = ListKind::kList;
  int64_t r_start = 0, r_stop = 0, r_step = 1;  // a range's own numbers, for repr()
  int depth = 1;
  bool pins_frame = false;  // holds a namespace, loop or closure (never stored in a namespace)
};

struct Object {
  std::vector<std::pair<Value, Value>> items;
  int depth = 1;
  bool pins_frame = false;

  const Value* find(const Value& key) const;
  // Inserts or replaces (the key keeps its first position, as in a Python dict).
  void set(Value key, Value value);

 private:
  std::unordered_map<std::string, size_t> index_;  // string keys, once the dict is large
};

struct LoopState {
  std::shared_ptr<const Array> items;
  size_t index0 = 0;
  int depth0 = 0;
};

struct IterState {
  ValueList items;
  size_t pos = 0;
  std::string type_name;  // "generator", "list_reverseiterator", ...
};

struct Callable {
  enum class Type : uint8_t { kBuiltin, kMethod, kMacro };
  Type type = Type::kBuiltin;
  std::string name;
  Value self;  // the bound object, for methods
  const MacroStmt* macro = nullptr;
  Frame* closure = nullptr;  // the frame a macro or caller was defined in
  bool is_caller = false;
};

inline ListKind Value::list_kind() const { return array().kind; }
inline const ValueList& Value::items() const { return array().items; }

// Python's == between two values (1 == 1.0 == True; lists and dicts compare deeply).
// `work`, when given, counts the elements compared (the interpreter charges them as steps).
bool py_equal(const Value& a, const Value& b, uint64_t* work = nullptr);
// Python's < for numbers, strings, and lists/tuples of them; an error for other types.
Result<bool> py_less(const Value& a, const Value& b, uint64_t* work = nullptr);

// Sorts pairs by their first value with Python's <, stably (also with reverse, as sorted()
// does). A merge sort: sound even when a comparison fails, and it uses no temporary-buffer
// allocation (std::stable_sort's nothrow new trips allocation hooks).
Status sort_by_key(std::vector<std::pair<Value, Value>>& kv, bool reverse, uint64_t* work);

// str(x): what {{ x }} prints. Iterators, callables and the loop object have no stable text
// (Python prints a memory address) and are an error.
// Text longer than max_bytes is an error (shared sub-lists can make repr() huge).
Result<std::string> to_str(const Value& v, size_t max_bytes = SIZE_MAX);
Result<std::string> to_repr(const Value& v, size_t max_bytes = SIZE_MAX);

// json.dumps as Hugging Face's tojson filter calls it.
struct JsonStyle {
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool indent_set = false;
  std::string indent;           // the text of one indent level, when indent_set
  std::string item_sep = ", ";  // separators[0] (", " or "," with indent)
  std::string key_sep = ": ";   // separators[1]
};
Status to_json_text(const Value& v, const JsonStyle& style, std::string& out, size_t max_bytes);

// JSON (as parsed by nlohmann, objects in file order) to a value; integers beyond int64 become floats.
Result<Value> from_json(const nlohmann::ordered_json& j, int depth = 0);
Result<Value> from_json(const nlohmann::json& j, int depth = 0);

// A dict from key/value pairs (later duplicates replace earlier values).
Result<Value> make_dict(std::vector<std::pair<Value, Value>> items);
Result<Value> make_list(ValueList items, ListKind kind = ListKind::kList);

}  // namespace kiln::jinja
