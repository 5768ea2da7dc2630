#include "engine/precision_tune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "engine/calibration.h"
#include "engine/compile_cache.h"
#include "engine/compile_file.h"
#include "engine/defaults.h"
#include "engine/model_compare.h"
#include "perf/process_memory.h"
#include "quant/overrides.h"
#include "runtime/model.h"
#include "tokenizer/tokenizer_source.h"

namespace kiln {

namespace {

using Json = nlohmann::ordered_json;

// The fields of a rule (or the file's top level) that give `p`; false where a top-level default
// cannot say it (the Q5 blocks of 32 have a name only rules take).
bool scheme_fields(const QuantParams& p, Json& j, const char* key) {
  if (is_4bit(p.scheme)) {
    j[key] = std::string(scheme_name(p.scheme));
    j["group_size"] = p.group_size;
    j["symmetric"] = p.symmetric;
  } else if (p.scheme == Scheme::kW8A16 && p.w8_group) {
    j[key] = "w8a16 g" + std::to_string(p.w8_group);
  } else if (p.scheme == Scheme::kW5A16 && p.w5_group == 32) {
    if (std::string_view(key) != "scheme") return false;
    j[key] = p.symmetric ? "q5_0" : "q5_1";
  } else {
    j[key] = std::string(scheme_name(p.scheme));
  }
  return true;
}

CompileOptions uniform_options(const CompileOptions& base, const QuantParams& p) {
  CompileOptions o = base;
  o.quant = OverridesFile{p, {}, /*auto_fallback=*/true};
  o.guard_classifier = true;  // as `kiln compile -q SCHEME` stores it
  o.importance = nullptr;
  o.progress = {};
  return o;
}

uint64_t image_weight_bytes(const ProgramImage& img) {
  uint64_t b = 0;
  for (const auto& w : img.weights) b += w.size();
  return b;
}

// What the sweep predicts for `p` given to every tensor as `kiln compile -q` does: the classifier
// one step above a non-float scheme, a tensor the groups do not fit at w8a16.
double predicted_uniform(const SweepResult& s, const QuantParams& p) {
  auto kl_at = [&](const TensorSensitivity& t, const QuantParams& q) -> double {
    for (size_t ci = 0; ci < s.candidates.size(); ++ci)
      if (t.fits[ci] && s.candidates[ci].params == canonical(q)) return t.kl[ci];
    return 0.0;  // not a candidate: counted as nothing (the report says predicted)
  };
  bool has_output = false;
  for (const TensorSensitivity& t : s.tensors) has_output |= t.op == "output";
  double kl = 0;
  for (const TensorSensitivity& t : s.tensors) {
    QuantParams q = p;
    const bool classifier = has_output ? t.op == "output" : t.op == "embedding";
    if (classifier && !is_float_scheme(p.scheme)) q = is_4bit(p.scheme) ? QuantParams{widen_to_w8(p.scheme)} : QuantParams{Scheme::kF16};
    size_t ci = 0;
    while (ci < s.candidates.size() && !(s.candidates[ci].params == canonical(q))) ++ci;
    if (ci < s.candidates.size() && !t.fits[ci]) q = QuantParams{widen_to_w8(q.scheme)};
    kl += kl_at(t, q);
  }
  return kl;
}

}  // namespace

std::string tuned_overrides_json(const SweepResult& s, const std::vector<int>& scheme_of, const std::string& comment) {
  // The default: the most common choice a top-level "default" can name.
  std::map<int, size_t> count;
  for (int c : scheme_of) ++count[c];
  int def = -1;
  for (const auto& [c, n] : count) {
    Json probe;
    if (!scheme_fields(s.candidates[static_cast<size_t>(c)].params, probe, "default")) continue;
    if (def < 0 || n > count[def]) def = c;
  }
  Json j;
  j["comment"] = comment;
  if (def >= 0) scheme_fields(s.candidates[static_cast<size_t>(def)].params, j, "default");
  j["auto_fallback"] = false;
  Json rules = Json::array();
  for (size_t t = 0; t < s.tensors.size(); ++t) {
    const TensorSensitivity& ts = s.tensors[t];
    const bool classifier = ts.op == "output" || ts.op == "embedding";  // never left to the classifier guard
    if (scheme_of[t] == def && !classifier) continue;
    Json r;
    r["match"] = ts.name;
    scheme_fields(s.candidates[static_cast<size_t>(scheme_of[t])].params, r, "scheme");
    rules.push_back(std::move(r));
  }
  j["rules"] = std::move(rules);
  return j.dump(1) + "\n";
}

Result<TuneResult> tune_precision(const TuneRequest& rq) {
  const auto t0 = std::chrono::steady_clock::now();
  const int budgets = (!rq.size.empty() ? 1 : 0) + (rq.bits_per_weight != 0 ? 1 : 0) + (rq.max_kl != 0 ? 1 : 0);
  if (budgets != 1) return invalid_argument("give one budget: --size BYTES|SCHEME, --bits-per-weight X or --max-kl X");
  if (rq.bits_per_weight != 0 && !(rq.bits_per_weight > 0 && rq.bits_per_weight <= 32))
    return invalid_argument("--bits-per-weight " + std::to_string(rq.bits_per_weight) + " is not in (0, 32]");
  if (rq.max_kl != 0 && !(rq.max_kl > 0 && std::isfinite(rq.max_kl)))
    return invalid_argument("--max-kl " + std::to_string(rq.max_kl) + " is not a positive number of nats");
  SweepOptions so;
  for (const std::string& c : rq.candidates) {
    KILN_ASSIGN_OR_RETURN(SweepCandidate sc, parse_sweep_candidate(c));
    so.candidates.push_back(std::move(sc));
  }
  if (rq.candidates.empty()) so.candidates = default_sweep_candidates();
  // A size that is not a number names a scheme.
  std::optional<uint64_t> size_bytes;
  std::optional<SweepCandidate> size_scheme;
  if (!rq.size.empty()) {
    if (auto b = parse_byte_size(rq.size)) size_bytes = *b;
    else {
      auto sc = parse_sweep_candidate(rq.size);
      if (!sc) return invalid_argument("--size '" + rq.size + "' is neither a size (bytes, 380M, 1.2G) nor a scheme: " + sc.status().message());
      size_scheme = *sc;
    }
  }
  KILN_ASSIGN_OR_RETURN(std::string calib_text, read_text_file(rq.calib));
  KILN_RETURN_IF_ERROR(check_calibration_text(calib_text, rq.calib));
  std::string eval_text = calib_text;
  TuneResult r;
  r.eval_name = std::filesystem::path(rq.calib).filename().string() + " (the calibration text)";
  if (!rq.eval.empty()) {
    KILN_ASSIGN_OR_RETURN(eval_text, read_text_file(rq.eval));
    KILN_RETURN_IF_ERROR(check_calibration_text(eval_text, rq.eval).with_context("--eval"));
    r.eval_name = std::filesystem::path(rq.eval).filename().string();
  }

  KILN_ASSIGN_OR_RETURN(Import imp, import_model(rq.model));
  CompileRequest base_rq;
  base_rq.model = rq.model;
  KILN_ASSIGN_OR_RETURN(CompileOptions o, compile_options(base_rq, imp));
  const int threads = compile_threads(rq.threads);
  o.threads = threads;
  // The budget against the smallest choice, before any run.
  KILN_ASSIGN_OR_RETURN(const CandidateBytes sizes, plan_candidates(imp, o, so.candidates));
  if (size_scheme) {
    KILN_ASSIGN_OR_RETURN(std::vector<WeightPlan> plan, plan_weights(imp, uniform_options(o, size_scheme->params), nullptr));
    uint64_t b = 0;
    for (const WeightPlan& wp : plan) b += wp.bytes;
    size_bytes = b;
  }
  ChoiceBudget budget;
  if (size_bytes) {
    budget.bytes = *size_bytes;
    r.budget = size_scheme ? "the size of uniform " + size_scheme->label : "--size " + rq.size;
  } else if (rq.bits_per_weight != 0) {
    budget.bytes = sizes.fixed_bytes + static_cast<uint64_t>(rq.bits_per_weight * static_cast<double>(sizes.parameters) / 8.0);
    char b[48];
    std::snprintf(b, sizeof b, "%g bits a weight", rq.bits_per_weight);
    r.budget = b;
  } else {
    budget.max_loss = rq.max_kl;
    char b[48];
    std::snprintf(b, sizeof b, "KL at most %g", rq.max_kl);
    r.budget = b;
  }
  if (budget.bytes && *budget.bytes < sizes.smallest) {
    char least[64];
    std::snprintf(least, sizeof least, "%.3f", 8.0 * static_cast<double>(sizes.smallest - sizes.fixed_bytes) /
                                                   static_cast<double>(std::max<uint64_t>(sizes.parameters, 1)));
    return invalid_argument(r.budget + " (" + std::to_string(*budget.bytes) + " weight bytes) is below the smallest the candidates allow (" +
                            std::to_string(sizes.smallest) + " bytes, " + least + " bits a weight: every weight at its smallest candidate)");
  }
  // The sweep runs the model in f32: refused before it starts where that cannot fit.
  if (const uint64_t ram = physical_memory_bytes(); ram > 0 && sizes.parameters * 4 > ram / 10 * 9) {
    char m[200];
    std::snprintf(m, sizeof m, "kiln tune runs the model in f32: %.1f GiB for its %llu weight parameters, more than this machine's %.1f GiB of memory",
                  static_cast<double>(sizes.parameters * 4) / (1 << 30), static_cast<unsigned long long>(sizes.parameters),
                  static_cast<double>(ram) / (1 << 30));
    return invalid_argument(m);
  }
  KILN_ASSIGN_OR_RETURN(ProgramImage reference, reference_image(imp, o));
  KILN_ASSIGN_OR_RETURN(std::vector<int> tokens, calibration_tokens(reference, calib_text, rq.calib, rq.calib_tokens, rq.model));

  if (rq.notify)
    rq.notify("measuring " + std::to_string(tokens.size()) + " calibration tokens: one f32 run, then one run per weight" +
              (rq.exact ? " and candidate" : "") + ", then the compiles");
  so.sizes = &sizes;  // planned above for the budget: not again
  so.exact = rq.exact;
  so.threads = threads;
  so.progress = rq.sweep_progress;
  KILN_ASSIGN_OR_RETURN(r.sweep, sweep_sensitivity(imp, o, reference, tokens, so));
  const SweepResult& s = r.sweep;

  std::vector<std::vector<ChoiceOption>> options;
  std::vector<std::vector<int>> index;  // option -> candidate
  for (const TensorSensitivity& t : s.tensors) {
    options.emplace_back();
    index.emplace_back();
    for (size_t ci = 0; ci < s.candidates.size(); ++ci)
      if (t.fits[ci]) {
        options.back().push_back({t.bytes[ci], t.kl[ci]});
        index.back().push_back(static_cast<int>(ci));
      }
    r.parameters += static_cast<uint64_t>(t.rows * t.cols);
  }
  r.budget_bytes = budget.bytes.value_or(0);
  auto choice = choose_under_budget(options, s.fixed_bytes, budget);
  if (!choice) {
    if (budget.bytes) return invalid_argument(r.budget + " is below the smallest the candidates allow: " + choice.status().message());
    return invalid_argument("--max-kl: " + choice.status().message() + " (predicted KL)");
  }
  r.choice = *choice;
  KILN_ASSIGN_OR_RETURN(BudgetChoice all, choose_under_budget(options, s.fixed_bytes, {UINT64_MAX, std::nullopt}));
  r.front = std::move(all.front);
  for (size_t t = 0; t < s.tensors.size(); ++t) r.scheme_of.push_back(index[t][static_cast<size_t>(r.choice.pick[t])]);
  char comment[256];
  std::snprintf(comment, sizeof comment, "kiln tune: %s; calibration %s (%lld tokens); predicted KL %.6f", r.budget.c_str(),
                std::filesystem::path(rq.calib).filename().string().c_str(), static_cast<long long>(s.tokens), r.choice.loss);
  r.overrides_json = tuned_overrides_json(s, r.scheme_of, comment);

  // Measured: the tuned file as `kiln compile --overrides` reads it, and the uniform compiles.
  KILN_ASSIGN_OR_RETURN(auto tok, tokenizer_from_blob(reference.tokenizer, tokenizer_where(reference.tokenizer, rq.model)));
  KILN_ASSIGN_OR_RETURN(std::vector<int> eval_tokens, tok->encode(eval_text, add_bos_by_default(*tok)));
  if (static_cast<int64_t>(eval_tokens.size()) > rq.max_eval_tokens) eval_tokens.resize(static_cast<size_t>(rq.max_eval_tokens));
  r.eval_tokens = static_cast<int64_t>(eval_tokens.size());
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Model> ref_model, Model::create(reference));
  auto measure = [&](const std::string& label, const CompileOptions& co, double predicted) -> Result<TuneMeasure> {
    TuneMeasure m;
    m.label = label;
    m.predicted_kl = predicted;
    const auto c0 = std::chrono::steady_clock::now();
    KILN_ASSIGN_OR_RETURN(ProgramImage img, compile_model(imp, co, nullptr));
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    m.bytes = image_weight_bytes(img);
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Model> model, Model::create(std::move(img)));
    CompareOptions cmp;
    cmp.threads = threads;
    KILN_ASSIGN_OR_RETURN(CompareResult c, compare_models(ref_model, model, eval_tokens, cmp));
    m.kl = c.kl;
    m.top1 = c.top1_agreement;
    m.ppl_reference = c.ppl_a;
    m.ppl = c.ppl_b;
    return m;
  };
  CompileOptions tuned = o;
  KILN_ASSIGN_OR_RETURN(tuned.quant, parse_overrides(r.overrides_json, "the tuned overrides", o.quant));
  tuned.overrides_path = "the tuned overrides";
  tuned.importance = nullptr;
  tuned.progress = {};
  KILN_ASSIGN_OR_RETURN(r.tuned, measure("tuned", tuned, r.choice.loss));
  std::vector<SweepCandidate> uniform;
  if (size_scheme) uniform.push_back(*size_scheme);
  if (rq.measure_uniform)
    for (const SweepCandidate& c : s.candidates)
      if (!size_scheme || !(c.params == size_scheme->params)) uniform.push_back(c);
  for (const SweepCandidate& c : uniform) {
    KILN_ASSIGN_OR_RETURN(TuneMeasure m, measure(c.label, uniform_options(o, c.params), predicted_uniform(s, c.params)));
    const size_t ci = static_cast<size_t>(std::find_if(s.candidates.begin(), s.candidates.end(),
                                                       [&](const SweepCandidate& x) { return x.params == c.params; }) -
                                          s.candidates.begin());
    for (const TensorSensitivity& t : s.tensors) m.fallbacks += ci < t.fits.size() && !t.fits[ci] ? 1 : 0;
    r.uniform.push_back(std::move(m));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace kiln
