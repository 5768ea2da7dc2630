// The Jinja engine's own rules, checked on expressions whose result depends on them: operator
// precedence and associativity (expected values are what Jinja2 3.1 renders), and the
// filter/test tables (the supported names are exactly those the tables can call).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "template/chat_template.h"

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

}  // namespace
}  // namespace kiln
