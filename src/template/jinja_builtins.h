// Jinja2's built-in filters and tests, Hugging Face's extra globals (raise_exception,
// strftime_now, its tojson), Jinja's globals (range, dict, namespace) and the Python methods
// templates call on strings, dicts, lists and the loop object.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "template/jinja_eval.h"
#include "template/jinja_value.h"

namespace kiln::jinja {

// Filters, tests, methods and globals are tables from name to function (jinja_filters.cpp,
// jinja_tests.cpp, jinja_methods.cpp, jinja_globals.cpp); the supported names are the tables'
// names, sorted.
bool is_supported_filter(std::string_view name);
bool is_supported_test(std::string_view name);
std::vector<std::string_view> supported_filter_names();
std::vector<std::string_view> supported_test_names();
// Names Jinja2 has that kiln's engine does not implement (a clearer error than "unknown").
bool is_jinja_only_filter(std::string_view name);
bool is_jinja_only_test(std::string_view name);
std::vector<std::string_view> jinja_only_filter_names();

Result<Value> call_filter(Interpreter& in, const std::string& name, const Value& input, const CallArgs& args);
Result<bool> call_test(Interpreter& in, const std::string& name, const Value& input, const CallArgs& args);

// Whether Python's getattr(obj, name) finds a method (it wins over a dict key of that name).
bool has_method(const Value& obj, const std::string& name);
Result<Value> call_method(Interpreter& in, const Value& self, const std::string& name, const CallArgs& args);
// The loop object's attributes (index, first, ...), undefined for other names.
Value loop_attribute(const Value& loop, const std::string& name);

// Python's `fmt % args` for strings (also the format filter; jinja_percent_format.cpp).
Result<Value> percent_format(Interpreter& in, const Value& fmt, const Value& args);

// The globals every template sees.
void add_globals(Frame& globals);
Result<Value> call_global(Interpreter& in, const std::string& name, const CallArgs& args);

}  // namespace kiln::jinja
