// kiln template: renders a model's chat template as Hugging Face's apply_chat_template does.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "engine/render_chat.h"
#include "tools/cli_common.h"
#include "tools/template_vars.h"

namespace kiln::cli {

namespace {

struct TemplateCmd {
  std::string model;
  std::string chat_template;  // a Jinja file instead of the model's
  std::string messages;       // "-": stdin
  bool add_generation_prompt = false;
  std::vector<std::string> sets;
};

// One line on stderr, whatever the message holds.
int fail_one_line(const Status& s) {
  std::string m;
  for (char c : s.message()) m += c == '\n' ? std::string("\\n") : std::string(1, c);
  return fail(Status(s.code(), m));
}

int run_template(const TemplateCmd& c) {
  if (c.model.empty() && c.chat_template.empty()) return usage_error("give a model or --chat-template FILE");
  using OJson = nlohmann::ordered_json;
  ChatRequest req;
  req.add_generation_prompt = c.add_generation_prompt;
  Result<std::string> text = std::string();
  if (c.messages == "-") {
    text->assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    if (std::cin.bad()) return fail_one_line(io_error("--messages -: cannot read stdin"));
  } else {
    text = read_text_file(c.messages);
  }
  if (!text) return fail_one_line(text.status());
  OJson doc = OJson::parse(text->begin(), text->end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return fail_one_line(corrupt(c.messages + ": malformed JSON"));
  if (doc.is_object() && doc.contains("messages")) {
    req.messages = doc["messages"];
    if (doc.contains("tools")) req.tools = doc["tools"];
    if (doc.contains("documents")) req.documents = doc["documents"];
  } else {
    req.messages = doc;
  }
  for (const std::string& s : c.sets) {
    auto var = parse_template_var(s);
    if (!var) {
      fail_one_line(var.status());
      return kExitUsage;  // the command line, not the model, is wrong
    }
    auto& [name, v] = *var;
    if (name == "tools")
      req.tools = std::move(v);
    else if (name == "documents")
      req.documents = std::move(v);
    else
      req.kwargs[name] = std::move(v);
  }
  auto out = render_chat(c.model, c.chat_template, std::move(req));
  if (!out) return fail_one_line(out.status());
  std::fwrite(out->data(), 1, out->size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

void add_template_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<TemplateCmd>();
  CLI::App* cmd = app.add_subcommand("template", "Render a model's chat template for a conversation");
  cmd->add_option("model", c->model, "an HF model folder (tokenizer_config.json), a .gguf or a .kiln");
  cmd->add_option("--chat-template", c->chat_template, "a Jinja template file instead of the model's");
  cmd->add_option("--messages", c->messages, "JSON file (or - for stdin): an array of {role, content} messages")
      ->required();
  cmd->add_flag("--add-generation-prompt", c->add_generation_prompt, "end with the assistant turn's header");
  cmd->add_option("--set", c->sets, "NAME=JSON: an extra template variable (e.g. enable_thinking=false); repeat it")
      ->allow_extra_args(false);
  cmd->callback([c, &exit_code] { exit_code = run_template(*c); });
}

}  // namespace kiln::cli
