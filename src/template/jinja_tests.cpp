// Jinja2's built-in tests (`x is defined`, `x is divisibleby 3`, ...), as a table from name to
// function: a test takes no argument or exactly one, and the table says which.
#include "template/jinja_builtins.h"
#include "template/jinja_name_table.h"
#include "template/jinja_text.h"

namespace kiln::jinja {

namespace {

using PlainTest = Result<bool> (*)(Interpreter& in, const Value& v);
using CompareTest = Result<bool> (*)(Interpreter& in, const Value& v, const Value& other);

// Exactly one of `plain` and `compare` is set.
struct TestEntry {
  std::string_view name;
  PlainTest plain = nullptr;
  CompareTest compare = nullptr;
};

Result<bool> is_parity(Interpreter& in, const Value& v, int64_t remainder) {
  KILN_ASSIGN_OR_RETURN(Value r, in.binary(BinOp::kMod, v, Value::integer(2)));
  return py_equal(r, Value::integer(remainder), in.work());
}

// Python's str.islower / str.isupper: no cased character of the other case, and at least one.
Result<bool> is_cased(Interpreter& in, const Value& v, bool lower) {
  KILN_ASSIGN_OR_RETURN(std::string s, in.text(v));
  bool cased = false;
  for (char32_t c : to_u32(s)) {
    if (lower ? py_is_cased_upper(c) : py_is_cased_lower(c)) return false;
    if (py_is_cased_upper(c) || py_is_cased_lower(c)) cased = true;
  }
  return cased;
}

Result<bool> test_eq(Interpreter& in, const Value& v, const Value& other) { return py_equal(v, other, in.work()); }
Result<bool> test_ne(Interpreter& in, const Value& v, const Value& other) { return !py_equal(v, other, in.work()); }
Result<bool> test_lt(Interpreter& in, const Value& v, const Value& other) { return py_less(v, other, in.work()); }
Result<bool> test_gt(Interpreter& in, const Value& v, const Value& other) { return py_less(other, v, in.work()); }
Result<bool> test_le(Interpreter& in, const Value& x, const Value& y) {
  KILN_ASSIGN_OR_RETURN(bool lt, py_less(x, y, in.work()));
  return lt || py_equal(x, y, in.work());
}
Result<bool> test_ge(Interpreter& in, const Value& v, const Value& other) { return test_le(in, other, v); }

// Every test by name, sorted: the one list of the tests kiln runs.
constexpr TestEntry kTests[] = {
    {"!=", nullptr, test_ne},
    {"<", nullptr, test_lt},
    {"<=", nullptr, test_le},
    {"==", nullptr, test_eq},
    {">", nullptr, test_gt},
    {">=", nullptr, test_ge},
    {"boolean", [](Interpreter&, const Value& v) -> Result<bool> { return v.is_bool(); }},
    {"callable", [](Interpreter&, const Value& v) -> Result<bool> { return v.is_callable(); }},
    {"defined", [](Interpreter&, const Value& v) -> Result<bool> { return !v.is_undefined(); }},
    {"divisibleby", nullptr,
     [](Interpreter& in, const Value& v, const Value& other) -> Result<bool> {
       KILN_ASSIGN_OR_RETURN(Value r, in.binary(BinOp::kMod, v, other));
       return py_equal(r, Value::integer(0), in.work());
     }},
    {"eq", nullptr, test_eq},
    {"equalto", nullptr, test_eq},
    {"escaped", [](Interpreter&, const Value& v) -> Result<bool> { return v.is_markup(); }},
    {"even", [](Interpreter& in, const Value& v) { return is_parity(in, v, 0); }},
    {"false", [](Interpreter&, const Value& v) -> Result<bool> { return v.is_bool() && !v.as_bool(); }},
    {"filter",
     [](Interpreter&, const Value& v) -> Result<bool> {
       return v.is_string() && (is_supported_filter(v.str()) || is_jinja_only_filter(v.str()));
     }},
    {"float", [](Interpreter&, const Value& v) -> Result<bool> { return v.is_float(); }},
    {"ge", nullptr, test_ge},
    {"greaterthan", nullptr, test_gt},
    {"gt", nullptr, test_gt},
    {"in", nullptr, [](Interpreter& in, const Value& v, const Value& other) { return in.contains(other, v); }},
    {"integer", [](Interpreter&, const Value& v) -> Result<bool> { return v.is_int(); }},
    {"iterable",
     [](Interpreter&, const Value& v) -> Result<bool> {
       return v.is_string() || v.is_list() || v.is_dict() || v.is_iterator() || v.is_undefined() || v.is_loop();
     }},
    {"le", nullptr, test_le},
    {"lessthan", nullptr, test_lt},
    {"lower", [](Interpreter& in, const Value& v) { return is_cased(in, v, true); }},
    {"lt", nullptr, test_lt},
    {"mapping", [](Interpreter&, const Value& v) -> Result<bool> { return v.is_dict(); }},
    {"ne", nullptr, test_ne},
    {"none", [](Interpreter&, const Value& v) -> Result<bool> { return v.is_none(); }},
    {"number", [](Interpreter&, const Value& v) -> Result<bool> { return v.is_number(); }},
    {"odd", [](Interpreter& in, const Value& v) { return is_parity(in, v, 1); }},
    {"sameas", nullptr,
     [](Interpreter& in, const Value& v, const Value& other) -> Result<bool> {
       if (v.kind() != other.kind()) return false;
       if (v.is_undefined() || v.is_none()) return true;
       if (v.is_bool() || v.is_int() || v.is_float()) return py_equal(v, other, in.work());
       return v.identity() == other.identity();
     }},
    {"sequence",  // len() and __getitem__ (Jinja's Undefined has both)
     [](Interpreter&, const Value& v) -> Result<bool> {
       return v.is_string() || v.is_dict() || v.is_undefined() ||
              (v.is_list() && (v.list_kind() == ListKind::kList || v.list_kind() == ListKind::kTuple ||
                               v.list_kind() == ListKind::kRange));
     }},
    {"string", [](Interpreter&, const Value& v) -> Result<bool> { return v.is_string(); }},
    {"test", [](Interpreter&, const Value& v) -> Result<bool> { return v.is_string() && is_supported_test(v.str()); }},
    {"true", [](Interpreter&, const Value& v) -> Result<bool> { return v.is_bool() && v.as_bool(); }},
    {"undefined", [](Interpreter&, const Value& v) -> Result<bool> { return v.is_undefined(); }},
    {"upper", [](Interpreter& in, const Value& v) { return is_cased(in, v, false); }},
};
static_assert(sorted_by_name<TestEntry>(kTests));

}  // namespace

bool is_supported_test(std::string_view name) { return find_by_name<TestEntry>(kTests, name) != nullptr; }
// Jinja2 has no test that kiln lacks.
bool is_jinja_only_test(std::string_view) { return false; }

std::vector<std::string_view> supported_test_names() { return names_of<TestEntry>(kTests); }

Result<bool> call_test(Interpreter& in, const std::string& name, const Value& v, const CallArgs& args) {
  KILN_RETURN_IF_ERROR(in.step());
  const TestEntry* t = find_by_name<TestEntry>(kTests, name);
  if (t == nullptr) return invalid_argument("unknown test '" + name + "'");
  const size_t given = args.pos.size() + args.kw.size();
  if (t->plain) {
    if (given != 0) return invalid_argument("the '" + name + "' test takes no arguments");
    return t->plain(in, v);
  }
  if (given != 1) return invalid_argument("the '" + name + "' test takes one argument");
  return t->compare(in, v, args.pos.empty() ? args.kw[0].second : args.pos[0]);
}

}  // namespace kiln::jinja
