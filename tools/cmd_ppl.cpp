// kiln ppl: perplexity of a model on a text file, so that the cost of each scheme is a number.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "core/mapped_file.h"
#include "engine/defaults.h"
#include "engine/kl_divergence.h"
#include "engine/perplexity.h"
#include "tools/generation_flags.h"
#include "tools/cli_common.h"

namespace kiln::cli {

namespace {

struct PplCmd {
  std::string model, file, tokenizer, scheme;  // scheme "": a source's own precision
  CacheFlags cache;                            // --cache-dir, --no-cache
  int n_ctx = 0;
  int threads = 0, group = 32;
  std::string perf;
  std::string kv_type = "f32";
  bool json = false;
  bool scheme_given = false;
  bool second_half = false;
  std::string kl_base;  // --kl-divergence FILE
};

// Against llama-perplexity's saved logits: its tokens, its windows.
int kl_against_llama(const PplCmd& c, const OpenedModel& m, const PerplexityOptions& po) {
  auto file = MappedFile::open(c.kl_base);
  if (!file) return fail(file.status());
  auto base = read_llama_logits(*file);
  if (!base) return fail(base.status());
  auto r = kl_divergence_against(m, *base, po);
  if (!r) return fail(r.status());
  if (c.json) {
    std::printf("{\"ppl\": %.6f, \"llama_ppl\": %.6f, \"mean_kld\": %.8f, \"max_kld\": %.8f, \"same_top\": %.6f, "
                "\"nmse\": %.6g, \"tokens\": %lld, \"n_ctx\": %d}\n",
                r->ppl, r->base_ppl, r->mean_kld, r->max_kld, r->same_top, r->nmse, static_cast<long long>(r->scored), base->n_ctx);
  } else {
    std::printf("against llama.cpp's logits in %s (%d chunks of %d, the second half of each scored, %lld tokens):\n",
                c.kl_base.c_str(), base->n_chunk, base->n_ctx, static_cast<long long>(r->scored));
    std::printf("  KL divergence mean %.6f, max %.6f nats; same top token %.2f %%; log-probability NMSE %.3g; perplexity %.4f "
                "(llama.cpp %.4f, %+.2f %%)\n",
                r->mean_kld, r->max_kld, 100 * r->same_top, r->nmse, r->ppl, r->base_ppl, 100 * (r->ppl / r->base_ppl - 1));
  }
  return 0;
}

int ppl(const PplCmd& c) {
  if (c.kl_base.empty() == c.file.empty())
    return usage_error(c.file.empty() ? "give the text to score with -f FILE (or --kl-divergence FILE)"
                                      : "--kl-divergence runs the tokens saved in its file: -f is not used with it");
  if (!c.kl_base.empty() && (c.n_ctx > 0 || c.second_half))
    return usage_error("--kl-divergence scores llama-perplexity's own windows: --ctx and --second-half are not used with it");
  if (c.n_ctx == 1) return usage_error("--ctx 1 is too short: perplexity needs a window of at least 2 tokens");
  OpenOptions oo;
  oo.tokenizer_path = c.tokenizer;
  oo.cache = cache_options(c.cache);
  if (!c.scheme.empty()) {
    auto q = source_scheme(c.scheme, c.group);
    if (!q) return usage_error(q.status().message());
    oo.quant = *q;
  }
  if (c.scheme_given)
    if (std::string e = kiln_file_fixes(c.model, "-q", "quantization"); !e.empty()) return usage_error(e);
  if (!c.tokenizer.empty())
    if (std::string e = kiln_file_fixes(c.model, "--tokenizer", "tokenizer"); !e.empty()) return usage_error(e);
  auto m = open_model(c.model, oo);
  if (!m) return fail(m.status());
  print_notes(m->notes);
  if (Status s = check_ctx_flag(c.n_ctx, m->model->config().max_seq_len, c.model); !s.is_ok()) return fail(s);
  PerplexityOptions po;
  po.n_ctx = c.n_ctx;
  po.second_half = c.second_half;
  auto plan = thread_plan_for(c.perf, c.threads);
  if (!plan) return fail(plan.status());
  po.threads = plan->n_threads;
  std::fprintf(stderr, "kiln: %s\n", plan->summary.c_str());
  po.kv_dtype = kv_dtype(c.kv_type);
  if (!c.kl_base.empty()) return kl_against_llama(c, *m, po);
  auto text = read_text_file(c.file);
  if (!text) return fail(text.status());
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
  add_cache_flags(cmd, c->cache);
  cmd->add_option("-f,--file", c->file, "text to score");
  cmd->add_option("-c,--ctx,--ctx-size", c->n_ctx, "window length (default: min(model maximum, 512))")
      ->check(at_least(0));
  cmd->add_option("-q,--quant", c->scheme, "scheme for a source model compiled in memory (default: its own precision)")
      ->each([p = c.get()](const std::string&) { p->scheme_given = true; });
  cmd->add_option("--group", c->group, kGroupHelp)->check(group_size())->each([p = c.get()](const std::string&) { p->scheme_given = true; });
  cmd->add_option("--tokenizer", c->tokenizer, "tokenizer file, if not the model's own");
  add_threads_flag(cmd, c->threads);
  add_perf_flag(cmd, c->perf);
  add_kv_type_flag(cmd, c->kv_type);
  cmd->add_flag("--second-half", c->second_half,
                "score as llama-perplexity does: whole windows, BOS first, the second half of each scored");
  cmd->add_option("--kl-divergence", c->kl_base,
                  "llama-perplexity's saved logits (its --kl-divergence-base FILE): KL divergence, same top token and "
                  "perplexity of this model against llama.cpp's on the same tokens");
  cmd->add_flag("--json", c->json, "print {\"ppl\": ..., \"tokens\": ...}");
  cmd->callback([c, &exit_code] { exit_code = ppl(*c); });
}

}  // namespace kiln::cli
