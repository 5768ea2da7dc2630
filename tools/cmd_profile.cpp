// kiln profile: where a prefill and a decode spend their time, per instruction, op, layer and back
// end, with the bytes each moves and the rates it reaches against this machine's ceilings
// (bandwidth and products per second, measured after the run); where the memory is; optionally a
// Chrome/Perfetto trace and a self-contained HTML report. --check-numerics stops at the first
// NaN or infinity an instruction writes and names it (exit status 2).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "core/temp_file.h"
#include "engine/defaults.h"
#include "engine/open_model.h"
#include "engine/profile_run.h"
#include "perf/html_report.h"
#include "perf/profile_json.h"
#include "perf/profile_text.h"
#include "perf/trace_json.h"
#include "tools/cli_common.h"
#include "tools/generation_flags.h"

namespace kiln::cli {

namespace {

struct ProfileCmd {
  std::string model, scheme, tokenizer, level = "detailed", trace, report;  // scheme "": a source's own precision
  std::string perf;
  int n_prompt = 128, n_gen = 64, threads = 0, group = 32, top = 10;
  std::string kv_type = "f32";
  bool json = false, check_numerics = false, no_warmup = false, no_ceilings = false;
  bool scheme_given = false;
  int64_t bw_mib = 0;
  int bw_passes = 3;
  int overhead = 0;  // --overhead N: decode steps, alternated with the tracer off and on
};

int profile(ProfileCmd c) {
  if (c.model.empty()) c.model = default_model_path();
  // Every command's thread default, the C API's: --perf (balanced when not given) picks.
  auto plan = thread_plan_for(c.perf, c.threads);
  if (!plan) return fail(plan.status());
  c.threads = plan->n_threads;
  std::fprintf(stderr, "kiln: %s\n", plan->summary.c_str());
  auto level = parse_profile_level(c.level);
  if (!level) return usage_error("--level: " + level.status().message());
  if (*level == ProfileLevel::kOff && !c.check_numerics) return usage_error("--level off profiles nothing");
  if ((!c.trace.empty() || !c.report.empty()) && *level != ProfileLevel::kDetailed)
    return usage_error("--trace and --report need --level detailed");
  // Before the run: a trace or report path that is not a regular file is refused now.
  for (const std::string* out : {&c.trace, &c.report})
    if (!out->empty())
      if (auto t = regular_file_target(*out); !t) return fail(t.status());
  if (c.scheme_given)
    if (std::string e = kiln_file_fixes(c.model, "-q", "quantization"); !e.empty()) return usage_error(e);
  OpenOptions oo;
  oo.tokenizer_path = c.tokenizer;
  // As kiln run, bench and ppl: a source model keeps its own precision unless -q says otherwise.
  if (!c.scheme.empty()) {
    auto q = source_scheme(c.scheme, c.group);
    if (!q) return usage_error(q.status().message());
    oo.quant = *q;
  }
  auto opened = open_model(c.model, oo);
  if (!opened) return fail(opened.status());
  print_notes(opened->notes);
  const ModelConfig& cfg = opened->model->config();
  ProfileRunOptions po;
  po.n_prompt = c.n_prompt;
  po.n_gen = c.n_gen;
  po.n_threads = c.threads;
  po.kv_dtype = kv_dtype(c.kv_type);
  po.level = *level;
  po.check_numerics = c.check_numerics;
  po.warmup = !c.no_warmup;
  po.overhead = c.overhead;
  po.ceilings = !c.no_ceilings;
  po.bandwidth_bytes = static_cast<uint64_t>(c.bw_mib) << 20;
  po.bandwidth_passes = c.bw_passes;
  const int n_ctx = profile_context(po);
  if (n_ctx > cfg.max_seq_len)
    return usage_error("-p plus -n is " + std::to_string(n_ctx) + " tokens, more than the model's maximum of " +
                       std::to_string(cfg.max_seq_len));
  auto measured = profile_model(*opened, po);
  if (!measured) return fail(measured.status());
  if (const auto& o = measured->overhead)
    std::fprintf(stderr,
                 "kiln: overhead: decode step median %.4f ms off, %.4f ms %s (%+.2f %%; median of each traced step "
                 "against its untraced neighbours %+.2f %%), %zu steps each, alternated\n",
                 o->off_seconds * 1e3, o->on_seconds * 1e3, std::string(profile_level_name(*level)).c_str(),
                 o->off_seconds > 0 ? 100 * (o->on_seconds / o->off_seconds - 1) : 0.0, 100 * (o->paired_ratio - 1),
                 o->steps);
  const Status& run = measured->run;
  Profile& p = measured->profile;
  p.model = c.model;
  if (!c.trace.empty())
    if (Status st = write_text(c.trace, trace_to_json(p).dump()); !st) return fail(st);
  if (!c.report.empty())
    if (Status st = write_text(c.report, profile_to_html(p)); !st) return fail(st);
  if (c.json) std::printf("%s\n", profile_to_json(p, static_cast<size_t>(c.top)).dump(2).c_str());
  else std::fputs(profile_to_text(p, static_cast<size_t>(c.top)).c_str(), stdout);
  if (!run) return finish_stdout(fail(run));
  return finish_stdout(0);
}

}  // namespace

void add_profile_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<ProfileCmd>();
  CLI::App* cmd = app.add_subcommand("profile", "Where time and memory go, per instruction, op, layer and back end; trace and HTML report");
  cmd->add_option("model,-m,--model", c->model, ".kiln file or source model (default: the shipped stories260K)");
  cmd->add_option("-p,--n-prompt", c->n_prompt, "prompt tokens (prefilled in steps of up to the program's step size)")->check(at_least(1));
  cmd->add_option("-n,--n-gen", c->n_gen, "tokens decoded after it")->check(at_least(0));
  add_threads_flag(cmd, c->threads);
  add_perf_flag(cmd, c->perf);
  cmd->add_option("--level", c->level, "basic (per step) or detailed (per instruction)");
  cmd->add_option("--trace", c->trace, "write a Chrome trace-event JSON (Perfetto, chrome://tracing)");
  cmd->add_option("--report", c->report, "write a self-contained HTML report");
  cmd->add_flag("--json", c->json, "print the profile as one JSON object");
  cmd->add_option("--top", c->top, "rows of each table (0: all)")->check(at_least(0));
  cmd->add_flag("--check-numerics", c->check_numerics,
                "scan every instruction's outputs; stop at the first NaN or infinity (exit status 2)");
  cmd->add_option("--overhead", c->overhead,
                  "then time N decode steps with the tracer off and N at --level, alternated (stderr)")->check(at_least(0));
  cmd->add_flag("--no-warmup", c->no_warmup, "skip the untimed run before the profiled one");
  cmd->add_flag("--no-ceilings", c->no_ceilings, "do not measure the bandwidth and compute ceilings");
  cmd->add_option("--bw-mib", c->bw_mib, "bandwidth probe buffer in MiB (default: max(1 GiB, 4 x LLC))")->check(at_least(0));
  cmd->add_option("--bw-passes", c->bw_passes, "timed passes of the bandwidth probe")->check(at_least(1));
  cmd->add_option("-q,--quant", c->scheme, "scheme for a source model compiled in memory (default: its own precision)")
      ->each([p = c.get()](const std::string&) { p->scheme_given = true; });
  cmd->add_option("--group", c->group, kGroupHelp)->check(group_size());
  cmd->add_option("--tokenizer", c->tokenizer, "tokenizer file, if not the model's own");
  add_kv_type_flag(cmd, c->kv_type);
  cmd->callback([c, &exit_code] { exit_code = profile(*c); });
}

}  // namespace kiln::cli
