#include "engine/conformance.h"

#include <algorithm>

#include "engine/defaults.h"
#include "engine/model_compare.h"
#include "engine/open_model.h"
#include "runtime/model.h"
#include "tokenizer/tokenizer_source.h"

namespace kiln {

const std::string_view kConformanceText =
    "The old lighthouse keeper climbed the stairs every evening at dusk. From the top he could see the "
    "fishing boats coming home, their lamps swinging over the dark water. In winter the storms were "
    "fierce, and the waves broke against the rocks below with a sound like distant thunder. He kept a "
    "small notebook in which he wrote the names of the ships, the direction of the wind, and the time "
    "the light was lit. When asked why, he said that a record kept carefully is a kind of promise.\n"
    "def mean(values):\n    return sum(values) / len(values) if values else 0.0\n";

namespace {

bool all_f32(const ProgramImage& img) {
  for (const WeightDesc& w : img.program.graph.weights)
    if (w.scheme != Scheme::kF32) return false;
  return true;
}

Result<ConformanceText> measure_text(std::shared_ptr<const Model> reference, std::shared_ptr<const Model> compiled,
                                     const Tokenizer& tok, std::string_view text, std::string name,
                                     int64_t max_tokens, int threads) {
  ConformanceText t;
  t.name = std::move(name);
  // The tokens `kiln compare` and `kiln ppl` run: BOS first where the tokenizer has one.
  KILN_ASSIGN_OR_RETURN(std::vector<int> tokens, tok.encode(text, add_bos_by_default(tok)));
  const std::string back = tok.decode(tokens);
  t.round_trip = back == text;
  if (!t.round_trip) {
    const auto [a, b] = std::mismatch(back.begin(), back.end(), text.begin(), text.end());
    t.round_trip_mismatch = static_cast<int64_t>(b - text.begin());
  }
  if (static_cast<int64_t>(tokens.size()) > max_tokens) tokens.resize(static_cast<size_t>(max_tokens));
  CompareOptions o;
  o.threads = threads;
  auto r = compare_models(std::move(reference), std::move(compiled), tokens, o);
  if (!r) return r.status().with_context("conformance on the " + t.name + " text");
  t.tokens = r->tokens;
  t.scored = r->scored;
  t.n_ctx = r->n_ctx;
  t.top1_agreement = r->top1_agreement;
  t.kl = r->kl;
  t.max_kl = r->max_kl;
  t.ppl_reference = r->ppl_a;
  t.ppl_quantized = r->ppl_b;
  for (size_t i = 0; i < r->ranked.size() && i < 3; ++i) {
    const LayerDelta& d = r->layers[static_cast<size_t>(r->ranked[i])];
    t.worst_layers.push_back({d.layer, d.added_error, d.relative_error});
  }
  return t;
}

}  // namespace

Result<ConformanceReport> measure_conformance(const Import& imp, const CompileOptions& compiled_with,
                                              const ProgramImage& compiled, const std::string& source_path,
                                              const ConformanceOptions& o) {
  KILN_ASSIGN_OR_RETURN(auto tok, tokenizer_from_blob(compiled.tokenizer, tokenizer_where(compiled.tokenizer, source_path)));
  // The image's weights are spans into buffers its owners keep alive: the copy shares them.
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Model> quantized, Model::create(compiled));
  std::shared_ptr<const Model> reference = quantized;
  if (!all_f32(compiled)) {
    CompileOptions f32 = compiled_with;
    f32.quant = f32_overrides();
    f32.guard_classifier = false;
    f32.progress = {};
    KILN_ASSIGN_OR_RETURN(ProgramImage ref, compile_model(imp, f32, nullptr));
    KILN_ASSIGN_OR_RETURN(reference, Model::create(std::move(ref)));
  }
  ConformanceReport report;
  KILN_ASSIGN_OR_RETURN(ConformanceText builtin, measure_text(reference, quantized, *tok, kConformanceText, "built-in",
                                                              o.max_eval_tokens, o.threads));
  report.texts.push_back(std::move(builtin));
  if (!o.eval_name.empty()) {
    KILN_ASSIGN_OR_RETURN(ConformanceText eval, measure_text(reference, quantized, *tok, o.eval_text, o.eval_name,
                                                             o.max_eval_tokens, o.threads));
    report.texts.push_back(std::move(eval));
  }
  return report;
}

}  // namespace kiln
