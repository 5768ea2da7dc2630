// kiln bench: prefill and decode speed against the rooflines measured in the same run
// (engine/speed_bench.h), concurrent sessions (--sessions, bench_sessions.h) and cold start
// (--cold-start, bench_cold_start.h). This file: the flags, and the report as text or JSON.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/mapped_file.h"
#include "engine/defaults.h"
#include "engine/speed_bench.h"
#include "core/scheme.h"
#include "tools/bench_cold_start.h"
#include "tools/bench_common.h"
#include "tools/bench_sessions.h"
#include "tools/bench_speculative.h"
#include "tools/cli_common.h"
#include "tools/generation_flags.h"

namespace kiln::cli {

namespace {

using OJ = nlohmann::ordered_json;

struct BenchCmd {
  std::string model, scheme, tokenizer;  // scheme "": a source in its own precision, as kiln run
  CacheFlags compile_cache;              // --cache-dir, --no-cache
  std::vector<int> n_prompt = {128, 512};
  int n_gen = 64;
  int depth = 0;  // tokens in the KV cache when each prefill and decode test starts
  int repeats = 5;
  int threads = 0;
  int group = 32;
  std::string kv_type = "f32";
  bool json = false;
  bool no_warmup = false;
  int64_t bw_mib = 0;
  int bw_passes = 7;
  // --cold-start
  bool cold_start = false;
  std::string cache = "both";
  std::string prompt = "Once upon a time";
  bool drop_all = false;
  bool first_token = false;  // internal: the child process of --cold-start
  std::string perf;               // --perf MODE
  std::vector<int> sessions;      // --sessions N,...: concurrent sessions instead of the usual tests
  // --draft / --lookup: speculative decoding against plain (bench_speculative.h)
  std::string draft, prompt_file;
  int lookup = 0, draft_max = SpeculativeOptions{}.draft_max;
  bool chat = false;
};

Result<OpenOptions> open_options(const BenchCmd& c) {
  OpenOptions oo;
  oo.tokenizer_path = c.tokenizer;
  oo.cache = cache_options(c.compile_cache);
  if (!c.scheme.empty()) {
    KILN_ASSIGN_OR_RETURN(oo.quant, source_scheme(c.scheme, c.group));
  }
  return oo;
}

OJ prefill_json(const PrefillResult& p) {
  OJ e = stats_json(p.tps);
  e["n_prompt"] = p.n_prompt;
  if (!p.roofline) {
    e["roofline_tps"] = nullptr;
    e["roofline_error"] = p.roofline_error;
    return e;
  }
  const PrefillRoofline& r = *p.roofline;
  e["roofline_tps"] = r.tps;
  e["roofline_ratio"] = p.tps.median / r.tps;
  OJ products = OJ::array();
  for (size_t k = 0; k < r.counts.size(); ++k)
    products.push_back(OJ{{"backend", r.counts[k].backend},
                          {"scheme", std::string(scheme_name(r.counts[k].scheme))},
                          {"step_tokens", r.counts[k].step},
                          {"products_per_token", r.counts[k].products / p.n_prompt},
                          {"products_per_second", r.rates[k]}});
  e["products"] = products;
  return e;
}

// Each scheme's decode time per token, 0 where none of its matrices ran in the profiled steps.
double scheme_decode_seconds(const SpeedBenchReport& r, const std::string& scheme) {
  for (const auto& [name, secs] : r.decode_by_scheme.matmul_seconds)
    if (name == scheme) return secs;
  return 0;
}

// The scheme mix: per layout, the weights' bytes and what a decoded token reads of them, and its
// matmuls' share of the decode step (DecodeSchemeTimes).
OJ scheme_mix_json(const SpeedBenchReport& r) {
  const DecodeSchemeTimes& dt = r.decode_by_scheme;
  const bool timed = dt.tokens > 0 && dt.step_seconds > 0;
  OJ mix = OJ::array();
  for (const SchemeShare& s : r.weights.mix) {
    const double secs = scheme_decode_seconds(r, s.scheme);
    mix.push_back(OJ{{"scheme", s.scheme},
                     {"weight_bytes", s.bytes},
                     {"weight_share", r.weights.weight_bytes > 0 ? static_cast<double>(s.bytes) / static_cast<double>(r.weights.weight_bytes) : 0.0},
                     {"read_per_token", s.read_per_token},
                     {"decode_seconds_per_token", timed ? OJ(secs) : OJ(nullptr)},
                     {"decode_share", timed ? OJ(secs / dt.step_seconds) : OJ(nullptr)},
                     {"decode_gbs", timed && secs > 0 ? OJ(static_cast<double>(s.read_per_token) / secs / 1e9) : OJ(nullptr)}});
  }
  return mix;
}

void print_json(const BenchCmd& c, const SpeedBenchReport& r) {
  const bool has_pp = !r.prefill.empty();
  const PrefillResult* last = has_pp ? &r.prefill.back() : nullptr;  // the last -p size
  const BandwidthResult& bw = r.bandwidth;
  OJ j;
  j["model"] = c.model;
  j["kind"] = r.kind;
  j["arch"] = std::string(arch_name(r.config.arch));
  j["scheme"] = r.weights.scheme;
  j["group"] = r.weights.group;
  j["threads"] = r.threads;
  j["kernels"] = r.kernels;
  j["session_threads"] = r.session_threads;
  j["kv_type"] = c.kv_type;
  j["parameters"] = r.weights.parameters;
  j["weight_bytes"] = r.weights.weight_bytes;
  j["open_seconds"] = r.open_seconds;
  j["n_prompt"] = c.n_prompt;
  j["n_gen"] = c.n_gen;
  j["depth"] = c.depth;
  j["repeats"] = c.repeats;
  j["pp_tps"] = has_pp ? OJ(last->tps.median) : OJ(nullptr);
  j["tg_tps"] = c.n_gen > 0 ? OJ(r.decode_tps.median) : OJ(nullptr);
  j["bandwidth_gbs"] = bw.median_gbs;
  j["bytes_per_token"] = r.decode.bytes_per_token;
  j["roofline_tps"] = r.decode.roofline_tps;
  j["roofline_ratio"] = r.decode.ratio;
  j["roofline_ratio_paired"] = r.decode.paired_ratio.samples.empty() ? OJ(nullptr) : OJ(r.decode.paired_ratio.median);
  j["prefill_roofline_tps"] = has_pp && last->roofline ? OJ(last->roofline->tps) : OJ(nullptr);
  j["prefill_roofline_ratio"] = has_pp && last->roofline ? OJ(last->tps.median / last->roofline->tps) : OJ(nullptr);
  OJ pj = OJ::array();
  for (const PrefillResult& p : r.prefill) pj.push_back(prefill_json(p));
  j["pp"] = pj;
  j["tg"] = stats_json(r.decode_tps);
  j["weight_bytes_per_token"] = r.weights.read_per_token;
  j["kv_bytes_per_token"] = r.decode.kv_read;
  j["bandwidth"] = OJ{{"median_gbs", bw.median_gbs}, {"min_gbs", bw.min_gbs}, {"max_gbs", bw.max_gbs},
                      {"passes", bw.pass_gbs}, {"buffer_bytes", bw.bytes}, {"llc_bytes", bw.llc_bytes},
                      {"threads", bw.threads}, {"process", r.probe_in_helper ? "helper" : "self"}};
  j["peak_rss_bytes"] = r.peak_rss;
  j["run_peak_rss_bytes"] = r.run_peak_rss;
  j["kv_cache_bytes"] = r.kv_cache_bytes;
  j["rss_budget_bytes"] = r.rss_budget;
  j["rss_within_budget"] = r.peak_rss <= r.rss_budget;
  j["rss_end"] = OJ{{"total_bytes", r.rss_end.total}, {"anon_bytes", r.rss_end.anon}, {"file_bytes", r.rss_end.file}};
  j["session_reserved_bytes"] = r.session_reserved_bytes;
  j["scheme_mix"] = scheme_mix_json(r);
  const DecodeSchemeTimes& dt = r.decode_by_scheme;
  j["decode_profile"] = dt.tokens > 0 ? OJ{{"tokens", dt.tokens}, {"step_seconds_per_token", dt.step_seconds},
                                           {"other_seconds_per_token", dt.other_seconds},
                                           {"other_share", dt.step_seconds > 0 ? dt.other_seconds / dt.step_seconds : 0.0}}
                                      : OJ(nullptr);
  std::printf("%s\n", j.dump().c_str());
}

void print_speed_table(const BenchCmd& c, const SpeedBenchReport& r, const std::string& at_depth) {
  std::printf("\n| %-12s | %10s | %10s | %10s | %8s |\n", "test", "t/s median", "min", "max", "stddev");
  std::printf("| %-12s | %10s | %10s | %10s | %8s |\n", "------------", "----------", "----------", "----------", "--------");
  auto row = [](const std::string& name, const SampleStats& st) {
    std::printf("| %-12s | %10.2f | %10.2f | %10.2f | %8.2f |\n", name.c_str(), st.median, st.min, st.max, st.stddev);
  };
  for (const PrefillResult& p : r.prefill) row("pp" + std::to_string(p.n_prompt) + at_depth, p.tps);
  if (c.n_gen > 0) row("tg" + std::to_string(c.n_gen) + at_depth, r.decode_tps);
}

void print_prefill_rooflines(const SpeedBenchReport& r, const std::string& at_depth) {
  for (size_t i = 0; i < r.prefill.size(); ++i) {
    const PrefillResult& p = r.prefill[i];
    if (i == 0) std::printf("\n");
    if (!p.roofline) {
      std::printf("prefill    pp%d%s: no compute roofline (%s)\n", p.n_prompt, at_depth.c_str(), p.roofline_error.c_str());
      continue;
    }
    const PrefillRoofline& roof = *p.roofline;
    std::string parts;
    for (size_t k = 0; k < roof.counts.size(); ++k) {
      // The step size only where a shorter last step has its own rate.
      const std::string step =
          roof.counts[k].step == roof.counts[0].step ? "" : " (" + std::to_string(roof.counts[k].step) + "-token step)";
      char part[160];
      std::snprintf(part, sizeof part, "%s%s%s %.4g M products/token at %.1f G/s", k ? ", " : "",
                    std::string(scheme_name(roof.counts[k].scheme)).c_str(), step.c_str(),
                    roof.counts[k].products / p.n_prompt / 1e6, roof.rates[k] / 1e9);
      parts += part;
    }
    std::printf("prefill    pp%d%s: compute roofline %.2f tok/s (%s; %d threads); achieved %.2f tok/s = %.1f%%\n",
                p.n_prompt, at_depth.c_str(), roof.tps, parts.c_str(), r.session_threads, p.tps.median,
                100.0 * p.tps.median / roof.tps);
  }
}

void print_decode_roofline(const BenchCmd& c, const SpeedBenchReport& r) {
  const BandwidthResult& bw = r.bandwidth;
  std::printf("\nbandwidth  %.1f GB/s read (median of %d passes over %s, %d threads; %.1f..%.1f)\n", bw.median_gbs,
              static_cast<int>(bw.pass_gbs.size()), mib(static_cast<double>(bw.bytes)).c_str(), bw.threads,
              bw.min_gbs, bw.max_gbs);
  std::printf("per token  %.2f MB = %.2f MB weights + %.2f MB KV cache (mean context %.1f)\n",
              r.decode.bytes_per_token / 1e6, static_cast<double>(r.weights.read_per_token) / 1e6, r.decode.kv_read / 1e6,
              r.decode.mean_ctx);
  if (c.n_gen > 0)
    std::printf("roofline   %.2f tok/s decode; achieved %.2f tok/s = %.1f%% (each repeat against the passes beside it: %.1f%%)\n",
                r.decode.roofline_tps, r.decode_tps.median, 100.0 * r.decode.ratio, 100.0 * r.decode.paired_ratio.median);
}

void print_scheme_mix(const SpeedBenchReport& r) {
  const DecodeSchemeTimes& dt = r.decode_by_scheme;
  const bool timed = dt.tokens > 0 && dt.step_seconds > 0;
  std::printf("\nschemes    the weights by layout; decode: each one's matmuls in a step (one more %d-token run, "
              "per-instruction times)\n", dt.tokens);
  std::printf("| %-16s | %10s | %6s | %13s | %11s | %6s | %6s |\n", "scheme", "weights", "share", "read/token MB",
              "decode ms/t", "share", "GB/s");
  std::printf("| %-16s | %10s | %6s | %13s | %11s | %6s | %6s |\n", "----------------", "----------", "------",
              "-------------", "-----------", "------", "------");
  for (const SchemeShare& s : r.weights.mix) {
    const double secs = scheme_decode_seconds(r, s.scheme);
    const double share = r.weights.weight_bytes > 0 ? static_cast<double>(s.bytes) / static_cast<double>(r.weights.weight_bytes) : 0;
    char decode[64] = "-", dshare[16] = "-", gbs[16] = "-";
    if (timed) {
      std::snprintf(decode, sizeof decode, "%.3f", secs * 1e3);
      std::snprintf(dshare, sizeof dshare, "%.1f%%", 100.0 * secs / dt.step_seconds);
      if (secs > 0) std::snprintf(gbs, sizeof gbs, "%.1f", static_cast<double>(s.read_per_token) / secs / 1e9);
    }
    std::printf("| %-16s | %10s | %5.1f%% | %13.2f | %11s | %6s | %6s |\n", s.scheme.c_str(),
                mib(static_cast<double>(s.bytes)).c_str(), 100.0 * share, static_cast<double>(s.read_per_token) / 1e6, decode,
                dshare, gbs);
  }
  if (timed)
    std::printf("| %-16s | %10s | %6s | %13s | %11.3f | %5.1f%% | %6s |\n", "other ops", "", "", "", dt.other_seconds * 1e3,
                100.0 * dt.other_seconds / dt.step_seconds, "");
}

void print_memory(const SpeedBenchReport& r) {
  std::printf("peak RSS   %s; weights + KV cache + 64 MiB = %s: %s\n", mib(static_cast<double>(r.peak_rss)).c_str(),
              mib(static_cast<double>(r.rss_budget)).c_str(),
              r.peak_rss <= r.rss_budget ? "within"
              : r.kind == "kiln"         ? "OVER"
                                         : "over (a source model compiled in memory also holds its source's pages)");
  std::printf("           the run's peak, the bandwidth probe's %s buffer included, is %s (what /usr/bin/time -v "
              "reports; --bw-mib sets the buffer): the probe ran %s\n",
              mib(static_cast<double>(r.bandwidth.bytes)).c_str(), mib(static_cast<double>(r.run_peak_rss)).c_str(),
              r.probe_in_helper ? "in a helper process" : "in this process, after the peak above was read");
  if (r.rss_end.total > 0)
    std::printf("           at the end: %s resident = %s file-backed (mapped weights, binary) + %s anonymous "
                "(session %s: arena, scratch, KV cache; heap)\n",
                mib(static_cast<double>(r.rss_end.total)).c_str(), mib(static_cast<double>(r.rss_end.file)).c_str(),
                mib(static_cast<double>(r.rss_end.anon)).c_str(), mib(static_cast<double>(r.session_reserved_bytes)).c_str());
}

void print_text(const BenchCmd& c, const SpeedBenchReport& r) {
  const ModelConfig& cfg = r.config;
  const WeightSummary& ws = r.weights;
  const std::string scheme_desc = ws.scheme + (ws.group > 0 ? " g" + std::to_string(ws.group) : "");
  std::printf("model    %s (%s, %s, %d layers, dim %d, vocab %d), %.2f M parameters, opened in %.2f s\n", c.model.c_str(),
              r.kind.c_str(), std::string(arch_name(cfg.arch)).c_str(), cfg.n_layers, cfg.dim, cfg.vocab_size,
              static_cast<double>(ws.parameters) / 1e6, r.open_seconds);
  std::printf("scheme   %s, weights %s\n", scheme_desc.c_str(), mib(static_cast<double>(ws.weight_bytes)).c_str());
  std::printf("threads  %d, KV cache %s\n", c.threads, c.kv_type.c_str());
  std::printf("kernels  %s\n", r.kernels.c_str());
  const std::string at_depth = c.depth > 0 ? " @ d" + std::to_string(c.depth) : "";
  print_speed_table(c, r, at_depth);
  print_prefill_rooflines(r, at_depth);
  print_decode_roofline(c, r);
  print_scheme_mix(r);
  print_memory(r);
}

int bench(BenchCmd c) {
  if (c.model.empty()) c.model = default_model_path();
  // Every command's thread default, the C API's: --perf (balanced when not given) picks.
  auto plan = thread_plan_for(c.perf, c.threads);
  if (!plan) return fail(plan.status());
  c.threads = plan->n_threads;
  std::fprintf(stderr, "kiln: %s\n", plan->summary.c_str());
  if (c.repeats < 1) return usage_error("-r must be at least 1");
  for (int p : c.n_prompt)
    if (p < 0) return usage_error("-p sizes must be at least 0");
  c.n_prompt.erase(std::remove(c.n_prompt.begin(), c.n_prompt.end(), 0), c.n_prompt.end());

  SpeedBenchOptions o;
  o.model = c.model;
  auto oo = open_options(c);
  if (!oo) return fail(oo.status());
  o.open = *oo;
  o.n_prompt = c.n_prompt;
  o.n_gen = c.n_gen;
  o.depth = c.depth;
  o.repeats = c.repeats;
  o.threads = c.threads;
  o.pool = plan->pool;
  o.kv_dtype = kv_dtype(c.kv_type);
  o.warmup = !c.no_warmup;
  o.bw_bytes = static_cast<uint64_t>(c.bw_mib) << 20;
  o.bw_passes = c.bw_passes;
  auto report = run_speed_bench(o);
  if (!report) return fail(report.status());
  if (c.json) print_json(c, *report);
  else print_text(c, *report);
  return 0;
}

Result<ColdStartArgs> cold_start_args(const BenchCmd& c) {
  ColdStartArgs a;
  a.model = c.model;
  a.scheme = c.scheme;
  a.tokenizer = c.tokenizer;
  a.kv_type = c.kv_type;
  a.prompt = c.prompt;
  a.cache = c.cache;
  a.group = c.group;
  a.threads = c.threads > 0 ? c.threads : 1;
  a.repeats = c.repeats;
  a.drop_all = c.drop_all;
  a.json = c.json;
  KILN_ASSIGN_OR_RETURN(a.open, open_options(c));
  return a;
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<BenchCmd>();
  CLI::App* cmd = app.add_subcommand("bench", "Prefill/decode speed against the compute and memory-bandwidth rooflines; cold start");
  cmd->add_option("model,-m,--model", c->model, ".kiln file or source model (default: the shipped stories260K)");
  add_cache_flags(cmd, c->compile_cache);
  CLI::Option* n_prompt = cmd->add_option("-p,--n-prompt", c->n_prompt, "prompt sizes for the prefill tests, comma-separated (0: none)")
      ->delimiter(',')
      ->check(at_least(0));
  cmd->add_option("-n,--n-gen", c->n_gen, "tokens for the decode test (0: none)")->check(at_least(0));
  cmd->add_option("-d,--depth", c->depth, "tokens already in the KV cache when each test starts")
      ->check(at_least(0));
  cmd->add_option("-r,--repetitions", c->repeats, "repeats of each test (median and spread reported)")
      ->check(at_least(1));
  add_threads_flag(cmd, c->threads);
  add_kv_type_flag(cmd, c->kv_type);
  CLI::Option* quant = cmd->add_option("-q,--quant", c->scheme, "scheme a source model is compiled in memory to (default: its own precision, as kiln run: "
                                       "a GGUF's quantization, an HF folder's F16/BF16)");
  CLI::Option* group = cmd->add_option("--group", c->group, kGroupHelp)->check(group_size());
  cmd->add_option("--tokenizer", c->tokenizer, "tokenizer file, if not the model's own");
  cmd->add_flag("--json", c->json, "print one JSON object");
  cmd->add_flag("--no-warmup", c->no_warmup, "skip the untimed warm-up run");
  cmd->add_option("--bw-mib", c->bw_mib, "bandwidth probe buffer in MiB (default: max(1 GiB, 4 x LLC))")
      ->check(at_least<int64_t>(0));
  cmd->add_option("--bw-passes", c->bw_passes, "timed passes of the bandwidth probe")->check(at_least(1));
  cmd->add_flag("--cold-start", c->cold_start,
                "time from process start to the first token (each repeat a new process), page cache warm and cold");
  cmd->add_option("--cache", c->cache, "--cold-start: warm, cold or both (default)");
  cmd->add_option("--prompt", c->prompt, "--cold-start: the prompt of the first token");
  cmd->add_flag("--drop-caches", c->drop_all,
                "--cold-start: also drop the whole page cache (root only; default: only the model's files)");
  cmd->add_flag("--first-token", c->first_token)->group("");  // the child of --cold-start
  add_perf_flag(cmd, c->perf);
  cmd->add_option("--sessions", c->sessions,
                  "N[,N...]: N sessions generating at once on N threads (aggregate decode tok/s, time to first "
                  "token); -p gives the prompt size (default 32), -n the tokens per session")
      ->delimiter(',')
      ->check(at_least(1));
  add_speculation_flags(cmd, c->draft, c->lookup, c->draft_max);
  cmd->add_option("--prompt-file", c->prompt_file, "--draft/--lookup: the prompt from a file (else --prompt)");
  cmd->add_flag("--chat", c->chat, "--draft/--lookup: send the prompt as a user message through the chat template");
  cmd->callback([c, n_prompt, quant, group, &exit_code] {
    // Usage errors before any work: an unknown scheme, and flags a .kiln cannot use.
    if (auto q = source_scheme(c->scheme.empty() ? "w4a16" : c->scheme, c->group); !q) {
      exit_code = usage_error(q.status().message());
      return;
    }
    // (The --cold-start child gets -q and --group whatever the model.)
    for (const auto& [opt, flag, what] : {std::tuple{quant->count() > 0, "-q", "quantization"},
                                          std::tuple{group->count() > 0, "--group", "quantization"},
                                          std::tuple{!c->tokenizer.empty(), "--tokenizer", "tokenizer"}}) {
      if (!opt || c->first_token) continue;
      if (std::string e = kiln_file_fixes(c->model, flag, what); !e.empty()) {
        exit_code = usage_error(e);
        return;
      }
    }
    if (!c->sessions.empty()) {
      BenchSessionsArgs a;
      a.model = c->model.empty() ? default_model_path() : c->model;
      a.scheme = c->scheme;
      a.tokenizer = c->tokenizer;
      a.kv_type = c->kv_type;
      a.perf = c->perf;
      a.sessions = c->sessions;
      a.n_prompt = n_prompt->count() > 0 && !c->n_prompt.empty() ? c->n_prompt.front() : 32;
      a.n_gen = c->n_gen;
      a.threads = c->threads;
      a.group = c->group;
      a.json = c->json;
      a.cache = cache_options(c->compile_cache);
      exit_code = bench_sessions(a);
      return;
    }
    if (!c->draft.empty() || c->lookup > 0) {
      BenchSpeculativeArgs a;
      a.model = c->model;
      a.draft = c->draft;
      a.scheme = c->scheme;
      a.tokenizer = c->tokenizer;
      a.kv_type = c->kv_type;
      a.perf = c->perf;
      a.prompt = c->prompt;
      if (!c->prompt_file.empty()) {
        auto text = read_text_file(c->prompt_file);
        if (!text) {
          exit_code = fail(text.status());
          return;
        }
        a.prompt = std::move(*text);
      }
      a.chat = c->chat;
      a.lookup = c->lookup;
      a.draft_max = c->draft_max;
      a.n_gen = c->n_gen;
      a.repeats = c->repeats;
      a.threads = c->threads;
      a.group = c->group;
      a.json = c->json;
      exit_code = bench_speculative(a);
      return;
    }
    if (c->first_token || c->cold_start) {
      auto a = cold_start_args(*c);
      if (!a) exit_code = fail(a.status());
      else exit_code = c->first_token ? bench_first_token(*a) : bench_cold_start(*a);
      return;
    }
    exit_code = bench(*c);
  });
}

}  // namespace kiln::cli
