#include "tools/generation_flags.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>

#include "core/mapped_file.h"
#include "engine/constrained_output.h"
#include "engine/defaults.h"
#include "tools/cli_common.h"

namespace kiln::cli {

void add_generation_flags(CLI::App* cmd, GenerationFlags& f) {
  // -m/--model as llama.cpp spells it, or the positional MODEL.
  cmd->add_option("model,-m,--model", f.model,
                  ".kiln file, llama2.c .bin, .gguf file or Hugging Face folder (default: the shipped stories260K)");
  add_cache_flags(cmd, f.cache);
  cmd->add_option("-n,--n-predict", f.n_predict, "number of new tokens")->check(at_least(0));
  cmd->add_option("--temp", f.sampler.temperature, "temperature; 0 is greedy")->check(at_least(0.0f));
  cmd->add_option("--top-k", f.sampler.top_k, "keep the k most likely tokens; 0 is off")->check(at_least(0));
  cmd->add_option("--top-p", f.sampler.top_p, "nucleus sampling threshold; 1 is off")->check(between(0.0, 1.0));
  cmd->add_option("--min-p", f.sampler.min_p, "drop tokens below min-p times the top probability; 0 is off")
      ->check(between(0.0, 1.0));
  cmd->add_option("--repeat-penalty", f.sampler.repeat_penalty, "penalty for recent tokens; 1 is off")
      ->check(greater_than(0.0f));
  cmd->add_option("--repeat-last-n", f.sampler.repeat_last_n, "how many recent tokens are penalised; -1 is all")
      ->check(at_least(-1));
  // OpenAI's penalties and range; they count the tokens this run (a chat: this reply) has sampled.
  cmd->add_option("--frequency-penalty", f.sampler.frequency_penalty,
                  "subtract this times the count of each token generated so far from its logit; 0 is off")
      ->check(between(-2.0f, 2.0f));
  cmd->add_option("--presence-penalty", f.sampler.presence_penalty,
                  "subtract this from the logit of each token generated so far; 0 is off")
      ->check(between(-2.0f, 2.0f));
  // -1 is random, as in llama.cpp (read as an unsigned number it would be 2^64 - 1).
  cmd->add_option("-s,--seed", f.seed, "random seed; -1: random (the default), printed on stderr")
      ->check(CLI::Validator(
          [](std::string& s) {
            uint64_t v = 0;
            if (s == "-1") return std::string();
            if (s.empty() || s[0] == '-' || !CLI::detail::lexical_cast(s, v))
              return "must be -1 (random) or a number from 0, not '" + s + "'";
            return std::string();
          },
          ""))
      ->type_name("INT")
      ->default_str("-1")  // what the help shows is what not giving it means: random
      ->each([p = &f](const std::string& s) { p->seed_given = s != "-1"; });
  cmd->add_option("-c,--ctx,--ctx-size", f.n_ctx, "context length (default: the model's maximum, at most 4096)")->check(at_least(0));
  add_threads_flag(cmd, f.threads, &f.threads_given);
  add_perf_flag(cmd, f.perf);
  add_kv_type_flag(cmd, f.kv_type);
  cmd->add_option("--tokenizer", f.tokenizer, "tokenizer file (llama2.c .bin, tokenizer.json, .gguf)");
  cmd->add_option("-q,--quant", f.scheme,
                  "scheme a source model is compiled in, in memory (default: its own precision): f32, f16, bf16, "
                  "w8a16, w6a16, w5a16, w4a16, w8a8, w4a8, or q4_0, q4_1, q4_k, q5_0, q5_1, q5_k, q6_k, q8_0, fp16")
      ->each([p = &f](const std::string&) { p->scheme_given = true; });
  cmd->add_option("--group", f.group, kGroupHelp)->check(group_size())
      ->each([p = &f](const std::string&) { p->group_given = true; });
  cmd->add_flag("--verify", f.verify, "check every section checksum of a .kiln (exit 2 on a mismatch)");
  cmd->add_option("--grammar", f.grammar_file, "GBNF grammar file (llama.cpp's format): the output must match it")
      ->check(CLI::ExistingFile);
  cmd->add_option("--json-schema", f.json_schema_file, "JSON Schema file: the output is JSON valid against it")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--json", f.json, "the output is a JSON object");
  cmd->add_option("--grammar-trigger", f.grammar_trigger,
                  "a lazy grammar: the output is free until this text appears, then follows --grammar, --json-schema "
                  "or --json from its first byte (the grammar starts with it)");
  add_speculation_flags(cmd, f.draft, f.lookup, f.draft_max);
}

Result<std::shared_ptr<const Grammar>> grammar_for(const GenerationFlags& f) {
  if (!f.grammar_trigger.empty() && f.grammar_file.empty() && f.json_schema_file.empty() && !f.json)
    return invalid_argument("--grammar-trigger needs the grammar it triggers (--grammar, --json-schema or --json)");
  if (!f.grammar_file.empty()) {
    KILN_ASSIGN_OR_RETURN(std::string text, read_text_file(f.grammar_file));
    auto g = grammar_from_gbnf(text);
    if (!g) return g.status().with_context(f.grammar_file);
    return g;
  }
  if (!f.json_schema_file.empty()) {
    KILN_ASSIGN_OR_RETURN(std::string text, read_text_file(f.json_schema_file));
    auto g = grammar_from_json_schema(text);
    if (!g) return g.status().with_context(f.json_schema_file);
    return g;
  }
  if (f.json) return json_object_grammar();
  return std::shared_ptr<const Grammar>();
}

void add_speculation_flags(CLI::App* cmd, std::string& draft, int& lookup, int& draft_max) {
  cmd->add_option("--draft", draft,
                  "speculative decoding: a smaller model of the same vocabulary drafts tokens the model verifies");
  cmd->add_option("--lookup", lookup,
                  "speculative decoding by prompt lookup: drafts what followed the text's last N-gram before")
      ->expected(0, 1)
      ->default_str(std::to_string(kDefaultLookupNgram))
      ->type_name("[N]")
      ->check(between(1, 16));
  cmd->add_option("--draft-max", draft_max, "the most tokens drafted for one verification step")
      ->check(between(1, kMaxDraftTokens))
      ->capture_default_str();
}

Status speculation_for(Runtime& rt, const GenerationFlags& f, TurnOptions& turn) {
  turn.speculative.lookup = f.lookup;
  turn.speculative.draft_max = f.draft_max;
  if (f.draft.empty()) return Status::ok();
  ModelLoadOptions lo;
  lo.open.verify = f.verify;
  lo.open.cache = cache_options(f.cache);
  if (!f.scheme.empty() && !is_kiln_file(f.draft)) {
    KILN_ASSIGN_OR_RETURN(lo.open.quant, source_scheme(f.scheme, f.group));
  }
  lo.prefault = false;
  auto d = rt.load_model(f.draft, lo);
  if (!d) return d.status().with_context("--draft " + f.draft);
  turn.draft = std::move(*d);
  return Status::ok();
}

void report_speculation(const TurnOptions& turn, const GenerationStats& s) {
  if (!turn.draft && turn.speculative.lookup <= 0) return;
  std::fprintf(stderr, "kiln: speculative: %d drafted, %d accepted (%.1f%%), %d target steps, %.2f tokens per step\n",
               s.drafted_tokens, s.accepted_tokens, s.drafted_tokens > 0 ? 100.0 * s.accepted_tokens / s.drafted_tokens : 0.0,
               s.target_steps, s.target_steps > 0 ? static_cast<double>(s.generated_tokens) / s.target_steps : 0.0);
}

std::string kiln_file_fixes(const std::string& model, const std::string& flag, const std::string& what) {
  if (model.empty() || !is_kiln_file(model)) return {};
  return model + ": " + flag + " does not apply to a .kiln file, which already fixes its " + what +
         " (give " + flag + " to kiln compile)";
}

std::string generation_flags_problem(const GenerationFlags& f) {
  if ((!f.grammar_file.empty()) + (!f.json_schema_file.empty()) + f.json > 1)
    return "give one of --grammar, --json-schema and --json";
  if (!f.tokenizer.empty())
    if (std::string e = kiln_file_fixes(f.model, "--tokenizer", "tokenizer"); !e.empty()) return e;
  if (f.scheme_given)
    if (std::string e = kiln_file_fixes(f.model, "-q", "quantization"); !e.empty()) return e;
  if (f.group_given)
    if (std::string e = kiln_file_fixes(f.model, "--group", "quantization"); !e.empty()) return e;
  if (!f.scheme.empty())
    if (auto q = source_scheme(f.scheme, f.group); !q) return q.status().message();
  if (f.group_given && f.scheme.empty()) return "--group needs -q (a source runs in its own precision without it)";
  return {};
}

namespace {
// The sampler's parameters with the seed filled in: --seed, or a random one (print it).
SamplerParams sampler_with_seed(GenerationFlags& f) {
  f.seed = resolve_seed(f.seed_given ? std::optional<uint64_t>(f.seed) : std::nullopt);
  SamplerParams p = f.sampler;
  p.seed = f.seed;
  return p;
}
}  // namespace

Result<std::shared_ptr<RuntimeModel>> open_for_generation(Runtime& rt, GenerationFlags& f) {
  if (f.model.empty()) f.model = default_model_path();
  ModelLoadOptions lo;
  lo.open.tokenizer_path = f.tokenizer;
  lo.open.verify = f.verify;
  lo.open.cache = cache_options(f.cache);
  if (!f.scheme.empty()) {
    KILN_ASSIGN_OR_RETURN(lo.open.quant, source_scheme(f.scheme, f.group));
  }
  lo.prefault = false;  // one process, one model: pages come in as the first steps read them
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<RuntimeModel> m, rt.load_model(f.model, lo));
  const OpenedModel& o = m->opened();
  print_notes(o.notes);
  // A GGUF or HF source compiled in memory (--no-cache) is compiled on every start; say so, and
  // what a compiled file saves (a 51 MB Q4_0 GGUF ran at 479 MB RSS from memory at f32, its w4a16
  // .kiln at 98 MB).
  if ((o.kind == "gguf" || o.kind == "hf") && o.cache_path.empty())
    std::fprintf(stderr,
                 "kiln: %s is a %s source, compiled in memory (%s%s) on every start; `kiln compile %s -o "
                 "model.kiln` once makes a file that starts as a map and a check\n",
                 f.model.c_str(), o.kind.c_str(), m->main_scheme().c_str(),
                 f.scheme.empty() ? ", its own precision" : "", f.model.c_str());
  return m;
}

Result<std::shared_ptr<RuntimeSession>> session_for(RuntimeModel& m, GenerationFlags& f, bool check_numerics) {
  SessionOptions so;
  so.n_ctx = f.n_ctx;
  so.kv_dtype = kv_dtype(f.kv_type);
  so.sampler = sampler_with_seed(f);
  so.check_numerics = check_numerics;
  return m.new_session(so);
}

void add_perf_flag(CLI::App* cmd, std::string& perf) {
  cmd->add_option("--perf", perf,
                  "performance mode: burst, balanced, sustained or power_saver (threads, cores, spinning; see README)")
      ->check(CLI::IsMember({"burst", "balanced", "sustained", "power_saver"}));
}

void add_threads_flag(CLI::App* cmd, int& threads, bool* given) {
  CLI::Option* o = cmd->add_option("-t,--threads", threads,
                                   "worker threads; 0: as --perf picks (balanced: the fastest cores, at most 4), "
                                   "the C API's default")
                       ->check(between(0, 256));
  if (given) o->each([given](const std::string&) { *given = true; });
}

Result<ThreadPlan> thread_plan_for(const std::string& perf, int threads) {
  PerfMode mode = PerfMode::kBalanced;
  if (!perf.empty()) {
    KILN_ASSIGN_OR_RETURN(mode, parse_perf_mode(perf));
  }
  return plan_threads(mode, threads);
}

Result<std::shared_ptr<Runtime>> runtime_for(GenerationFlags& f) {
  RuntimeOptions ro;
  ro.n_threads = f.threads;
  if (!f.perf.empty()) {
    KILN_ASSIGN_OR_RETURN(ro.perf_mode, parse_perf_mode(f.perf));
  }
  std::shared_ptr<Runtime> rt = Runtime::create(ro);
  f.thread_summary = rt->thread_plan().summary;
  return rt;
}

bool stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

void PrefillProgress::start() { t0_ = std::chrono::steady_clock::now(); }

bool PrefillProgress::update(int done, int total) {
  if (!enabled_) return true;
  if (done >= total) {
    finish();
    return true;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  if (total <= 512 && s < 2.0) return true;
  const double rate = s > 0 ? done / s : 0.0;
  char line[160];
  int n = std::snprintf(line, sizeof line, "kiln: prefill %d/%d tokens (%d%%), %.1f tok/s", done, total,
                        static_cast<int>(100.0 * done / total), rate);
  if (rate > 0) {
    const int left = static_cast<int>((total - done) / rate + 0.5);
    n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n), ", %d:%02d left", left / 60, left % 60);
  }
  std::string out = "\r";
  out.append(line, static_cast<size_t>(n));
  // Spaces over what a longer previous line left (no terminal escapes needed).
  if (shown_ > static_cast<size_t>(n)) out.append(shown_ - static_cast<size_t>(n), ' ');
  shown_ = std::max(shown_, static_cast<size_t>(n));
  std::fwrite(out.data(), 1, out.size(), stderr);
  std::fflush(stderr);
  return true;
}

void PrefillProgress::finish() {
  if (shown_ == 0) return;
  const std::string blank = "\r" + std::string(shown_, ' ') + "\r";
  std::fwrite(blank.data(), 1, blank.size(), stderr);
  std::fflush(stderr);
  shown_ = 0;
}

}  // namespace kiln::cli
