// kiln ppl: perplexity of a model on a text file, so that the cost of each scheme is a number.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>

#include "core/mapped_file.h"
#include "runtime/program_session.h"
#include "tools/cli_common.h"
#include "tools/model_open.h"

namespace kiln::cli {

namespace {

struct PplCmd {
  std::string model, file, tokenizer, scheme = "f32";
  int n_ctx = 0;
  int threads = 1;
  std::string kv_type = "f32";
  bool json = false;
};

int ppl(const PplCmd& c) {
  OpenOptions oo;
  oo.tokenizer_path = c.tokenizer;
  auto q = overrides_from_flags(c.scheme);
  if (!q) return fail(q.status());
  oo.quant = *q;
  auto m = open_model(c.model, oo);
  if (!m) return fail(m.status());
  auto text = read_text_file(c.file);
  if (!text) return fail(text.status());
  auto ids = m->tokenizer->encode(*text, /*add_bos=*/m->tokenizer->bos_id() >= 0);
  if (!ids) return fail(ids.status());
  const ModelConfig& cfg = m->model->config();
  const int ctx = c.n_ctx > 0 ? std::min(c.n_ctx, cfg.max_seq_len) : std::min(cfg.max_seq_len, 512);
  auto session = ProgramSession::create(m->model, ctx, c.threads, kv_dtype(c.kv_type));
  if (!session) return fail(session.status());
  ProgramSession& s = **session;
  // Windows of ctx tokens; in each, every token after the first is scored against the logits
  // of the token before it.
  double nll = 0;
  int64_t scored = 0;
  const auto& tokens = *ids;
  const auto vocab = static_cast<size_t>(cfg.vocab_size);
  for (size_t start = 0; start + 1 < tokens.size(); start += static_cast<size_t>(ctx)) {
    const size_t end = std::min(tokens.size(), start + static_cast<size_t>(ctx));
    s.reset();
    for (size_t i = start; i < end; i += static_cast<size_t>(s.max_logit_rows())) {
      const size_t n = std::min(end - i, static_cast<size_t>(s.max_logit_rows()));
      auto logits = s.decode_all(std::span<const int>(tokens).subspan(i, n));
      if (!logits) return fail(logits.status());
      for (size_t t = 0; t < n && i + t + 1 < end; ++t) {
        const float* l = logits->data() + t * vocab;
        double mx = l[0];
        for (size_t v = 1; v < vocab; ++v) mx = std::max(mx, static_cast<double>(l[v]));
        double sum = 0;
        for (size_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(l[v]) - mx);
        const int target = tokens[i + t + 1];
        nll += -(static_cast<double>(l[target]) - mx - std::log(sum));
        ++scored;
      }
    }
  }
  if (scored == 0) return fail(invalid_argument(c.file + ": too short to score (needs at least two tokens)"));
  const double p = std::exp(nll / static_cast<double>(scored));
  if (c.json) std::printf("{\"ppl\": %.6f, \"tokens\": %lld}\n", p, static_cast<long long>(scored));
  else std::printf("perplexity %.4f over %lld tokens (context %d)\n", p, static_cast<long long>(scored), ctx);
  return 0;
}

}  // namespace

void add_ppl_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<PplCmd>();
  CLI::App* cmd = app.add_subcommand("ppl", "Perplexity of a model on a text file");
  cmd->add_option("model", c->model, ".kiln file or source model")->required();
  cmd->add_option("--file", c->file, "text to score")->required();
  cmd->add_option("--ctx", c->n_ctx, "window length (default: min(model maximum, 512))");
  cmd->add_option("-q,--quant", c->scheme, "scheme for a source model compiled in memory (default f32)");
  cmd->add_option("--tokenizer", c->tokenizer, "tokenizer file, if not the model's own");
  cmd->add_option("--threads", c->threads, "worker threads")->check(CLI::Range(1, 256));
  add_kv_type_flag(cmd, c->kv_type);
  cmd->add_flag("--json", c->json, "print {\"ppl\": ..., \"tokens\": ...}");
  cmd->callback([c, &exit_code] { exit_code = ppl(*c); });
}

}  // namespace kiln::cli
