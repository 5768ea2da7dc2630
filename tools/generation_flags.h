// The options `kiln run` and `kiln chat` share: the model, the context, threads and sampling.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <memory>

#include "engine/constrained_output.h"
#include "engine/runtime.h"
#include "tools/cli_common.h"

namespace CLI {
class App;
}

namespace kiln::cli {

struct GenerationFlags {
  std::string model;
  std::string tokenizer;
  int n_predict = 256;
  int n_ctx = 0;
  int threads = 0;             // 0: what --perf (balanced by default) picks
  std::string kv_type = "f32";
  bool verify = false;
  bool seed_given = false;
  uint64_t seed = 0;
  SamplerParams sampler;
  std::string perf;            // --perf MODE; "" : --threads alone decides
  bool threads_given = false;
  std::string scheme;          // -q: a source model compiled in memory ("": its own precision)
  std::string thread_summary;  // set by runtime_for: "2 threads (balanced)"
  int group = 32;
  bool scheme_given = false;
  bool group_given = false;
  // Constrained output: at most one of the three.
  std::string grammar_file;      // --grammar FILE: GBNF
  std::string grammar_trigger;   // --grammar-trigger TEXT: the grammar holds from this text on (lazy)
  std::string json_schema_file;  // --json-schema FILE
  bool json = false;             // --json: any JSON object
  // Speculative decoding: --draft MODEL, --lookup [N], --draft-max N.
  std::string draft;
  int lookup = 0;
  int draft_max = SpeculativeOptions{}.draft_max;
  CacheFlags cache;  // --cache-dir, --no-cache
};

void add_generation_flags(CLI::App* cmd, GenerationFlags& f);
// --draft, --lookup [N], --draft-max (run, chat and bench).
void add_speculation_flags(CLI::App* cmd, std::string& draft, int& lookup, int& draft_max);
// Empty when `model` is not a .kiln file; else the usage error for `flag`, which only a source
// model can use: the .kiln already fixes `what` (its tokenizer, its quantization).
std::string kiln_file_fixes(const std::string& model, const std::string& flag, const std::string& what);
// The usage error in flags a command cannot use, before any work: an unknown -q, or --tokenizer,
// -q or --group given with a .kiln (which fixes them). Empty when there is none.
std::string generation_flags_problem(const GenerationFlags& f);
// The grammar --grammar, --json-schema or --json asks for (files read and parsed); null when none.
Result<std::shared_ptr<const Grammar>> grammar_for(const GenerationFlags& f);
// The engine's runtime a command's session runs on, its thread pool as the C API picks it:
// --perf MODE (balanced when not given: the fastest cores, at most 4), --threads fixing the count
// when given. The choice is left in f.thread_summary for the command's statistics on stderr.
Result<std::shared_ptr<Runtime>> runtime_for(GenerationFlags& f);
// Opens --model (default: the shipped one) on `rt` as run and chat do: a .kiln mapped, a source
// model compiled in memory (-q, f32 by default; a line on stderr says so and suggests kiln
// compile), --tokenizer and --verify applied.
Result<std::shared_ptr<RuntimeModel>> open_for_generation(Runtime& rt, GenerationFlags& f);
// A session of `m` as --ctx, --kv-type and the sampling flags ask (the seed resolved: --seed,
// or a random one, left in f.seed to print).
Result<std::shared_ptr<RuntimeSession>> session_for(RuntimeModel& m, GenerationFlags& f, bool check_numerics = false);
// --draft (opened on `rt` as the model is, -q applied to a source) and --lookup/--draft-max into
// `turn`; nothing when neither is given.
Status speculation_for(Runtime& rt, const GenerationFlags& f, TurnOptions& turn);
// One line on stderr after a speculative call: drafted, accepted, target steps, tokens per step.
void report_speculation(const TurnOptions& turn, const GenerationStats& s);
// The same choice for a command without a session of its own (ppl, bench).
Result<ThreadPlan> thread_plan_for(const std::string& perf, int threads);
// The prefill's progress as one line on stderr that updates in place (carriage returns), for a
// long prompt only (more than 512 tokens to decode, or 2 s gone) and only when `enabled` (stderr
// a terminal: a pipe gets nothing). The line is erased when the prefill ends, before any reply.
class PrefillProgress {
 public:
  explicit PrefillProgress(bool enabled) : enabled_(enabled) {}
  // Before each call that may prefill: the clock starts here.
  void start();
  // GenerateOptions::on_prefill; never stops the call.
  bool update(int done, int total);
  // After the call (a cancelled or failed prefill leaves no line behind).
  void finish();

 private:
  bool enabled_;
  std::chrono::steady_clock::time_point t0_{};
  size_t shown_ = 0;  // the width of the line on the screen; 0: none
};
// Whether stderr is a terminal, where the prefill's progress line may go.
bool stderr_is_terminal();

// --perf MODE on any command.
void add_perf_flag(CLI::App* cmd, std::string& perf);
// -t/--threads on any command: 0, the default, leaves the count to --perf.
void add_threads_flag(CLI::App* cmd, int& threads, bool* given = nullptr);

}  // namespace kiln::cli
