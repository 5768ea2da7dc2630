// kiln run: generate text from a model, streamed to stdout; timings go to stderr.
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>

#include "core/mapped_file.h"
#include "engine/conversation.h"
#include "engine/defaults.h"
#include "tools/cli_common.h"
#include "tools/generation_flags.h"
#include "tools/template_vars.h"

namespace kiln::cli {

namespace {

struct RunOptions {
  GenerationFlags g;
  std::string prompt;
  bool prompt_given = false;
  std::string prompt_file;  // -f/--file
  bool echo = false;
  bool chat = false;
  std::string system;
  std::string chat_template;
  std::vector<std::string> sets;  // --set NAME=JSON, with --chat
  bool check_numerics = false;
};

// A pipe or a regular file on stdin is a prompt; a terminal, /dev/null or a socket is not (a
// terminal would wait for input nobody means to type).
bool stdin_is_piped() {
  struct stat st {};
  return fstat(STDIN_FILENO, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode));
}

void emit_stdout(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// The reply's pieces to stdout; never stops the call.
bool piece_to_stdout(std::string_view text, std::span<const int>) {
  emit_stdout(text);
  return true;
}

void report(const GenerationStats& s, const GenerationFlags& g) {
  std::fprintf(stderr, "\nkiln: seed %llu, %s\n", static_cast<unsigned long long>(g.seed), g.thread_summary.c_str());
  std::fprintf(stderr, "kiln: prompt %d tokens in %.1f ms (%.1f tok/s)\n", s.prompt_tokens, s.prompt_seconds * 1e3,
               s.prompt_seconds > 0 ? s.prompt_tokens / s.prompt_seconds : 0.0);
  std::fprintf(stderr, "kiln: generated %d tokens in %.1f ms (%.1f tok/s)%s\n", s.generated_tokens,
               s.generate_seconds * 1e3, s.generate_seconds > 0 ? s.generated_tokens / s.generate_seconds : 0.0,
               s.stop == StopReason::kStopToken ? ", stopped at an end token"
               : s.stop == StopReason::kContextFull ? ", stopped: context full" : "");
  if (s.grammar.tokens > 0)
    std::fprintf(stderr, "kiln: grammar: %d of %d tokens needed the mask (%d walks of the vocabulary), %.1f ms in masks (%.2f ms/token)\n",
                 s.grammar.masked, s.grammar.tokens, s.grammar.walks, s.grammar.mask_seconds * 1e3,
                 s.grammar.mask_seconds * 1e3 / s.grammar.tokens);
}

int run(RunOptions o) {
  GenerationFlags& g = o.g;
  // Usage errors first, before any work.
  if (!o.chat && (!o.system.empty() || !o.chat_template.empty() || !o.sets.empty()))
    return usage_error("--system, --chat-template and --set need --chat");
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  for (const std::string& s : o.sets) {
    auto var = parse_template_var(s);
    if (!var) return usage_error(var.status().message());
    kwargs[var->first] = std::move(var->second);
  }
  if (o.prompt_given && !o.prompt_file.empty()) return usage_error("give the prompt once: -p TEXT or -f FILE");
  if (std::string e = generation_flags_problem(g); !e.empty()) return usage_error(e);
  auto grammar = grammar_for(g);
  if (!grammar) return fail(grammar.status());
  if (!o.prompt_file.empty()) {
    auto text = read_text_file(o.prompt_file);
    if (!text) return fail(text.status());
    o.prompt = std::move(*text);
  } else if ((o.prompt_given && o.prompt == "-") || (!o.prompt_given && stdin_is_piped())) {
    // -p -, or no -p with a pipe or file on stdin (`echo hi | kiln run`): the prompt is stdin.
    if (!o.prompt_given) std::fputs("kiln: reading the prompt from stdin (no -p given)\n", stderr);
    o.prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    if (std::cin.bad()) return fail(io_error("cannot read the prompt from stdin"));
  }
  auto rt = runtime_for(g);
  if (!rt) return fail(rt.status());
  const auto t0 = std::chrono::steady_clock::now();
  auto model = open_for_generation(**rt, g);
  if (!model) return fail(model.status());
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const ModelConfig& cfg = (*model)->config();
  const Tokenizer& tok = (*model)->tokenizer();
  // Before the "loaded" line, so that a --ctx the model refuses is the only line.
  if (Status s = check_ctx_flag(g.n_ctx, cfg.max_seq_len, g.model); !s.is_ok()) return fail(s);
  auto session = session_for(**model, g, o.check_numerics);
  if (!session) return fail(session.status().with_context(g.model));
  std::fprintf(stderr, "kiln: loaded %s (%s, %s, %d layers, dim %d, vocab %d) in %.1f ms\n", g.model.c_str(),
               (*model)->opened().kind.c_str(), std::string(arch_name(cfg.arch)).c_str(), cfg.n_layers, cfg.dim,
               cfg.vocab_size, load_ms);
  // An echoed prompt ends mid-line on the terminal the progress line would overwrite.
  PrefillProgress progress(stderr_is_terminal() && !(o.echo && isatty(STDOUT_FILENO) == 1));
  TurnOptions turn;
  turn.max_tokens = g.n_predict;
  turn.grammar = *grammar;
  turn.grammar_trigger = g.grammar_trigger;
  turn.on_prefill = [&progress](int done, int total) { return progress.update(done, total); };
  if (Status s = speculation_for(**rt, g, turn); !s.is_ok()) return fail(s);

  if (o.chat) {
    // One user turn through the model's chat template, as `kiln chat` would send it.
    auto tpl = chat_template_for((*model)->opened(), o.chat_template);
    if (!tpl) return fail(tpl.status());
    if (Status s = (*session)->use_chat_template(*tpl, kwargs); !s.is_ok()) return fail(s);
    Conversation chat(*session, o.system);
    if (o.echo) emit_stdout(o.prompt);
    progress.start();
    auto said = chat.say(o.prompt, turn, piece_to_stdout);
    progress.finish();
    if (!said) return fail(said.status());
    report(said->stats, g);
    report_speculation(turn, said->stats);
    return 0;
  }
  // Encoded here, before the echo, as the prompt's bytes are (an invalid UTF-8 byte included).
  auto prompt = tok.encode(o.prompt, add_bos_by_default(tok));
  if (!prompt) return fail(prompt.status());
  if (o.echo) emit_stdout(o.prompt);
  progress.start();
  auto stats = (*session)->generate_tokens(*prompt, turn, piece_to_stdout);
  progress.finish();
  if (!stats) return fail(stats.status());
  report(*stats, g);
  report_speculation(turn, *stats);
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text; stdout carries exactly the generated text");
  add_generation_flags(cmd, opts->g);
  cmd->add_option("-p,--prompt", opts->prompt, "prompt text; - reads it from stdin (as does no -p with a pipe or file on stdin)")
      ->each([p = opts.get()](const std::string&) { p->prompt_given = true; });
  cmd->add_option("-f,--file", opts->prompt_file, "read the prompt from a file");
  cmd->add_flag("--echo", opts->echo, "print the prompt before the generated text");
  cmd->add_flag("--check-numerics", opts->check_numerics,
                "scan every instruction's outputs; stop at the first NaN or infinity (exit status 2)");
  cmd->add_flag("--chat", opts->chat, "send the prompt as a user message through the model's chat template");
  cmd->add_option("--system", opts->system, "with --chat: the system prompt");
  cmd->add_option("--chat-template", opts->chat_template, "with --chat: a Jinja template file instead of the model's");
  cmd->add_option("--set", opts->sets, "with --chat: NAME=JSON, an extra template variable (e.g. enable_thinking=false)")
      ->allow_extra_args(false);
  cmd->callback([opts, &exit_code] { exit_code = run(*opts); });
}

}  // namespace kiln::cli
