// Chat templates rendered byte for byte as Hugging Face's apply_chat_template renders them
// (reference cases from tests/gen/make_chat_templates.py), and the engine's errors and limits.
#include "template/chat_template.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using OJson = nlohmann::ordered_json;

OJson load_json(const std::string& path) {
  std::string text = test::read_file(path);
  OJson j = OJson::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << path;
  return j;
}

std::tm parse_now(const std::string& iso) {
  std::tm tm{};
  EXPECT_EQ(std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                        &tm.tm_sec),
            6);
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  std::tm copy = tm;
  std::time_t t = timegm(&copy);  // fills tm_wday / tm_yday
  gmtime_r(&t, &tm);
  return tm;
}

ChatRequest request_for(const OJson& doc, const OJson& c) {
  ChatRequest req;
  req.messages = c["messages"];
  if (c.contains("tools")) req.tools = c["tools"];
  req.add_generation_prompt = c.value("add_generation_prompt", false);
  if (c.contains("kwargs")) req.kwargs = c["kwargs"];
  if (doc.contains("special_tokens"))
    for (auto it = doc["special_tokens"].begin(); it != doc["special_tokens"].end(); ++it)
      req.special_tokens.emplace_back(it.key(), it.value().get<std::string>());
  if (c.contains("now") && c["now"].is_string()) req.now = parse_now(c["now"].get<std::string>());
  return req;
}

struct Tally {
  int passed = 0;
  int failed = 0;
};

// Renders every case of one cases.json; a case's own "template" overrides the family's.
Tally run_cases(const std::string& dir) {
  Tally t;
  OJson doc = load_json(dir + "/cases.json");
  std::string family_src;
  if (fs::exists(dir + "/template.jinja")) family_src = test::read_file(dir + "/template.jinja");
  for (const OJson& c : doc["cases"]) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(dir + " case " + name);
    std::string src = c.contains("template") ? c["template"].get<std::string>() : family_src;
    auto tpl = ChatTemplate::parse(src);
    Result<std::string> out = tpl.is_ok() ? tpl->render(request_for(doc, c)) : Result<std::string>(tpl.status());
    bool ok;
    if (c.contains("expected")) {
      const std::string want = c["expected"].get<std::string>();
      ok = out.is_ok() && out.value() == want;
      if (!out.is_ok())
        ADD_FAILURE() << "error: " << out.status().message();
      else
        EXPECT_EQ(out.value(), want);
    } else {
      const OJson& err = c["error"];
      ok = !out.is_ok();
      if (out.is_ok()) ADD_FAILURE() << "expected " << err.dump() << " but rendered: " << out.value();
      if (!out.is_ok() && err["type"] == "TemplateError") {
        // raise_exception(): the template's own message surfaces.
        const std::string msg = err["message"].get<std::string>();
        bool has = out.status().message().find(msg) != std::string::npos;
        EXPECT_TRUE(has) << out.status().message() << " lacks " << msg;
        ok = ok && has;
      }
    }
    (ok ? t.passed : t.failed)++;
  }
  return t;
}

TEST(ChatTemplate, MatchesTransformersForEveryFamily) {
  const std::string root = test::data_path("chat-templates");
  std::set<std::string> families;
  int passed = 0, failed = 0;
  for (const auto& e : fs::directory_iterator(root)) {
    if (!e.is_directory() || !fs::exists(e.path() / "template.jinja")) continue;
    families.insert(e.path().filename().string());
    Tally t = run_cases(e.path().string());
    std::printf("  %-14s %3d/%d cases match\n", e.path().filename().string().c_str(), t.passed, t.passed + t.failed);
    passed += t.passed;
    failed += t.failed;
  }
  for (const char* f : {"llama-3.1", "llama-3.2", "qwen2.5", "qwen3", "mistral-nemo", "gemma-2", "gemma-3", "phi-3.5"})
    EXPECT_TRUE(families.count(f)) << "missing family " << f;
  EXPECT_GE(passed, 100);
  EXPECT_EQ(failed, 0);
}

TEST(ChatTemplate, MatchesTransformersOnEveryTemplateLlamaCppShips) {
  const std::string root = test::data_path("chat-templates/llama.cpp");
  int templates = 0, passed = 0, failed = 0;
  for (const auto& e : fs::directory_iterator(root)) {
    if (!e.is_directory()) continue;
    Tally t = run_cases(e.path().string());
    if (t.failed)
      std::printf("  %-48s %d/%d cases match\n", e.path().filename().string().c_str(), t.passed, t.passed + t.failed);
    ++templates;
    passed += t.passed;
    failed += t.failed;
  }
  std::printf("  llama.cpp set  %d templates, %d/%d cases match\n", templates, passed, passed + failed);
  EXPECT_GE(templates, 60);
  EXPECT_EQ(failed, 0);
}

TEST(ChatTemplate, MatchesJinjaOnSemanticProbes) {
  const std::string dir = test::data_path("chat-templates/semantics");
  Tally t = run_cases(dir);
  std::printf("  semantics      %3d/%d probes match\n", t.passed, t.passed + t.failed);
  EXPECT_GE(t.passed, 50);
  EXPECT_EQ(t.failed, 0);
}

Result<std::string> render(const std::string& src, ChatRequest req = {}) {
  if (req.messages.empty()) req.messages = OJson::parse(R"([{"role": "user", "content": "hi"}])");
  KILN_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::parse(src));
  return t.render(req);
}

void expect_error(const std::string& src, const std::vector<std::string>& parts, ChatRequest req = {}) {
  auto r = render(src, std::move(req));
  ASSERT_FALSE(r.is_ok()) << src << " rendered " << r.value();
  for (const std::string& p : parts)
    EXPECT_NE(r.status().message().find(p), std::string::npos) << r.status().message() << " lacks '" << p << "'";
}

TEST(ChatTemplate, SyntaxErrorsNameTheLine) {
  expect_error("Hello\n{% if messages %}\n{{ 1 + }}\n{% endif %}", {"line 3", "column"});
  expect_error("{% for m in messages %}\n{{ m.role }}\n", {"'for' on line 1 is not closed"});
  expect_error("{% if x %}\n{% endfor %}", {"line 2", "unexpected 'endfor'", "'if' on line 1"});
  expect_error("{{ 'unterminated }}", {"line 1", "unterminated string"});
  expect_error("line one\n{# never closed", {"line 2", "comment"});
  expect_error("{{ (1 }}", {"line 1"});
  expect_error("{% frobnicate %}", {"unknown tag 'frobnicate'"});
  expect_error("{{ x | frobnicate }}", {"line 1", "unknown filter 'frobnicate'"});
  expect_error("\n\n{{ x is frobnicated }}", {"line 3", "unknown test 'frobnicated'"});
  expect_error("{% break %}", {"outside of a for loop"});
}

TEST(ChatTemplate, UnsupportedConstructsAreErrorsNotWrongPrompts) {
  expect_error("{% include 'other.jinja' %}", {"line 1", "'include' tag is not supported"});
  expect_error("{% extends 'base' %}", {"'extends' tag is not supported"});
  expect_error("{% for m in messages recursive %}{% endfor %}", {"recursive"});
  expect_error("{{ messages | groupby('role') }}", {"'groupby' filter is not supported"});
  expect_error("{{ f(*args) }}", {"*args"});
  expect_error("x\n{{ [1, 2] | select('odd') }}", {"line 2", "cannot print a generator"});
  expect_error("{{ 'abc'.encode('utf-8') }}", {"str.encode() is not supported"});
}

TEST(ChatTemplate, RuntimeErrorsNameTheLine) {
  expect_error("ok\n{{ raise_exception('Only user and assistant roles are supported!') }}",
               {"line 2", "the template raised an error: Only user and assistant roles are supported!"});
  expect_error("{{ messages[0].content + 1 }}", {"line 1", "can only concatenate str (not \"int\") to str"});
  expect_error("\n{{ nothing.here }}", {"line 2", "'nothing' is undefined"});
  expect_error("{{ messages.append(1) }}", {"unsafe"});
  expect_error("{% set x = 1 %}{% set x.y = 2 %}", {"non-namespace"});
  expect_error("{{ 1 // 0 }}", {"division or modulo by zero"});
  ChatRequest empty;
  empty.messages = OJson::array();
  auto t = ChatTemplate::parse("{{ messages }}");
  ASSERT_TRUE(t.is_ok());
  auto r = t->render(empty);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("empty conversation"), std::string::npos);
}

TEST(ChatTemplate, LimitsStopRunawayTemplates) {
  ChatRequest req;
  req.limits.max_steps = 200000;
  expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}",
               {"ran too long"}, req);
  req = {};
  req.limits.max_output_bytes = 1 << 20;
  expect_error("{{ 'x' * 100000000 }}", {"output limit"}, req);
  expect_error("{% for i in range(100) %}{{ 'y' * 20000 }}{% endfor %}", {"output limit"}, req);
  expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", {"nest deeper"});
  expect_error("{{ " + std::string(2000, '(') + "1" + std::string(2000, ')') + " }}", {"nests too deeply"});
  expect_error("{% set ns = namespace(x=1) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}",
               {"nest deeper"});
  std::string sum = "{{ 0";
  for (int i = 0; i < 1500; ++i) sum += " + 1";
  expect_error(sum + " }}", {"chains more than 1000"});
  expect_error("{{ range(1000000) | length }}", {"Range too big"});
  expect_error("{% set ns = namespace() %}{% set ns.self = ns %}", {"does not store a namespace"});
}

TEST(ChatTemplate, LoadsTemplatesFromModelFolders) {
  // An HF folder whose chat_template is a list of named templates and whose tokens are objects.
  std::string dir = test::temp_dir() + "/named-templates";
  fs::create_directories(dir);
  test::write_file(dir + "/tokenizer_config.json", R"({
    "bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>", "pad_token": null,
    "chat_template": [{"name": "tool_use", "template": "TOOLS {{ bos_token }}"},
                      {"name": "default", "template": "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{{ eos_token }}"}]})");
  auto m = load_model_chat_template(dir, false);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ChatRequest req;
  req.messages = OJson::parse(R"([{"role": "user", "content": "hi"}])");
  req.special_tokens = m->special_tokens;
  auto t = ChatTemplate::parse(m->source);
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->render(req).value(), "<s>[user]hi</s>");
  auto tools = load_model_chat_template(dir, true);
  ASSERT_TRUE(tools.is_ok());
  EXPECT_EQ(tools->source, "TOOLS {{ bos_token }}");

  // chat_template.jinja beside the config wins, as in transformers.
  test::write_file(dir + "/chat_template.jinja", "from the file");
  EXPECT_EQ(load_model_chat_template(dir, false)->source, "from the file");
}

std::string write_messages(const std::string& name, const std::string& json) {
  std::string path = test::temp_dir() + "/" + name;
  test::write_file(path, json);
  return path;
}

TEST(ChatTemplate, CliPrintsExactlyThePrompt) {
  const std::string qwen3 = test::data_path("chat-templates/qwen3");
  OJson doc = load_json(qwen3 + "/cases.json");
  // A folder like the model's: tokenizer_config.json with the template and its special tokens.
  std::string dir = test::temp_dir() + "/qwen3-model";
  fs::create_directories(dir);
  OJson cfg = doc["special_tokens"];
  cfg["chat_template"] = test::read_file(qwen3 + "/template.jinja");
  test::write_file(dir + "/tokenizer_config.json", cfg.dump());
  for (const OJson& c : doc["cases"]) {
    if (!c.contains("expected") || !c["tools"].is_null()) continue;
    SCOPED_TRACE(c["name"].get<std::string>());
    std::string msgs = write_messages("m.json", c["messages"].dump());
    std::string args = "template " + test::shell_quote(dir) + " --messages " + test::shell_quote(msgs);
    if (c["add_generation_prompt"].get<bool>()) args += " --add-generation-prompt";
    for (auto it = c["kwargs"].begin(); it != c["kwargs"].end(); ++it)
      args += " --set " + test::shell_quote(it.key() + "=" + it.value().dump());
    auto r = test::run_kiln(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, c["expected"].get<std::string>());
  }
  // Errors: exit 2, one line on stderr; raise_exception's message is on it.
  std::string gemma = test::temp_dir() + "/gemma-model";
  fs::create_directories(gemma);
  test::write_file(gemma + "/chat_template.jinja",
                   test::read_file(test::data_path("chat-templates/gemma-2/template.jinja")));
  test::write_file(gemma + "/tokenizer_config.json", R"({"bos_token": "<bos>", "eos_token": "<eos>"})");
  std::string bad =
      write_messages("bad.json", R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])");
  auto r = test::run_kiln("template " + test::shell_quote(gemma) + " --messages " + test::shell_quote(bad));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("Conversation roles must alternate"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  r = test::run_kiln("template " + test::shell_quote(dir) + " --messages " + test::shell_quote(bad) +
                     " --set enable_thinking=nope");
  EXPECT_EQ(r.exit_code, 1);  // a usage error (issue 23, row 12)
  EXPECT_NE(r.err.find("is not JSON"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// A GGUF file holding only metadata: the chat template and a three-token vocabulary.
std::string tiny_gguf(const std::string& chat_template) {
  std::string b;
  auto u32 = [&](uint32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [&](uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); };
  auto str = [&](const std::string& s) {
    u64(s.size());
    b += s;
  };
  b += "GGUF";
  u32(3);
  u64(0);  // tensors
  u64(4);  // metadata
  str("tokenizer.chat_template");
  u32(8);
  str(chat_template);
  str("tokenizer.ggml.tokens");
  u32(9);
  u32(8);
  u64(3);
  for (const char* t : {"<unk>", "<s>", "</s>"}) str(t);
  str("tokenizer.ggml.bos_token_id");
  u32(4);
  u32(1);
  str("tokenizer.ggml.eos_token_id");
  u32(4);
  u32(2);
  return b;
}

TEST(ChatTemplate, CliReadsTheTemplateInsideAGguf) {
  std::string path = test::temp_dir() + "/chat.gguf";
  test::write_file(path,
                   tiny_gguf("{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}{% endfor %}"
                             "{% if add_generation_prompt %}<assistant>{% endif %}{{ eos_token }}"));
  std::string msgs = write_messages("g.json", R"([{"role": "user", "content": "  hi  "}])");
  auto r = test::run_kiln("template " + test::shell_quote(path) + " --messages " + test::shell_quote(msgs) +
                          " --add-generation-prompt");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<s><user>hi<assistant></s>");
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// issue 23 row 18: `kiln template` takes a compiled .kiln (its stored template) and
// --chat-template FILE, `--messages -` reads stdin, and `run --chat` takes --set as chat does.
TEST(ChatTemplate, CliTakesAKilnFileAndStdinAndRunTakesSet) {
  // The story model in an HF folder, given Qwen3's template (with enable_thinking).
  const std::string dir = test::temp_dir() + "/row18-model";
  std::filesystem::create_directories(dir);
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "special_tokens_map.json",
                        "tokenizer.json", "tokenizer_config.json"})
    test::write_file(dir + "/" + f, test::read_file(test::data_path(std::string("stories260K-hf/") + f)));
  const std::string jinja = test::data_path("chat-templates/qwen3/template.jinja");
  test::write_file(dir + "/chat_template.jinja", test::read_file(jinja));
  const std::string kiln = test::temp_dir() + "/row18.kiln";
  auto c = test::run_kiln("compile " + test::shell_quote(dir) + " -q f32 -o " + test::shell_quote(kiln));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const std::string msgs = R"([{"role": "user", "content": "hi"}])";
  const std::string file = test::temp_dir() + "/row18.json";
  test::write_file(file, msgs);
  const std::string expected = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
  const std::string flags = " --add-generation-prompt --set enable_thinking=false";

  auto from_folder = test::run_kiln("template " + test::shell_quote(dir) + " --messages " + test::shell_quote(file) + flags);
  EXPECT_EQ(from_folder.exit_code, 0) << from_folder.err;
  EXPECT_EQ(from_folder.out, expected);
  auto from_kiln = test::run_kiln_with_input("template " + test::shell_quote(kiln) + " --messages -" + flags, msgs);
  EXPECT_EQ(from_kiln.exit_code, 0) << from_kiln.err;
  EXPECT_EQ(from_kiln.out, expected);
  auto from_file = test::run_kiln("template --chat-template " + test::shell_quote(jinja) + " --messages " +
                                  test::shell_quote(file) + flags);
  EXPECT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_EQ(from_file.out, expected);
  auto neither = test::run_kiln("template --messages " + test::shell_quote(file));
  EXPECT_EQ(neither.exit_code, 1);
  EXPECT_NE(neither.err.find("give a model or --chat-template FILE"), std::string::npos) << neither.err;

  // run --chat --set: enable_thinking=false adds the empty think block to the prompt, as the
  // template renders it (41 tokens become 58 here); --set without --chat is a usage error.
  auto prompt_tokens = [&](const std::string& extra) {
    auto r = test::run_kiln("run " + test::shell_quote(kiln) + " --chat -p hi -n 1 --temp 0" + extra);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const size_t at = r.err.find("kiln: prompt ");
    return at == std::string::npos ? -1 : std::atoi(r.err.c_str() + at + 13);
  };
  const int plain = prompt_tokens("");
  const int no_thinking = prompt_tokens(" --set enable_thinking=false");
  EXPECT_GT(no_thinking, plain);
  EXPECT_EQ(test::run_kiln("run " + test::shell_quote(kiln) + " -p hi -n 1 --set enable_thinking=false").exit_code, 1);
}

}  // namespace
}  // namespace kiln
