// kiln tune: measures each tensor's sensitivity to each scheme and writes the overrides file that
// fits a size budget (or a KL target) with the least predicted KL; then measures the result.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "core/temp_file.h"
#include "engine/precision_tune.h"
#include "perf/tune_report.h"
#include "tools/cli_common.h"
#include "tools/generation_flags.h"

namespace kiln::cli {

namespace {

struct TuneCmd {
  TuneRequest rq;
  std::string out, report, candidates;
};

std::string mib(uint64_t b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  return s;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    if (a != std::string::npos) out.push_back(item.substr(a, b - a + 1));
  }
  return out;
}

void print_measure(const TuneMeasure& m) {
  std::printf("  %-18s %14llu  %10s  %12.6f  %10.6f  %6.2f %%  %8.4f -> %-8.4f (%+.2f %%)\n", m.label.c_str(),
              static_cast<unsigned long long>(m.bytes), mib(m.bytes).c_str(), m.predicted_kl, m.kl, 100 * m.top1,
              m.ppl_reference, m.ppl, 100 * (m.ppl / m.ppl_reference - 1));
  if (m.fallbacks) std::printf("  %-18s (%d tensors its groups do not divide stored at w8a16, as kiln compile -q does)\n", "", m.fallbacks);
}

int tune(TuneCmd& c) {
  remove_temp_files_on_signals();
  // Before minutes of measuring: outputs that cannot be written are refused now.
  for (const std::string* out : {&c.out, &c.report}) {
    if (out->empty()) continue;
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::path(*out).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
      return fail(not_found("the folder " + dir.string() + " of " + *out + " does not exist"));
    if (auto t = regular_file_target(*out); !t) return fail(t.status());
  }
  c.rq.candidates = split_commas(c.candidates);
  if (!c.candidates.empty() && c.rq.candidates.empty()) return usage_error("--candidates is empty");
  c.rq.measure_uniform = !c.report.empty();
  c.rq.sweep_progress = progress_bar("measuring");
  c.rq.notify = [](const std::string& line) { std::fprintf(stderr, "kiln: %s\n", line.c_str()); };
  auto r = tune_precision(c.rq);
  if (!r) return fail(r.status());
  const SweepResult& s = r->sweep;
  std::fprintf(stderr, "kiln: %zu tensors x %zu candidates on %lld calibration tokens: %d runs in %.1f s (the f32 run %.1f s)\n",
               s.tensors.size(), s.candidates.size(), static_cast<long long>(s.tokens), s.runs, s.seconds, s.reference_seconds);
  std::printf("%-34s %-12s %12s %10s %8s\n", "tensor", "scheme", "bytes", "KL", "share");
  for (size_t t = 0; t < s.tensors.size(); ++t) {
    const int ci = r->scheme_of[t];
    const double kl = s.tensors[t].kl[static_cast<size_t>(ci)];
    std::printf("%-34s %-12s %12llu %10.6f %7.2f %%\n", s.tensors[t].name.c_str(), s.candidates[static_cast<size_t>(ci)].label.c_str(),
                static_cast<unsigned long long>(s.tensors[t].bytes[static_cast<size_t>(ci)]), kl,
                r->choice.loss > 0 ? 100 * kl / r->choice.loss : 0.0);
  }
  std::printf("budget: %s", r->budget.c_str());
  if (r->budget_bytes) std::printf(" (%llu weight bytes, %s)", static_cast<unsigned long long>(r->budget_bytes), mib(r->budget_bytes).c_str());
  std::printf("\npredicted: %llu weight bytes (%.3f bits a weight over %llu parameters), KL %.6f\n",
              static_cast<unsigned long long>(r->choice.bytes),
              8.0 * static_cast<double>(r->choice.bytes - s.fixed_bytes) / static_cast<double>(r->parameters),
              static_cast<unsigned long long>(r->parameters), r->choice.loss);
  std::printf("measured against f32 on %s (%lld tokens):\n", r->eval_name.c_str(), static_cast<long long>(r->eval_tokens));
  std::printf("  %-18s %14s  %10s  %12s  %10s  %8s  %s\n", "", "weight bytes", "", "predicted KL", "KL", "top-1", "perplexity");
  print_measure(r->tuned);
  for (const TuneMeasure& m : r->uniform) print_measure(m);
  if (Status st = write_text(c.out, r->overrides_json); !st) return fail(st);
  size_t rules = 0;
  for (size_t p = r->overrides_json.find("\"match\""); p != std::string::npos; p = r->overrides_json.find("\"match\"", p + 1)) ++rules;
  std::fprintf(stderr, "kiln: wrote %s (%zu rules); compile with: kiln compile %s --overrides %s -o OUT.kiln\n", c.out.c_str(),
               rules, c.rq.model.c_str(), c.out.c_str());
  if (!c.report.empty()) {
    TuneReport rep;
    rep.model = std::filesystem::path(c.rq.model).filename().string();
    rep.budget = r->budget;
    rep.eval = r->eval_name;
    for (const ChoiceOption& f : r->front) rep.front.push_back({"", static_cast<double>(f.bytes), f.loss, false});
    rep.points.push_back({"tuned (predicted)", static_cast<double>(r->choice.bytes), r->choice.loss, false});
    rep.points.push_back({"tuned", static_cast<double>(r->tuned.bytes), r->tuned.kl, true});
    for (const TuneMeasure& m : r->uniform) rep.points.push_back({m.label, static_cast<double>(m.bytes), m.kl, true});
    for (size_t t = 0; t < s.tensors.size(); ++t) {
      const size_t ci = static_cast<size_t>(r->scheme_of[t]);
      rep.rows.push_back({s.tensors[t].name, s.candidates[ci].label, s.tensors[t].bytes[ci], s.tensors[t].kl[ci],
                          r->choice.loss > 0 ? s.tensors[t].kl[ci] / r->choice.loss : 0.0});
    }
    if (Status st = write_text(c.report, tune_report_html(rep)); !st) return fail(st);
    std::fprintf(stderr, "kiln: wrote %s\n", c.report.c_str());
  }
  return 0;
}

}  // namespace

void add_tune_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<TuneCmd>();
  CLI::App* cmd = app.add_subcommand(
      "tune", "Measure each tensor's sensitivity to each scheme and write the overrides file that fits a budget");
  cmd->add_option("model", c->rq.model, "llama2.c .bin, .gguf file or Hugging Face folder")->required();
  cmd->add_option("--calib", c->rq.calib, "plain text the sensitivities are measured on")->required();
  cmd->add_option("--calib-tokens", c->rq.calib_tokens, "calibration tokens used (default 256)")->check(between<int64_t>(64, 1 << 16));
  cmd->add_option("--size", c->rq.size,
                  "the budget: weight bytes (380M, 1.2G) or a scheme whose uniform compile's size it is (\"w4a16 g32\", q4_0)");
  cmd->add_option("--bits-per-weight", c->rq.bits_per_weight, "the budget: bits a weight over the tensors chosen for")
      ->check(between<double>(1, 32));
  cmd->add_option("--max-kl", c->rq.max_kl, "the budget: the smallest choice whose predicted KL (nats) is at most this")
      ->check(between<double>(1e-9, 100));
  cmd->add_option("-o,--output", c->out, "the overrides file to write (JSON, for kiln compile --overrides)")->required();
  cmd->add_option("--eval", c->rq.eval, "text the result is measured on (default: the calibration text)");
  cmd->add_option("--report", c->report,
                  "an HTML page: size against KL for the tuned choice and every candidate compiled uniformly (measured)");
  cmd->add_option("--candidates", c->candidates,
                  "the schemes to choose among, comma-separated (default: w4a16 g128, w4a16 g64, w4a16 g32, q4_k, q5_0, q6_k, "
                  "w8a16, q8_0, f16)");
  cmd->add_flag("--exact", c->rq.exact,
                "measure every candidate of every tensor (default: the cheapest, the others scaled by their weighted error)");
  add_threads_flag(cmd, c->rq.threads);
  cmd->callback([c, &exit_code] { exit_code = tune(*c); });
}

}  // namespace kiln::cli
