// kiln ppl: perplexity of a model on a text file, so that the cost of each scheme is a number.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "core/mapped_file.h"
#include "engine/defaults.h"
#include "engine/perplexity.h"
#include "tools/generation_flags.h"
#include "tools/cli_common.h"

namespace kiln::cli {

namespace {

struct PplCmd {
  std::string model, file, tokenizer, scheme;  // scheme "": a source's own precision
  int n_ctx = 0;
  int threads = 0;
  std::string perf;
  std::string kv_type = "f32";
  bool json = false;
  bool scheme_given = false;
  bool second_half = false;
};

int ppl(const PplCmd& c) {
  if (c.n_ctx == 1) return usage_error("--ctx 1 is too short: perplexity needs a window of at least 2 tokens");
  OpenOptions oo;
  oo.tokenizer_path = c.tokenizer;
  if (!c.scheme.empty()) {
    auto q = source_scheme(c.scheme);
    if (!q) return usage_error(q.status().message());
    oo.quant = *q;
  }
  if (c.scheme_given)
    if (std::string e = kiln_file_fixes(c.model, "-q", "quantization"); !e.empty()) return usage_error(e);
  if (!c.tokenizer.empty())
    if (std::string e = kiln_file_fixes(c.model, "--tokenizer", "tokenizer"); !e.empty()) return usage_error(e);
  auto m = open_model(c.model, oo);
  if (!m) return fail(m.status());
  if (Status s = check_ctx_flag(c.n_ctx, m->model->config().max_seq_len, c.model); !s.is_ok()) return fail(s);
  auto text = read_text_file(c.file);
  if (!text) return fail(text.status());
  PerplexityOptions po;
  po.n_ctx = c.n_ctx;
  po.second_half = c.second_half;
  auto plan = thread_plan_for(c.perf, c.threads);
  if (!plan) return fail(plan.status());
  po.threads = plan->n_threads;
  std::fprintf(stderr, "kiln: %s\n", plan->summary.c_str());
  po.kv_dtype = kv_dtype(c.kv_type);
  auto r = perplexity(*m, *text, po);
  if (!r) return fail(r.status().with_context(c.file));
  if (c.json) std::printf("{\"ppl\": %.6f, \"tokens\": %lld}\n", r->ppl, static_cast<long long>(r->scored));
  else std::printf("perplexity %.4f over %lld tokens (context %d)\n", r->ppl, static_cast<long long>(r->scored), r->n_ctx);
  return 0;
}

}  // namespace

void add_ppl_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<PplCmd>();
  CLI::App* cmd = app.add_subcommand("ppl", "Perplexity of a model on a text file");
  cmd->add_option("model,-m,--model", c->model, ".kiln file or source model")->required();
  cmd->add_option("-f,--file", c->file, "text to score")->required();
  cmd->add_option("-c,--ctx,--ctx-size", c->n_ctx, "window length (default: min(model maximum, 512))")
      ->check(at_least(0));
  cmd->add_option("-q,--quant", c->scheme, "scheme for a source model compiled in memory (default: its own precision)")
      ->each([p = c.get()](const std::string&) { p->scheme_given = true; });
  cmd->add_option("--tokenizer", c->tokenizer, "tokenizer file, if not the model's own");
  add_threads_flag(cmd, c->threads);
  add_perf_flag(cmd, c->perf);
  add_kv_type_flag(cmd, c->kv_type);
  cmd->add_flag("--second-half", c->second_half,
                "score as llama-perplexity does: whole windows, BOS first, the second half of each scored");
  cmd->add_flag("--json", c->json, "print {\"ppl\": ..., \"tokens\": ...}");
  cmd->callback([c, &exit_code] { exit_code = ppl(*c); });
}

}  // namespace kiln::cli
