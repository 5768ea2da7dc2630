// The Jinja engine's own rules, checked on expressions whose result depends on them: operator
// precedence and associativity (expected values are what Jinja2 3.1 renders), and the
// filter/test tables (the supported names are exactly those the tables can call).
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "template/chat_template.h"
#include "template/jinja_builtins.h"

namespace kiln {
namespace {

using OJson = nlohmann::ordered_json;

// Renders `src` with t = True and f = False in scope.
Result<std::string> render(const std::string& src) {
  ChatRequest req;
  req.messages = OJson::parse(R"([{"role": "user", "content": "hi"}])");
  req.kwargs = OJson::parse(R"({"t": true, "f": false})");
  KILN_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::parse(src));
  return t.render(req);
}

struct Case {
  const char* src;
  const char* want;
};

void expect_renders(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    auto r = render(c.src);
    ASSERT_TRUE(r.is_ok()) << c.src << ": " << r.status().message();
    EXPECT_EQ(r.value(), c.want) << c.src;
  }
}

TEST(JinjaPrecedence, ArithmeticBindsAsJinja2Does) {
  expect_renders({
      {"{{ 1 + 2 * 3 }}", "7"},
      {"{{ (1 + 2) * 3 }}", "9"},
      {"{{ 10 - 2 - 3 }}", "5"},
      {"{{ 12 // 4 * 3 }}", "9"},
      {"{{ 7 % 4 * 2 }}", "6"},
      {"{{ 2 * 3 ** 2 }}", "18"},
      // Jinja2's ** is left-associative, unlike Python's.
      {"{{ 2 ** 3 ** 2 }}", "64"},
      // Unary minus binds tighter than **, and than filters.
      {"{{ -2 ** 2 }}", "4"},
      {"{{ 2 - -1 }}", "3"},
      {"{{ -1 | abs }}", "1"},
  });
}

TEST(JinjaPrecedence, LogicBindsAsJinja2Does) {
  expect_renders({
      {"{{ not f and f }}", "False"},
      {"{{ t or f and f }}", "True"},
      {"{{ f and f or t }}", "True"},
      {"{{ not t or t }}", "True"},
      {"{{ not not t }}", "True"},
      {"{{ not 1 == 2 }}", "True"},
      {"{{ 'b' not in 'abc' }}", "False"},
      {"{{ not 'b' in 'abc' }}", "False"},
      {"{{ 1 + 2 == 3 and 2 * 2 == 4 }}", "True"},
      {"{{ t and 'yes' or 'no' }}", "yes"},
      {"{{ 1 if f else 2 + 3 }}", "5"},
      {"{{ 1 + 2 if f else 3 }}", "3"},
  });
}

TEST(JinjaPrecedence, ComparisonsChainAsInPython) {
  expect_renders({
      {"{{ 1 < 2 < 3 }}", "True"},
      {"{{ 3 > 2 > 1 }}", "True"},  // (3 > 2) > 1 would be False
      {"{{ 1 < 3 > 2 }}", "True"},
      {"{{ 2 in [1, 2] == true }}", "False"},
      {"{{ 1 == 1.0 != 2 }}", "True"},
  });
}

TEST(JinjaPrecedence, ConcatSitsBetweenAdditiveAndMultiplicative) {
  expect_renders({
      {"{{ 2 * 'ab' ~ 'c' }}", "ababc"},
      {"{{ 'a' ~ 1 * 2 }}", "a2"},
      {"{{ 'x' ~ 1 ~ 2 }}", "x12"},
      {"{{ [1, 2] ~ 'x' }}", "[1, 2]x"},
      {"{{ 'ab' | upper ~ 'c' | upper }}", "ABC"},
  });
  // ('a' ~ 1) + 2 and 1 + (2 ~ 3): + sees a string and an integer.
  auto r = render("{{ 'a' ~ 1 + 2 }}");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("can only concatenate str (not \"int\") to str"), std::string::npos)
      << r.status().message();
  r = render("{{ 1 + 2 ~ 3 }}");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("unsupported operand type(s) for +: 'int' and 'str'"), std::string::npos)
      << r.status().message();
}

TEST(JinjaPrecedence, TestsBindTighterThanArithmetic) {
  expect_renders({
      {"{{ 1 + 1 is odd }}", "2"},  // 1 + (1 is odd)
      {"{{ not 1 is odd }}", "False"},
      {"{{ 3 is divisibleby 3 + 1 }}", "2"},  // (3 is divisibleby 3) + 1
  });
}

void expect_error(const std::string& src, const std::string& want) {
  auto r = render(src);
  ASSERT_FALSE(r.is_ok()) << src << " rendered " << r.value();
  EXPECT_NE(r.status().message().find(want), std::string::npos) << src << ": " << r.status().message();
}

// Jinja2 3.1's DEFAULT_FILTERS and DEFAULT_TESTS (jinja2.defaults), sorted.
const std::vector<std::string_view> kJinja2Filters = {
    "abs",       "attr",      "batch",      "capitalize", "center",     "count",    "d",        "default",
    "dictsort",  "e",         "escape",     "filesizeformat", "first",  "float",    "forceescape", "format",
    "groupby",   "indent",    "int",        "items",      "join",       "last",     "length",   "list",
    "lower",     "map",       "max",        "min",        "pprint",     "random",   "reject",   "rejectattr",
    "replace",   "reverse",   "round",      "safe",       "select",     "selectattr", "slice",  "sort",
    "string",    "striptags", "sum",        "title",      "tojson",     "trim",     "truncate", "unique",
    "upper",     "urlencode", "urlize",     "wordcount",  "wordwrap",   "xmlattr"};
const std::vector<std::string_view> kJinja2Tests = {
    "!=",       "<",       "<=",          "==",       ">",        ">=",       "boolean",     "callable",
    "defined",  "divisibleby", "eq",      "equalto",  "escaped",  "even",     "false",       "filter",
    "float",    "ge",      "greaterthan", "gt",       "in",       "integer",  "iterable",    "le",
    "lessthan", "lower",   "lt",          "mapping",  "ne",       "none",     "number",      "odd",
    "sameas",   "sequence", "string",     "test",     "true",     "undefined", "upper"};

TEST(JinjaTables, FiltersAreJinja2sSplitIntoRunAndRefused) {
  std::vector<std::string_view> run = jinja::supported_filter_names();
  std::vector<std::string_view> refused = jinja::jinja_only_filter_names();
  ASSERT_TRUE(std::is_sorted(run.begin(), run.end()));
  ASSERT_TRUE(std::is_sorted(refused.begin(), refused.end()));
  std::vector<std::string_view> all;
  std::merge(run.begin(), run.end(), refused.begin(), refused.end(), std::back_inserter(all));
  EXPECT_EQ(all, kJinja2Filters);  // disjoint too: a name in both would appear twice
  EXPECT_EQ(run.size(), 43u);
}

TEST(JinjaTables, EveryListedFilterIsCalledAndOthersAreNamedInTheError) {
  for (std::string_view name : jinja::supported_filter_names()) {
    std::string n(name);
    EXPECT_TRUE(jinja::is_supported_filter(name)) << n;
    EXPECT_FALSE(jinja::is_jinja_only_filter(name)) << n;
    // Reaching the filter is enough: some need arguments this call does not give.
    auto r = render("{{ 'ab' | " + n + " }}");
    if (!r.is_ok()) {
      EXPECT_EQ(r.status().message().find("unknown filter"), std::string::npos) << n << ": " << r.status().message();
      EXPECT_EQ(r.status().message().find("not supported"), std::string::npos) << n << ": " << r.status().message();
    }
    EXPECT_EQ(render("{{ '" + n + "' is filter }}").value(), "True") << n;
  }
  expect_renders({{"{{ 'ab' | upper }}|{{ [3, 1] | sort | join(',') }}|{{ 'ab' | count }}", "AB|1,3|2"}});
  for (std::string_view name : jinja::jinja_only_filter_names()) {
    std::string n(name);
    EXPECT_FALSE(jinja::is_supported_filter(name)) << n;
    expect_error("{{ 'ab' | " + n + " }}", "the '" + n + "' filter is not supported by kiln's template engine");
    EXPECT_EQ(render("{{ '" + n + "' is filter }}").value(), "True") << n;  // Jinja2 has it
  }
  expect_error("{{ 'ab' | frobnicate }}", "unknown filter 'frobnicate'");
  expect_error("{{ ['ab'] | map('frobnicate') | list }}", "No filter named 'frobnicate'.");
  EXPECT_EQ(render("{{ 'frobnicate' is filter }}").value(), "False");
}

TEST(JinjaTables, TestsAreJinja2sAndEveryOneIsCalled) {
  std::vector<std::string_view> names = jinja::supported_test_names();
  EXPECT_EQ(names, kJinja2Tests);
  for (std::string_view name : names) {
    std::string n(name);
    EXPECT_TRUE(jinja::is_supported_test(name)) << n;
    auto r = render("{{ [2] | select('" + n + "') | list }}");
    if (!r.is_ok()) {  // a test of two values: the error names its argument count, not an unknown test
      EXPECT_NE(r.status().message().find("the '" + n + "' test takes one argument"), std::string::npos)
          << n << ": " << r.status().message();
    }
    EXPECT_EQ(render("{{ '" + n + "' is test }}").value(), "True") << n;
  }
  expect_renders({{"{{ 4 is divisibleby 2 }}|{{ 3 is odd }}|{{ 'A' is upper }}|{{ [2, 3] | select('>=', 3) | list }}|"
                   "{{ x is defined }}",
                   "True|True|True|[3]|False"}});
  expect_error("{{ 2 is frobnicated }}", "unknown test 'frobnicated'");
  expect_error("{{ [2] | select('frobnicated') | list }}", "No test named 'frobnicated'.");
  expect_error("{{ 2 is odd(1) }}", "the 'odd' test takes no arguments");
  EXPECT_EQ(render("{{ 'frobnicated' is test }}").value(), "False");
}

// Expected values are what Jinja2 3.1's ImmutableSandboxedEnvironment renders (as transformers does).
TEST(JinjaTables, MethodsRunRefuseOrNameWhatKilnLacks) {
  expect_renders({
      {"{{ ' a '.strip() }}|{{ 'a,b'.split(',') }}|{{ 'ab'.startswith(('x', 'a')) }}|{{ 'Ab'.swapcase() }}",
       "a|['a', 'b']|True|aB"},
      {"{{ {'a': 1}.items() | list }}|{{ {'a': 1}.get('b', 2) }}|{{ [1, 2, 1].count(1) }}|{{ (1, 2).index(2) }}|"
       "{{ range(5).count(3) }}",
       "[('a', 1)]|2|2|1|1"},
      {"{{ 'abc'.encode is defined }}|{{ (1,).append is defined }}|{{ {}.fromkeys is defined }}|{{ 'x'.isascii() }}|"
       "{{ 'x'.zfill(3) }}",
       "True|False|True|True|00x"},
      {"{% for x in [1, 2] %}{{ loop.cycle('a', 'b') }}{% endfor %}", "ab"},
  });
  expect_error("{{ [1].append(2) }}", "access to attribute 'append' of 'list' object is unsafe.");
  expect_error("{{ {'a': 1}.pop('a') }}", "access to attribute 'pop' of 'dict' object is unsafe.");
  // Python has these and kiln does not run them: an error naming the method, never a wrong prompt.
  expect_error("{{ {}.fromkeys([1]) }}", "dict.fromkeys() is not supported by kiln's template engine");
  expect_error("{{ 'a'.translate({}) }}", "str.translate() is not supported by kiln's template engine");
  expect_error("{% for x in [1] %}{{ loop.changed(x) }}{% endfor %}",
               "loop.changed() is not supported by kiln's template engine");
  expect_error("{{ lipsum() }}", "'lipsum()' is not supported by kiln's template engine");
}

// `fmt % args` is Python's: expected values are what Python 3.11 prints. A * width past the limit
// is an error (Python runs out of memory), never an allocation of that size.
TEST(JinjaPercentFormat, StarWidthAndPrecisionAsPython) {
  expect_renders({{"{{ '%*s|' % (-5, 'ab') }}|{{ '%.*f' % (-1, 1.5) }}|{{ '%*d|' % (-4, 7) }}|{{ '%-*d|' % (-4, 7) }}|"
                   "{{ '%.*s|' % (-2, 'abc') }}|{{ '%*.*e' % (12, -3, 12345.678) }}",
                   "ab   ||2|7   ||7   ||||       1e+04"}});
  expect_error("{{ '%*f' % (1000000000000, 1.0) }}", "format width too large");
  expect_error("{{ '%*d' % (-1000000000000, 1) }}", "format width too large");
}

}  // namespace
}  // namespace kiln
