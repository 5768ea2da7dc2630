// The C API's tool calling: kiln_model_info.tool_call_format read from the template,
// kiln_tool_call_grammar (a required call's GBNF, used as kiln_generate_params.grammar), and
// kiln_session_chat_json(_async), which renders tools, assistant tool calls and tool turns through
// the template as apply_chat_template(tools=...) does.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "capi_test_util.h"
#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln::test::capi {
namespace {

// tiny-qwen2 with Qwen2.5's real template (its <tool_call> syntax: hermes).
std::string tools_model() {
  const std::string dir = kiln::test::temp_dir() + "/capi-tools-tiny-qwen2";
  EXPECT_EQ(kiln::test::run_kiln("synth --preset tiny-qwen2 --force -o " + kiln::test::shell_quote(dir)).exit_code, 0);
  const std::string cfg_path = dir + "/tokenizer_config.json";
  nlohmann::json cfg = nlohmann::json::parse(kiln::test::read_file(cfg_path));
  cfg["chat_template"] = kiln::test::read_file(std::string(KILN_TEST_DATA_DIR) + "/chat-templates/qwen2.5/template.jinja");
  kiln::test::write_file(cfg_path, cfg.dump());
  return dir;
}

const char* const kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "description": "weather",
        "parameters": {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}},
                       "required": ["city"], "additionalProperties": false}}}])";

TEST(CApiTools, FormatGrammarAndJsonConversation) {
  Runtime rt(0, 2);
  kiln_model* m = load(rt.rt, tools_model());
  ASSERT_NE(m, nullptr);
  kiln_model_info info{};
  info.size = sizeof info;
  ASSERT_EQ(kiln_model_info_get(m, &info), KILN_OK);
  EXPECT_STREQ(info.tool_call_format, "hermes");

  // The grammar: sized as kiln_detokenize is, then used to force a call.
  size_t len = 0;
  EXPECT_EQ(kiln_tool_call_grammar(m, kTools, nullptr, 0, nullptr, 0, &len), KILN_E_BUFFER_TOO_SMALL);
  std::string gbnf(len + 1, '\0');
  ASSERT_EQ(kiln_tool_call_grammar(m, kTools, nullptr, 0, gbnf.data(), gbnf.size(), &len), KILN_OK) << kiln_last_error();
  gbnf.resize(len);
  EXPECT_NE(gbnf.find("<tool_call>"), std::string::npos) << gbnf;
  EXPECT_EQ(kiln_tool_call_grammar(m, kTools, "nope", 0, nullptr, 0, &len), KILN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("'nope'"), std::string::npos) << kiln_last_error();
  EXPECT_EQ(kiln_tool_call_grammar(m, "not json", nullptr, 0, nullptr, 0, &len), KILN_E_INVALID_ARGUMENT);

  const std::string ask = std::string(R"({"messages": [{"role": "user", "content": "weather?"}], "tools": )") + kTools + "}";
  kiln_generate_params gp = kiln_generate_default_params();
  gp.max_tokens = 400;  // the tiny vocabulary spells the call a few bytes a token
  gp.grammar = gbnf.c_str();
  kiln_session* s = session(m, 0.9f, 5);
  Collected call;
  kiln_generate_result r{};
  r.size = sizeof r;
  ASSERT_EQ(kiln_session_chat_json(s, ask.c_str(), &gp, collect, &call, &r), KILN_OK) << kiln_last_error();
  EXPECT_EQ(r.stop_reason, KILN_STOP_EOS) << call.text;
  // The tiny model writes noise; the grammar makes it a call: the tags, the name, valid arguments.
  const std::string head = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ", tail = "}\n</tool_call>";
  ASSERT_EQ(call.text.rfind(head, 0), 0u) << call.text;
  ASSERT_GE(call.text.size(), head.size() + tail.size());
  ASSERT_EQ(call.text.substr(call.text.size() - tail.size()), tail) << call.text;
  const auto args = nlohmann::json::parse(call.text.substr(head.size(), call.text.size() - head.size() - tail.size()),
                                          nullptr, false);
  ASSERT_TRUE(args.is_object()) << call.text;
  EXPECT_TRUE(args.at("city") == "Paris" || args.at("city") == "Rome") << call.text;
  EXPECT_EQ(args.size(), 1u) << call.text;
  const int ask_tokens = r.prompt_tokens;

  // The tools go into the template: without them the prompt is shorter.
  gp.grammar = nullptr;
  gp.max_tokens = 2;
  ASSERT_EQ(kiln_session_chat_json(s, R"({"messages": [{"role": "user", "content": "weather?"}]})", &gp, nullptr,
                                   nullptr, &r),
            KILN_OK);
  EXPECT_LT(r.prompt_tokens + 50, ask_tokens);

  // The call and its result go back (arguments as JSON text, as OpenAI sends them); async too.
  const std::string follow = std::string(R"({"messages": [{"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"}], "tools": )") + kTools + "}";
  ASSERT_EQ(kiln_session_chat_json(s, follow.c_str(), &gp, nullptr, nullptr, &r), KILN_OK) << kiln_last_error();
  EXPECT_GT(r.prompt_tokens, ask_tokens + 10);
  Collected async_text;
  kiln_job* job = nullptr;
  ASSERT_EQ(kiln_session_chat_json_async(s, follow.c_str(), &gp, collect, &async_text, &job), KILN_OK);
  ASSERT_EQ(kiln_job_wait(job), KILN_OK) << kiln_last_error();
  kiln_job_free(job);

  // Malformed conversations are refused by name, the session unchanged.
  for (const char* bad : {"[]", R"({"messages": []})", R"({"messages": [{"content": "x"}]})",
                          R"({"messages": [{"role": "user", "content": 3}]})",
                          R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}]})",
                          R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})", "not json"}) {
    EXPECT_EQ(kiln_session_chat_json(s, bad, &gp, nullptr, nullptr, nullptr), KILN_E_INVALID_ARGUMENT) << bad;
  }
  EXPECT_EQ(kiln_session_chat_json(s, nullptr, &gp, nullptr, nullptr, nullptr), KILN_E_INVALID_ARGUMENT);
  kiln_session_free(s);
  kiln_model_free(m);
}

}  // namespace
}  // namespace kiln::test::capi
