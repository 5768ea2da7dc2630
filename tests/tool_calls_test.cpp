// Tool calling's model side (engine/tool_calls.h): the call syntax read from real chat templates,
// and the grammar of a required call: it accepts a call to a given tool with arguments valid
// against that tool's parameters, in the template's syntax, and nothing else.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/tool_calls.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace kiln {
namespace {

std::string read_template(const std::string& name) {
  std::ifstream f(std::string(KILN_TEST_DATA_DIR) + "/chat-templates/" + name + "/template.jinja");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const nlohmann::json kTools = nlohmann::json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"enum": ["Paris", "Rome"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "ping"}}
])");

class CallGrammar {
 public:
  CallGrammar(ToolCallFormat f, const std::string& only, bool parallel) {
    auto text = tool_call_gbnf(f, kTools, only, parallel);
    EXPECT_TRUE(text.is_ok()) << text.status().message();
    if (!text.is_ok()) return;
    auto g = parse_gbnf(*text);
    EXPECT_TRUE(g.is_ok()) << g.status().message() << "\n" << *text;
    if (g.is_ok()) grammar_ = std::make_shared<const Grammar>(std::move(*g));
  }
  bool accepts(std::string_view text) const {
    if (!grammar_) return false;
    GrammarMatcher m(grammar_);
    return m.accept_bytes(text) && m.is_complete();
  }

 private:
  std::shared_ptr<const Grammar> grammar_;
};

TEST(ToolCalls, TheSyntaxIsReadFromRealTemplates) {
  EXPECT_EQ(tool_call_format_of(read_template("qwen2.5")), ToolCallFormat::kHermes);
  EXPECT_EQ(tool_call_format_of(read_template("llama-3.3")), ToolCallFormat::kLlama3);
  EXPECT_EQ(tool_call_format_of(read_template("mistral-nemo")), ToolCallFormat::kMistral);
  EXPECT_EQ(tool_call_format_of("{% for m in messages %}{{ m.content }}{% endfor %}"), ToolCallFormat::kNone);
  EXPECT_STREQ(tool_call_format_name(ToolCallFormat::kHermes), "hermes");
  EXPECT_STREQ(tool_call_format_name(ToolCallFormat::kNone), "");
}

TEST(ToolCalls, HermesGrammarTakesValidCallsOnly) {
  CallGrammar one(ToolCallFormat::kHermes, "", false);
  EXPECT_TRUE(one.accepts("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>"));
  EXPECT_TRUE(one.accepts("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>"));
  EXPECT_TRUE(one.accepts("<tool_call>\n{\"name\": \"ping\", \"arguments\": {\"any\": [1, true]}}\n</tool_call>"));
  EXPECT_FALSE(one.accepts("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
  EXPECT_FALSE(one.accepts("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"days\": 9}}\n</tool_call>"));
  EXPECT_FALSE(one.accepts("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(one.accepts("<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(one.accepts("Sure! <tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>"));
  const std::string two = "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>";
  EXPECT_FALSE(one.accepts(two));
  EXPECT_TRUE(CallGrammar(ToolCallFormat::kHermes, "", true).accepts(two));
  CallGrammar named(ToolCallFormat::kHermes, "ping", false);
  EXPECT_TRUE(named.accepts("<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(named.accepts("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>"));
}

TEST(ToolCalls, Llama3AndMistralGrammars) {
  CallGrammar llama(ToolCallFormat::kLlama3, "", false);
  EXPECT_TRUE(llama.accepts("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}"));
  EXPECT_FALSE(llama.accepts("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"));
  CallGrammar mistral(ToolCallFormat::kMistral, "", true);
  EXPECT_TRUE(mistral.accepts("[TOOL_CALLS][{\"name\": \"ping\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}]"));
  EXPECT_FALSE(mistral.accepts("[TOOL_CALLS][]"));
}

TEST(ToolCalls, ErrorsNameTheToolAndTheKeyword) {
  auto none = tool_call_gbnf(ToolCallFormat::kNone, kTools, "", false);
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("no tool-call syntax"), std::string::npos);
  auto missing = tool_call_gbnf(ToolCallFormat::kHermes, kTools, "nope", false);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("'nope'"), std::string::npos);
  const auto bad = nlohmann::json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "patternProperties": {}}}}])");
  auto keyword = tool_call_gbnf(ToolCallFormat::kHermes, bad, "", false);
  ASSERT_FALSE(keyword.is_ok());
  EXPECT_NE(keyword.status().message().find("tools[0] (f)"), std::string::npos) << keyword.status().message();
  EXPECT_NE(keyword.status().message().find("'patternProperties'"), std::string::npos) << keyword.status().message();
  EXPECT_FALSE(tool_call_gbnf(ToolCallFormat::kHermes, nlohmann::json::array(), "", false).is_ok());
}

TEST(ToolCalls, SchemaRootRuleCanBeRenamed) {
  auto g = json_schema_to_gbnf(R"({"type": "integer"})", JsonSchemaLimits{}, "args");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(g->rfind("args ::= ", 0), 0u) << *g;
  EXPECT_EQ(g->find("root"), std::string::npos) << *g;
  EXPECT_FALSE(json_schema_to_gbnf("{}", JsonSchemaLimits{}, "bad name").is_ok());
}

}  // namespace
}  // namespace kiln
