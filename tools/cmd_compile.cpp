// kiln compile: quantize, run the passes, plan memory and write the .kiln context binary.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "core/temp_file.h"
#include "engine/compile_file.h"
#include "tools/generation_flags.h"
#include "tools/cli_common.h"

namespace kiln::cli {

namespace {

struct CompileCmd {
  std::string model, out, scheme, overrides, target = "auto", tokenizer;  // scheme "": see CompileRequest
  int group = 32;
  bool group_given = false;
  bool asymmetric = false;
  bool no_fuse = false;
  bool strict = false;
  bool quantize_classifier = false;
  bool no_conformance = false;
  std::string calib;
  int64_t calib_tokens = 512;
  std::string imatrix;
  std::string method;
  bool act_order = false;
  std::string eval;
  int threads = 0;
  int max_tokens = kDefaultMaxTokens;
};

std::string mib(int64_t b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
  return s;
}

int compile(const CompileCmd& c) {
  // Ctrl-C, SIGTERM or SIGHUP during the write leave no out.kiln.tmp.* behind.
  remove_temp_files_on_signals();
  // Before any work: a missing folder would otherwise surface as "cannot create the temporary file".
  {
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::path(c.out).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
      return fail(not_found("the folder " + dir.string() + " of the output does not exist"));
  }
  CompileRequest rq;
  rq.model = c.model;
  rq.output = c.out;
  rq.scheme = c.scheme;
  // -q w8a16 alone stays one scale per row; an explicit --group asks for 8-bit groups.
  if (c.group_given) rq.scheme = scheme_with_group(c.scheme, c.group);
  rq.group = c.group;
  rq.symmetric = !c.asymmetric;
  rq.strict = c.strict;
  rq.overrides = c.overrides;
  rq.target = c.target;
  rq.tokenizer = c.tokenizer;
  rq.max_tokens = c.max_tokens;
  rq.fuse = !c.no_fuse;
  rq.quantize_classifier = c.quantize_classifier;
  rq.conformance = !c.no_conformance;
  rq.calib = c.calib;
  rq.calib_tokens = c.calib_tokens;
  rq.imatrix = c.imatrix;
  rq.method = c.method;
  rq.act_order = c.act_order;
  rq.eval = c.eval;
  rq.threads = c.threads;
  rq.quantize_progress = progress_bar("quantizing");
  rq.write_progress = progress_bar("writing");
  auto summary = compile_to_file(rq);
  if (!summary) return fail(summary.status());
  const CompileReport& r = summary->report;
  const double secs = summary->seconds;

  const MemoryPlan& plan = summary->plan;
  for (const std::string& f : summary->stale_removed)
    std::fprintf(stderr, "kiln: removed %s, left by an earlier compile that was killed\n", f.c_str());
  std::fprintf(stderr, "kiln: wrote %s in %.2f s\n", c.out.c_str(), secs);
  std::fprintf(stderr, "  target: %s\n", summary->target.c_str());
  // A ratio only for a real reduction: an f32 compile is the same size (give or take padding).
  const double ratio =
      r.compiled_bytes ? static_cast<double>(r.source_bytes) / static_cast<double>(r.compiled_bytes) : 0.0;
  char size_change[48];
  if (ratio >= 1.005) std::snprintf(size_change, sizeof size_change, "%.2fx smaller", ratio);
  else if (ratio > 0.95) std::snprintf(size_change, sizeof size_change, "about the same size");
  else std::snprintf(size_change, sizeof size_change, "larger");
  std::fprintf(stderr, "  weights: %s -> %s (%s), %lld parameters\n", mib(r.source_bytes).c_str(),
               mib(r.compiled_bytes).c_str(), size_change, static_cast<long long>(r.parameters));
  for (const auto& [scheme, bytes] : r.scheme_bytes)
    std::fprintf(stderr, "  %-6s %5.1f%%  %s\n", scheme.c_str(), 100.0 * static_cast<double>(bytes) / static_cast<double>(r.compiled_bytes),
                 mib(bytes).c_str());
  std::fprintf(stderr, "  activations: peak %s for %d tokens per step (%s without reuse, %.1fx reuse)\n",
               mib(plan.arena_bytes).c_str(), plan.max_tokens, mib(plan.total_bytes).c_str(),
               plan.arena_bytes ? static_cast<double>(plan.total_bytes) / static_cast<double>(plan.arena_bytes) : 0.0);
  int total_nodes = 0;
  for (const auto& [b, n] : r.partition.nodes) total_nodes += n;
  for (const auto& [b, n] : r.partition.nodes)
    std::fprintf(stderr, "  back end %-6s %d of %d ops (%.0f%%)\n", b.c_str(), n, total_nodes, 100.0 * n / total_nodes);
  std::fprintf(stderr, "  fused: %d qkv, %d gate+up+swiglu, %d rope+kv-store, %d residual adds, %d norms\n", r.fusion.qkv,
               r.fusion.gate_up, r.fusion.rope_kv, r.fusion.residual, r.fusion.norm);
  if (r.method != "rtn") {
    const std::string tokens = r.calibration_tokens > 0 ? std::to_string(r.calibration_tokens) + " tokens" : "tokens not recorded";
    std::fprintf(stderr, "  method: %s, %lld weights rounded with the statistics of %s (%s, hash %s, %.2f s)\n",
                 r.method.c_str(), static_cast<long long>(r.weights_calibrated), r.calibration_source.c_str(),
                 tokens.c_str(), r.calibration_hash.c_str(), summary->calibration_seconds);
  }
  if (summary->conformance) {
    // The headline: the --eval text when given, else the built-in one (kiln inspect prints all).
    const ConformanceText& t = summary->conformance->headline();
    std::fprintf(stderr, "  conformance against f32 (%s text, %lld tokens, %.2f s): top-1 %.2f %%, KL %.6f nats, perplexity %.4f -> %.4f (%+.2f %%)\n",
                 t.name.c_str(), static_cast<long long>(t.tokens), summary->conformance_seconds, 100 * t.top1_agreement, t.kl,
                 t.ppl_reference, t.ppl_quantized, 100 * (t.ppl_quantized / t.ppl_reference - 1));
  }
  for (const auto& n : r.notes) std::fprintf(stderr, "  note: %s\n", n.c_str());
  return 0;
}

}  // namespace

void add_compile_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<CompileCmd>();
  CLI::App* cmd = app.add_subcommand("compile", "Quantize and compile a model into a .kiln context binary");
  cmd->add_option("model", c->model, "llama2.c .bin, .gguf file or Hugging Face folder")->required();
  cmd->add_option("-o,--output", c->out, "the .kiln file to write")->required();
  cmd->add_option("-q,--quant", c->scheme, "default scheme (w4a16; a quantized GGUF keeps its own): f32, f16, bf16, w8a16, w6a16, w5a16, w4a16, w8a8, w4a8, or an alias: q4_0 (w4a16 g32), "
                  "q4_1 (w4a16 g32 asym), q4_k (w4a16 g256 asym), q5_0 (w5a16 g32 sym), q5_1 (w5a16 g32 asym), q5_k (w5a16), q6_k (w6a16), q8_0 (w8a16 g32), fp16, fp32, bfloat16");
  cmd->add_option("--group", c->group, kGroupHelp)->check(group_size())
      ->each([p = c.get()](const std::string&) { p->group_given = true; });
  cmd->add_flag("--asym", c->asymmetric, "asymmetric 4-bit groups (scale and minimum)");
  cmd->add_flag("--strict", c->strict,
                "fail on a 4-bit tensor whose width the group does not divide (default: store it as 8-bit, with a note)");
  cmd->add_option("--overrides", c->overrides, "JSON file of per-tensor schemes (see README)");
  cmd->add_option("--target", c->target,
                  "auto (the default: the file runs the best kernels of whichever machine opens it), native (this "
                  "machine's best, required wherever it runs), generic, x86-avx2, x86-avx512, x86-amx, arm64-dotprod or arm64-i8mm");
  cmd->add_option("--tokenizer", c->tokenizer, "tokenizer file, if not the model's own");
  cmd->add_option("--max-tokens", c->max_tokens, "tokens per step the memory plan is made for")->check(between(1, 4096));
  cmd->add_flag("--no-fuse", c->no_fuse, "skip the fusion passes");
  cmd->add_flag("--quantize-classifier", c->quantize_classifier,
                "store the classifier in the default scheme too (default: one step above it)");
  cmd->add_flag("--no-conformance", c->no_conformance,
                "skip the conformance report (the program against f32 on a built-in text, which holds the model twice)");
  cmd->add_option("--eval", c->eval, "a text file the conformance report also measures (its first 2048 tokens)");
  cmd->add_option("--calib", c->calib,
                  "plain text run through the f32 model; the integer weights are then rounded with its statistics (--method, "
                  "default gptq) instead of to nearest");
  cmd->add_option("--calib-tokens", c->calib_tokens, "calibration tokens used (default 512)")->check(between(64, 1 << 20));
  cmd->add_option("--imatrix", c->imatrix,
                  "llama.cpp's importance matrix (llama-imatrix output, GGUF or legacy .dat) as the statistics instead of --calib");
  cmd->add_option("--method", c->method,
                  "how the statistics round: gptq (each column's error compensated on the columns after it, from the "
                  "calibration inputs' second moments; needs --calib), imatrix (each group clipped to least "
                  "importance-weighted error), rtn (to nearest, no statistics); default: the best the statistics allow")
      ->check(CLI::IsMember({"rtn", "imatrix", "gptq"}));
  cmd->add_flag("--act-order", c->act_order,
                "gptq: round the input columns in order of their calibration second moment, largest first (each "
                "group's scale then chosen before the sweep)");
  add_threads_flag(cmd, c->threads);
  cmd->callback([c, &exit_code] { exit_code = compile(*c); });
}

}  // namespace kiln::cli
