// kiln compare: two compiles of one model on the same text, layer by layer (engine/model_compare.h):
// what a user reads before writing an overrides file.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "engine/defaults.h"
#include "engine/open_model.h"
#include "engine/model_compare.h"
#include "tools/cli_common.h"
#include "tools/generation_flags.h"

namespace kiln::cli {

namespace {

struct CompareCmd {
  std::string a, b, file, tokenizer, quant_a = "f32", quant_b = "f32";
  std::string text = "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun.";
  int group = 32, n_ctx = 0, threads = 0;
  std::string perf;
  bool json = false;
};

Result<OpenedModel> open_side(const CompareCmd& c, const std::string& path, const std::string& scheme) {
  OpenOptions oo;
  oo.tokenizer_path = c.tokenizer;
  KILN_ASSIGN_OR_RETURN(oo.quant, source_scheme(scheme, c.group));
  return open_model(path, oo);
}

int compare(const CompareCmd& c) {
  auto a = open_side(c, c.a, c.quant_a);
  if (!a) return fail(a.status().with_context("A"));
  auto b = open_side(c, c.b, c.quant_b);
  if (!b) return fail(b.status().with_context("B"));
  std::string text = c.text;
  if (!c.file.empty()) {
    auto t = read_text_file(c.file);
    if (!t) return fail(t.status());
    text = std::move(*t);
  }
  // A's tokenizer, with the BOS rule of `kiln ppl`.
  auto tokens = a->tokenizer->encode(text, add_bos_by_default(*a->tokenizer));
  if (!tokens) return fail(tokens.status());
  // Every command's thread default, the C API's: --perf (balanced when not given) picks.
  auto plan = thread_plan_for(c.perf, c.threads);
  if (!plan) return fail(plan.status());
  std::fprintf(stderr, "kiln: %s\n", plan->summary.c_str());
  CompareOptions o;
  o.n_ctx = c.n_ctx;
  o.threads = plan->n_threads;
  auto r = compare_models(a->model, b->model, *tokens, o);
  if (!r) return fail(r.status());
  if (c.json) {
    nlohmann::ordered_json j{{"a", c.a}, {"b", c.b}, {"tokens", r->tokens}, {"scored", r->scored}, {"n_ctx", r->n_ctx},
                             {"ppl_a", r->ppl_a}, {"ppl_b", r->ppl_b}, {"ppl_delta", r->ppl_b / r->ppl_a - 1},
                             {"top1_agreement", r->top1_agreement}, {"kl", r->kl}, {"max_kl", r->max_kl}};
    j["layers"] = nlohmann::ordered_json::array();
    for (const LayerDelta& d : r->layers)
      j["layers"].push_back({{"layer", d.layer}, {"value", d.value}, {"cosine", d.cosine}, {"min_cosine", d.min_cosine},
                             {"relative_error", d.relative_error}, {"added_error", d.added_error}});
    j["ranked"] = r->ranked;
    std::printf("%s\n", j.dump(2).c_str());
    return finish_stdout(0);
  }
  std::printf("A %s\nB %s\n%lld tokens (%lld scored, windows of %d)\n", c.a.c_str(), c.b.c_str(),
              static_cast<long long>(r->tokens), static_cast<long long>(r->scored), r->n_ctx);
  std::printf("perplexity A %.4f, B %.4f (%+.2f %%); top-1 agreement %.2f %%; KL(A||B) mean %.6f, max %.6f nats\n",
              r->ppl_a, r->ppl_b, 100 * (r->ppl_b / r->ppl_a - 1), 100 * r->top1_agreement, r->kl, r->max_kl);
  std::printf("%-6s %-16s %10s %10s %12s %12s\n", "layer", "hidden state", "cosine", "min cos", "rel. error", "added");
  for (const LayerDelta& d : r->layers)
    std::printf("%-6d %-16s %10.6f %10.6f %12.6f %+12.6f\n", d.layer, d.value.c_str(), d.cosine, d.min_cosine,
                d.relative_error, d.added_error);
  std::printf("layers by added error:");
  for (int l : r->ranked) std::printf(" %d", l);
  std::printf("\n");
  return finish_stdout(0);
}

}  // namespace

void add_compare_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<CompareCmd>();
  CLI::App* cmd = app.add_subcommand("compare", "Two compiles of one model on the same text, layer by layer (e.g. f32 against w4a16)");
  cmd->add_option("a", c->a, "model A, the reference (.kiln or source)")->required();
  cmd->add_option("b", c->b, "model B, compared with A")->required();
  cmd->add_option("-f,--file", c->file, "text to run (default: a built-in sentence)");
  cmd->add_option("--quant-a", c->quant_a, "scheme for A when it is a source compiled in memory");
  cmd->add_option("--quant-b", c->quant_b, "scheme for B when it is a source compiled in memory");
  cmd->add_option("--group", c->group, kGroupHelp)->check(group_size());
  cmd->add_option("-c,--ctx,--ctx-size", c->n_ctx, "window length (default: min(model maximum, 512), as kiln ppl)")->check(at_least(0));
  add_threads_flag(cmd, c->threads);
  add_perf_flag(cmd, c->perf);
  cmd->add_option("--tokenizer", c->tokenizer, "tokenizer file, if not the models' own");
  cmd->add_flag("--json", c->json, "print one JSON object");
  cmd->callback([c, &exit_code] { exit_code = compare(*c); });
}

}  // namespace kiln::cli
