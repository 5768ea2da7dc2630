// kiln run: generate text from a model, streamed to stdout; timings go to stderr.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <random>

#include "runtime/generate.h"
#include "runtime/program_session.h"
#include "tools/cli_common.h"
#include "tools/model_open.h"

namespace kiln::cli {

namespace {

struct RunOptions {
  std::string model;
  std::string prompt;
  std::string tokenizer;
  int n_predict = 256;
  int n_ctx = 0;
  int threads = 1;
  bool echo = false;
  bool verify = false;
  bool seed_given = false;
  uint64_t seed = 0;
  SamplerParams sampler;
};

int run(RunOptions o) {
  if (o.model.empty()) o.model = default_model_path();
  const auto t0 = std::chrono::steady_clock::now();
  OpenOptions oo;
  oo.tokenizer_path = o.tokenizer;
  oo.quant = f32_overrides();
  oo.verify = o.verify;
  auto opened = open_model(o.model, oo);
  if (!opened) return fail(opened.status());
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const ModelConfig& cfg = opened->model->config();
  const Tokenizer& tok = *opened->tokenizer;
  std::fprintf(stderr, "kiln: loaded %s (%s, %s, %d layers, dim %d, vocab %d) in %.1f ms\n", o.model.c_str(),
               opened->kind.c_str(), std::string(arch_name(cfg.arch)).c_str(), cfg.n_layers, cfg.dim, cfg.vocab_size,
               load_ms);

  auto prompt = tok.encode(o.prompt, /*add_bos=*/tok.bos_id() >= 0);
  if (!prompt) return fail(prompt.status());
  auto session = ProgramSession::create(opened->model, o.n_ctx, o.threads);
  if (!session) return fail(session.status());

  if (!o.seed_given) o.seed = std::random_device{}();
  o.sampler.seed = o.seed;
  Sampler sampler(o.sampler, cfg.vocab_size);
  if (o.echo) {
    std::fwrite(o.prompt.data(), 1, o.prompt.size(), stdout);
    std::fflush(stdout);
  }
  auto stats = generate(**session, sampler, tok, *prompt, o.n_predict, [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  });
  if (!stats) return fail(stats.status());
  const auto& s = *stats;
  std::fprintf(stderr, "\nkiln: seed %llu\n", static_cast<unsigned long long>(o.seed));
  std::fprintf(stderr, "kiln: prompt %d tokens in %.1f ms (%.1f tok/s)\n", s.prompt_tokens, s.prompt_seconds * 1e3,
               s.prompt_seconds > 0 ? s.prompt_tokens / s.prompt_seconds : 0.0);
  std::fprintf(stderr, "kiln: generated %d tokens in %.1f ms (%.1f tok/s)%s\n", s.generated_tokens,
               s.generate_seconds * 1e3, s.generate_seconds > 0 ? s.generated_tokens / s.generate_seconds : 0.0,
               s.stop == StopReason::kStopToken ? ", stopped at an end token"
               : s.stop == StopReason::kContextFull ? ", stopped: context full" : "");
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text; stdout carries exactly the generated text");
  cmd->add_option("model", opts->model,
                  ".kiln file, llama2.c .bin, .gguf file or Hugging Face folder (default: the shipped stories260K)");
  cmd->add_option("-p,--prompt", opts->prompt, "prompt text");
  cmd->add_option("-n,--n-predict", opts->n_predict, "number of new tokens")->check(CLI::NonNegativeNumber);
  cmd->add_option("--temp", opts->sampler.temperature, "temperature; 0 is greedy");
  cmd->add_option("--top-k", opts->sampler.top_k, "keep the k most likely tokens; 0 is off");
  cmd->add_option("--top-p", opts->sampler.top_p, "nucleus sampling threshold; 1 is off")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-p", opts->sampler.min_p, "drop tokens below min-p times the top probability; 0 is off")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--repeat-penalty", opts->sampler.repeat_penalty, "penalty for recent tokens; 1 is off")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--repeat-last-n", opts->sampler.repeat_last_n, "how many recent tokens are penalised; -1 is all");
  cmd->add_option("--seed", opts->seed, "random seed (default: random, printed on stderr)")
      ->each([o = opts.get()](const std::string&) { o->seed_given = true; });
  cmd->add_option("--ctx", opts->n_ctx, "context length (default: the model's)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--threads", opts->threads, "worker threads")->check(CLI::PositiveNumber);
  cmd->add_option("--tokenizer", opts->tokenizer, "tokenizer file (llama2.c .bin, tokenizer.json, .gguf)");
  cmd->add_flag("--echo", opts->echo, "print the prompt before the generated text");
  cmd->add_flag("--verify", opts->verify, "check every section checksum of a .kiln (exit 2 on a mismatch)");
  cmd->callback([opts, &exit_code] { exit_code = run(*opts); });
}

}  // namespace kiln::cli
