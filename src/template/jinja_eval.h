// Runs a parsed template: Jinja2's scoping (a fresh scope per loop iteration and per macro
// call; `if` has none), Python's operators on the values, and bounds on work, output, memory
// and recursion so that no template can hang or exhaust the process.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "template/jinja_ast.h"
#include "template/jinja_value.h"

namespace kiln::jinja {

struct Limits {
  size_t max_output_bytes = size_t{64} << 20;    // the rendered text, and any one string built
  uint64_t max_steps = 20'000'000;               // expression and statement evaluations, items copied
  uint64_t max_alloc_bytes = uint64_t{1} << 30;  // bytes of strings and items made, in all
  int max_call_depth = 40;                       // nested macro calls
  int max_eval_depth = 400;                      // nested evaluation (expressions, blocks, calls)
};

struct Frame {
  Frame* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value v);
};

struct CallArgs {
  ValueList pos;
  std::vector<std::pair<std::string, Value>> kw;
};

class Interpreter {
 public:
  Interpreter(const Limits& limits, std::optional<std::tm> now) : limits_(limits), now_(now) {}

  // Renders `tpl` with `root` as the template's top-level scope.
  Result<std::string> render(const Template& tpl, Frame& root);

  // ---- for the builtins ----
  Status step(uint64_t n = 1);
  Status alloc(uint64_t bytes);
  // A string value, counted against the limits.
  Result<Value> make_string(std::string s, bool markup = false);
  const Limits& limits() const { return limits_; }
  // Elements compared by py_equal / py_less; charged as steps at the next step().
  uint64_t* work() { return &work_; }
  // str() and repr() within the output limit.
  Result<std::string> text(const Value& v) { return to_str(v, limits_.max_output_bytes); }
  Result<std::string> repr(const Value& v) { return to_repr(v, limits_.max_output_bytes); }
  const std::optional<std::tm>& now() const { return now_; }

  Result<Value> call(const Value& fn, CallArgs args);
  Result<Value> getattr(const Value& obj, const std::string& name);
  // Attribute lookup only (the attr filter): no fallback to a dict's keys.
  Result<Value> getattr_only(const Value& obj, const std::string& name);
  Result<Value> getitem(const Value& obj, const Value& key);
  // The items a for loop or list() sees (consumes an iterator).
  Result<ValueList> iterate(const Value& v);

  // Python's binary operators and `in`.
  Result<Value> binary(BinOp op, const Value& a, const Value& b);
  Result<bool> contains(const Value& container, const Value& item);

 private:
  Status exec_body(const Body& body, Frame& f);
  Status exec(const Stmt& s, Frame& f);
  Status exec_for(const Stmt& s, Frame& f);
  Status exec_set(const Stmt& s, Frame& f);
  Status exec_call_block(const Stmt& s, Frame& f);
  Status assign(const Stmt& s, Frame& f, Value v);
  Status write(std::string_view text);
  Result<std::string> capture(const Body& body, Frame& f);
  Result<Value> apply_filters(const std::vector<ExprPtr>& filters, Value v, Frame& f);

  Result<Value> eval(const Expr& e, Frame& f);
  Result<Value> eval_inner(const Expr& e, Frame& f);
  Result<CallArgs> eval_args(const Expr& e, size_t first, Frame& f);
  Result<Value> eval_slice(const Expr& e, Frame& f);
  Result<Value> eval_compare(const Expr& e, Frame& f);
  Result<Value> call_macro(const Callable& fn, CallArgs args);

  enum class Flow : uint8_t { kNormal, kBreak, kContinue };

  Limits limits_;
  std::optional<std::tm> now_;
  std::string* out_ = nullptr;
  Flow flow_ = Flow::kNormal;
  uint64_t steps_ = 0;
  uint64_t work_ = 0;
  uint64_t alloc_ = 0;
  int call_depth_ = 0;
  int eval_depth_ = 0;
  Frame* root_ = nullptr;
};

// Adds " (line L, column C)" style location to a message that has none yet.
Status locate(int line, int col, const Status& s);

}  // namespace kiln::jinja
