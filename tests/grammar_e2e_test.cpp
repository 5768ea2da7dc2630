// Constrained output end to end on the shipped stories260K: `kiln run --grammar` with llama.cpp's
// own example grammars, --json-schema and --json, each output checked by a fresh matcher over the
// text (and JSON by nlohmann::json); sessions with different grammars at once give each its solo
// output; the C API's grammar and json_schema params and their errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "engine/constrained_output.h"
#include "engine/runtime.h"
#include "grammar/matcher.h"
#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

std::string grammar_path(const std::string& name) { return test::data_path("grammars/" + name + ".gbnf"); }

std::shared_ptr<const Grammar> load_grammar_text(const std::string& gbnf) {
  auto g = grammar_from_gbnf(gbnf);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return g.is_ok() ? *g : nullptr;
}

std::shared_ptr<const Grammar> load_grammar(const std::string& name) {
  auto g = grammar_from_gbnf(test::read_file(grammar_path(name)));
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return g.is_ok() ? *g : nullptr;
}

// The text is a prefix the grammar allows; a whole match when generation ended at a stop token.
void expect_allowed(const std::shared_ptr<const Grammar>& g, const std::string& text, bool ended, const std::string& what) {
  GrammarMatcher m(g);
  EXPECT_TRUE(m.accept_bytes(text)) << what << ": the grammar refuses the output:\n" << text;
  if (ended) {
    EXPECT_TRUE(m.is_complete()) << what << ": ended before the grammar was complete:\n" << text;
  }
}

TEST(GrammarRun, LlamaCppExampleGrammarsConstrainKilnRun) {
  for (const std::string name : {"json", "arithmetic", "list", "chess", "c"}) {
    auto g = load_grammar(name);
    for (const char* sampling : {"--temp 0", "--temp 0.8 -s 3"}) {
      const auto r = test::run_kiln("run --grammar " + test::shell_quote(grammar_path(name)) +
                                    " -p 'Once upon a time' -n 40 " + sampling);
      ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
      EXPECT_FALSE(r.out.empty()) << name;
      const bool ended = r.err.find("stopped at an end token") != std::string::npos;
      expect_allowed(g, r.out, ended, name + " " + sampling);
      if (name == "json" && ended) {
        EXPECT_TRUE(nlohmann::json::accept(r.out)) << r.out;
      }
    }
  }
}

TEST(GrammarRun, JsonSchemaAndJsonFlagsGiveValidJson) {
  const std::string schema_path = test::temp_dir() + "/person.json";
  test::write_file(schema_path, R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":120},
      "color":{"enum":["red","green"]}},"required":["name","age","color"],"additionalProperties":false})");
  const auto r = test::run_kiln("run --json-schema " + test::shell_quote(schema_path) + " -p 'Once upon a time' -n 200 --temp 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j.size(), 3u) << r.out;
  ASSERT_TRUE(j["name"].is_string()) << r.out;
  EXPECT_LE(j["name"].get<std::string>().size(), 12u) << r.out;
  ASSERT_TRUE(j["age"].is_number_integer()) << r.out;
  EXPECT_GE(j["age"].get<int>(), 0);
  EXPECT_LE(j["age"].get<int>(), 120);
  EXPECT_TRUE(j["color"] == "red" || j["color"] == "green") << r.out;

  const auto any = test::run_kiln("run --json -p 'Once upon a time' -n 48 --temp 0");
  ASSERT_EQ(any.exit_code, 0) << any.err;
  GrammarMatcher m(json_object_grammar());
  EXPECT_TRUE(m.accept_bytes(any.out)) << any.out;
  EXPECT_EQ(any.out[0], '{');
}

TEST(GrammarRun, BadGrammarsAndFlagsAreClearErrors) {
  const std::string bad = test::temp_dir() + "/bad.gbnf";
  test::write_file(bad, "root ::= \"a\"\nitem ::= [a-\n");
  auto r = test::run_kiln("run --grammar " + test::shell_quote(bad) + " -n 4");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(bad + ": gbnf: line 2, column 10: the character class that starts here is not closed with ']'"),
            std::string::npos)
      << r.err;
  const std::string schema = test::temp_dir() + "/bad.json";
  test::write_file(schema, R"({"type":"array","uniqueItems":true})");
  r = test::run_kiln("run --json-schema " + test::shell_quote(schema) + " -n 4");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("json schema: at the top: 'uniqueItems': true is not supported"), std::string::npos) << r.err;
  r = test::run_kiln("run --json --grammar " + test::shell_quote(grammar_path("json")) + " -n 4");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("give one of --grammar, --json-schema and --json"), std::string::npos) << r.err;
  r = test::run_kiln("run --grammar-trigger x -n 4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "kiln: error: --grammar-trigger needs the grammar it triggers (--grammar, --json-schema or --json)\n");
}

// `kiln run --grammar-trigger`: the greedy text up to the trigger, the grammar from there.
TEST(GrammarRun, GrammarTriggerMakesItLazy) {
  const std::string args = " -p 'Once upon a time' -n 60 --temp 0";
  auto free = test::run_kiln("run" + args);
  ASSERT_EQ(free.exit_code, 0) << free.err;
  const size_t she = free.out.find(" She");
  ASSERT_NE(she, std::string::npos) << free.out;
  const std::string g = test::temp_dir() + "/sentence.gbnf";
  test::write_file(g, "root ::= \" She\" [^.]* \".\"\n");
  auto lazy = test::run_kiln("run --grammar " + test::shell_quote(g) + " --grammar-trigger ' She'" + args);
  ASSERT_EQ(lazy.exit_code, 0) << lazy.err;
  EXPECT_EQ(lazy.out.substr(0, lazy.out.find_last_not_of('\n') + 1), free.out.substr(0, free.out.find('.', she) + 1));
}

TEST(GrammarSessions, ConcurrentSessionsWithDifferentGrammarsGiveTheirSoloOutputs) {
  RuntimeOptions ro;
  ro.n_threads = 2;
  auto rt = Runtime::create(ro);
  auto m = rt->load_model(test::shipped_model(), ModelLoadOptions{});
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  SessionOptions so;
  so.sampler.temperature = 0;
  const std::vector<std::string> names = {"json", "chess", "list"};
  auto run = [&](RuntimeSession& s, const std::string& name, std::string& out) {
    TurnOptions turn;
    turn.max_tokens = 40;
    turn.grammar = load_grammar(name);
    auto st = s.generate("Once upon a time", turn, [&out](std::string_view text, std::span<const int>) {
      out += text;
      return true;
    });
    EXPECT_TRUE(st.is_ok()) << st.status().message();
    if (st.is_ok()) expect_allowed(turn.grammar, out, st->stop == StopReason::kStopToken, name);
  };
  std::vector<std::string> solo(names.size()), together(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    auto s = (*m)->new_session(so);
    ASSERT_TRUE(s.is_ok());
    run(**s, names[i], solo[i]);
  }
  std::vector<std::shared_ptr<RuntimeSession>> sessions;
  for (size_t i = 0; i < names.size(); ++i) sessions.push_back(*(*m)->new_session(so));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < names.size(); ++i) threads.emplace_back([&, i] { run(*sessions[i], names[i], together[i]); });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(together[i], solo[i]) << names[i];
  EXPECT_NE(solo[0], solo[1]);
}

// A real 150 k vocabulary: chat replies constrained by JSON schemas parse and validate.
TEST(GrammarQwen, JsonSchemaRepliesValidate) {
  const std::string path = test::qwen05_gguf();
  if (path.empty()) GTEST_SKIP() << "Qwen2.5-Coder-0.5B-Instruct is not here: scripts/fetch-qwen.sh fetches it";
  if (test::under_emulator()) GTEST_SKIP() << "a 0.5B model under an emulator takes minutes";
  RuntimeOptions ro;
  ro.n_threads = 2;
  auto rt = Runtime::create(ro);
  auto m = rt->load_model(path, ModelLoadOptions{});
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  SessionOptions so;
  so.sampler.temperature = 0;
  so.n_ctx = 512;
  auto s = (*m)->new_session(so);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  auto schema = grammar_from_json_schema(R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":20},"legs":{"type":"integer","minimum":0,"maximum":8},
      "habitat":{"enum":["land","sea","air"]},"foods":{"type":"array","items":{"type":"string","maxLength":16},"maxItems":3}},
      "required":["name","legs","habitat","foods"]})");
  ASSERT_TRUE(schema.is_ok()) << schema.status().message();
  for (const char* prompt : {"Describe a crab.", "Write a haiku about autumn."}) {
    TurnOptions turn;
    turn.max_tokens = 120;
    turn.grammar = *schema;
    std::string out;
    auto st = (*s)->chat(nlohmann::ordered_json::array({{{"role", "user"}, {"content", prompt}}}), turn,
                         [&out](std::string_view text, std::span<const int>) {
                           out += text;
                           return true;
                         });
    ASSERT_TRUE(st.is_ok()) << st.status().message();
    EXPECT_EQ(st->stop, StopReason::kStopToken) << out;
    const auto j = nlohmann::json::parse(out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << out;
    EXPECT_TRUE(j["name"].is_string() && j["name"].get<std::string>().size() <= 20) << out;
    EXPECT_TRUE(j["legs"].is_number_integer() && j["legs"].get<int>() >= 0 && j["legs"].get<int>() <= 8) << out;
    EXPECT_TRUE(j["habitat"] == "land" || j["habitat"] == "sea" || j["habitat"] == "air") << out;
    ASSERT_TRUE(j["foods"].is_array()) << out;
    EXPECT_LE(j["foods"].size(), 3u) << out;
  }
}

struct Text {
  std::string s;
};
int append(void* user, const char* text, size_t len, const int32_t*, size_t) {
  static_cast<Text*>(user)->s.append(text, len);
  return 0;
}

// A greedy session of the shipped model through the C API, freed after the test.
class GrammarCApi : public ::testing::Test {
 protected:
  void SetUp() override {
    kiln_runtime_params rp = kiln_runtime_default_params();
    rp.n_threads = 1;
    ASSERT_EQ(kiln_runtime_create(&rp, &rt), KILN_OK) << kiln_last_error();
    ASSERT_EQ(kiln_model_load(rt, test::shipped_model().c_str(), nullptr, &model), KILN_OK) << kiln_last_error();
    kiln_session_params sp = kiln_session_default_params();
    sp.sampling.temperature = 0;
    ASSERT_EQ(kiln_session_create(model, &sp, &s), KILN_OK) << kiln_last_error();
  }
  void TearDown() override {
    kiln_session_free(s);
    kiln_model_free(model);
    kiln_runtime_free(rt);
  }
  kiln_runtime* rt = nullptr;
  kiln_model* model = nullptr;
  kiln_session* s = nullptr;
};

// A lazy grammar (llama.cpp's, what tool_choice auto uses): free text until the trigger, the
// grammar from the trigger's first byte, the end where the grammar ends.
TEST_F(GrammarCApi, LazyGrammarHoldsFromItsTrigger) {
  kiln_generate_params g = kiln_generate_default_params();
  g.max_tokens = 60;
  kiln_generate_result r;
  r.size = sizeof r;
  Text free;
  ASSERT_EQ(kiln_session_generate(s, "Once upon a time", &g, append, &free, &r), KILN_OK) << kiln_last_error();
  const size_t she = free.s.find(" She");
  ASSERT_NE(she, std::string::npos) << free.s;  // ", there was a little girl named Lily. She loved to ..."
  // The model's own sentence is what the grammar allows: the same text, ended at its period.
  g.grammar = "root ::= \" She\" [^.]* \".\"";
  g.grammar_trigger = " She";
  Text lazy;
  ASSERT_EQ(kiln_session_generate(s, "Once upon a time", &g, append, &lazy, &r), KILN_OK) << kiln_last_error();
  EXPECT_EQ(lazy.s, free.s.substr(0, free.s.find('.', she) + 1));
  EXPECT_EQ(r.stop_reason, KILN_STOP_EOS);
  // A grammar that goes elsewhere: free up to the trigger, then held to it.
  g.grammar = "root ::= \" She was\" [^.\\n]* \".\"";
  Text held;
  ASSERT_EQ(kiln_session_generate(s, "Once upon a time", &g, append, &held, &r), KILN_OK) << kiln_last_error();
  EXPECT_EQ(held.s.substr(0, she + 8), free.s.substr(0, she) + " She was") << held.s;
  expect_allowed(load_grammar_text("root ::= \" She was\" [^.\\n]* \".\""), held.s.substr(she), r.stop_reason == KILN_STOP_EOS,
                 "after the trigger");
  // A trigger that never comes: the free text.
  g.grammar_trigger = "zebra";
  Text never;
  ASSERT_EQ(kiln_session_generate(s, "Once upon a time", &g, append, &never, &r), KILN_OK) << kiln_last_error();
  EXPECT_EQ(never.s, free.s);
  // A trigger needs a grammar, and some text.
  g.grammar = nullptr;
  EXPECT_EQ(kiln_session_generate(s, "Once", &g, append, &never, &r), KILN_E_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(), "kiln_session_generate: grammar_trigger needs a grammar (or json_schema) it triggers");
  g.grammar = "root ::= \"a\"";
  g.grammar_trigger = "";
  EXPECT_EQ(kiln_session_generate(s, "Once", &g, append, &never, &r), KILN_E_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(), "kiln_session_generate: grammar_trigger is empty");
}

TEST_F(GrammarCApi, GrammarAndJsonSchemaParamsAndTheirErrors) {

  const std::string chess = test::read_file(grammar_path("chess"));
  kiln_generate_params g = kiln_generate_default_params();
  g.max_tokens = 40;
  g.grammar = chess.c_str();
  Text t;
  kiln_generate_result r;
  r.size = sizeof r;
  ASSERT_EQ(kiln_session_generate(s, "Once upon a time", &g, append, &t, &r), KILN_OK) << kiln_last_error();
  expect_allowed(load_grammar("chess"), t.s, r.stop_reason == KILN_STOP_EOS, "chess via the C API");
  EXPECT_EQ(t.s.rfind("1. ", 0), 0u) << t.s;

  g.grammar = nullptr;
  g.json_schema = R"({"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]})";
  g.max_tokens = 30;
  Text j;
  ASSERT_EQ(kiln_session_generate(s, "Once upon a time", &g, append, &j, &r), KILN_OK) << kiln_last_error();
  const auto parsed = nlohmann::json::parse(j.s, nullptr, false);
  ASSERT_TRUE(parsed.is_object()) << j.s;
  EXPECT_TRUE(parsed["ok"].is_boolean()) << j.s;

  g.json_schema = nullptr;
  g.grammar = "root ::= \"a\"\nx ::= (\"b\"\n";
  EXPECT_EQ(kiln_session_generate(s, "Once", &g, append, &t, &r), KILN_E_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(),
               "kiln_session_generate: gbnf: line 3, column 1: expected ')' to close the '(' at line 2, column 7, found the "
               "end of the grammar");
  g.grammar = nullptr;
  g.json_schema = R"({"type":"string","format":"email"})";
  EXPECT_EQ(kiln_session_generate(s, "Once", &g, append, &t, &r), KILN_E_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(),
               "kiln_session_generate: json schema: at the top: 'format' email is not supported (date, time, date-time "
               "and uuid are)");
  g.grammar = chess.c_str();
  EXPECT_EQ(kiln_session_generate(s, "Once", &g, append, &t, &r), KILN_E_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(), "kiln_session_generate: give grammar or json_schema, not both");

  // The async form parses before it returns: the grammar text need not outlive the call.
  std::string temp = chess;
  g.json_schema = nullptr;
  g.grammar = temp.c_str();
  Text a;
  kiln_job* job = nullptr;
  ASSERT_EQ(kiln_session_generate_async(s, "Once upon a time", &g, append, &a, &job), KILN_OK) << kiln_last_error();
  temp.assign(temp.size(), 'x');
  kiln_generate_result ar;
  ar.size = sizeof ar;
  ASSERT_EQ(kiln_job_result(job, &ar), KILN_OK) << kiln_last_error();
  kiln_job_free(job);
  EXPECT_EQ(a.s, t.s);
}

}  // namespace
}  // namespace kiln
