// kiln chat: a conversation on the terminal. Each line read is a user message; the reply streams
// to stdout. The conversation goes through the model's chat template every turn, and only the
// tokens the KV cache does not hold yet are decoded.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/chat_session.h"
#include "runtime/program_session.h"
#include "tools/cli_common.h"
#include "tools/generation_flags.h"
#include "tools/template_vars.h"

namespace kiln::cli {

namespace {

struct ChatCmd {
  GenerationFlags g;
  std::string system;
  std::string chat_template;
  std::vector<std::string> sets;
  bool quiet = false;
};

constexpr const char* kHelp =
    "kiln chat: type a message and press Enter; end a line with \\ to continue it on the next.\n"
    "  /clear  start a new conversation (the system prompt stays)\n"
    "  /exit   leave (or end the input: Ctrl-D)\n";

// A message: one line, or several joined where a line ends with a backslash. False at the end of
// the input with nothing read.
bool read_message(std::string& out, bool interactive) {
  out.clear();
  std::string line;
  bool any = false;
  while (true) {
    if (interactive) std::fputs(any ? ". " : "> ", stderr);
    if (!std::getline(std::cin, line)) return any;
    any = true;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      out += line;
      out += '\n';
      continue;
    }
    out += line;
    return true;
  }
}

int run_chat(ChatCmd c) {
  GenerationFlags& g = c.g;
  if (!g.tokenizer.empty())
    if (std::string e = kiln_file_fixes(g.model, "--tokenizer", "tokenizer"); !e.empty()) return usage_error(e);
  ChatOptions co;
  co.system = c.system;
  co.n_predict = g.n_predict;
  for (const std::string& s : c.sets) {
    auto var = parse_template_var(s);
    if (!var) return usage_error(var.status().message());
    co.kwargs[var->first] = std::move(var->second);
  }
  auto opened = open_for_generation(g);
  if (!opened) return fail(opened.status());
  auto tpl = chat_template_for(*opened, c.chat_template);
  if (!tpl) return fail(tpl.status());
  auto executor = executor_for(g);
  if (!executor) return fail(executor.status());
  auto session = ProgramSession::create(opened->model, g.n_ctx, *executor, kv_dtype(g.kv_type));
  if (!session) return fail(session.status());
  co.sampler = sampler_with_seed(g);
  auto chat = ChatSession::create(**session, *opened->tokenizer, *tpl, co);
  if (!chat) return fail(chat.status());

  const bool interactive = isatty(STDIN_FILENO) == 1;
  if (interactive && !c.quiet) std::fputs(kHelp, stderr);
  if (!c.quiet) std::fprintf(stderr, "kiln: seed %llu\n", static_cast<unsigned long long>(g.seed));
  std::string msg;
  while (read_message(msg, interactive)) {
    if (msg == "/exit" || msg == "/quit") break;
    if (msg == "/clear") {
      chat->clear();
      continue;
    }
    if (msg.empty()) continue;
    auto turn = chat->say(msg, [](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    });
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (!turn) return fail(turn.status());
    const GenerationStats& s = turn->stats;
    if (!c.quiet)
      std::fprintf(stderr, "kiln: %d prompt tokens (%d from the cache), %d new in %.1f ms; %d generated, %.1f tok/s%s\n",
                   turn->prompt_tokens, turn->reused_tokens, s.prompt_tokens, s.prompt_seconds * 1e3,
                   s.generated_tokens, s.generate_seconds > 0 ? s.generated_tokens / s.generate_seconds : 0.0,
                   s.stop == StopReason::kLength ? " (stopped at -n)" : "");
  }
  return 0;
}

}  // namespace

void add_chat_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<ChatCmd>();
  CLI::App* cmd = app.add_subcommand("chat", "Chat with a model through its chat template (one message per line on stdin)");
  add_generation_flags(cmd, c->g);
  cmd->add_option("--system", c->system, "the system prompt");
  cmd->add_option("--chat-template", c->chat_template, "a Jinja template file instead of the model's");
  cmd->add_option("--set", c->sets, "NAME=JSON: an extra template variable (e.g. enable_thinking=false); repeat it")
      ->allow_extra_args(false);
  cmd->add_flag("--quiet", c->quiet, "no help text and no per-turn statistics on stderr");
  cmd->callback([c, &exit_code] { exit_code = run_chat(*c); });
}

}  // namespace kiln::cli
