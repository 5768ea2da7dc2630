#include "engine/sensitivity_sweep.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>

#include "backends/registry.h"
#include "compiler/passes.h"
#include "core/thread_pool.h"
#include "engine/calibration.h"
#include "graph/weight_params.h"
#include "perf/token_stats.h"
#include "quant/scheme_flag.h"
#include "quant/weight_quantizer.h"
#include "runtime/session.h"

namespace kiln {

std::vector<SweepCandidate> default_sweep_candidates() {
  QuantParams q5{Scheme::kW5A16, 0, true};
  q5.w5_group = 32;
  QuantParams q8{Scheme::kW8A16};
  q8.w8_group = 32;
  std::vector<SweepCandidate> c = {{"w4a16 g128", {Scheme::kW4A16, 128, true}}, {"w4a16 g64", {Scheme::kW4A16, 64, true}},
                                   {"w4a16 g32", {Scheme::kW4A16, 32, true}},   {"q4_k", {Scheme::kW4A16, 256, false}},
                                   {"q5_0", q5},                                {"q6_k", {Scheme::kW6A16, 0, true}},
                                   {"w8a16", {Scheme::kW8A16}},                 {"q8_0", q8},
                                   {"f16", {Scheme::kF16}}};
  for (SweepCandidate& x : c) x.params = canonical(x.params);  // as weight_params reads them back
  return c;
}

Result<SweepCandidate> parse_sweep_candidate(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string name, word;
  in >> name;
  int group = 32;
  bool group_given = false, symmetric = true;
  while (in >> word) {
    if (word == "asym") symmetric = false;
    else if (word == "sym") symmetric = true;
    else if (word.size() > 1 && word[0] == 'g' && word.find_first_not_of("0123456789", 1) == std::string::npos && word.size() <= 4)
      group = std::stoi(word.substr(1)), group_given = true;
    else
      return invalid_argument("candidate '" + std::string(text) + "': '" + word + "' is not a group (g32, g64, g128) or asym");
  }
  if (name.empty()) return invalid_argument("an empty candidate scheme");
  std::string flag = name;
  if (group_given && parse_scheme_flag(name, 32, true) && parse_scheme_flag(name, 32, true)->scheme == Scheme::kW8A16)
    flag += " g" + std::to_string(group), group = 32;
  auto p = parse_scheme_flag(flag, group, symmetric);
  if (!p) return p.status().with_context("candidate '" + std::string(text) + "'");
  if (quantizes_activations(p->scheme))
    return invalid_argument("candidate '" + std::string(text) + "': " + std::string(scheme_name(p->scheme)) +
                            " stores the bytes of its a16 twin and only adds the activations' rounding, so no size "
                            "budget prefers it; tune chooses among weight-only schemes");
  KILN_RETURN_IF_ERROR(validate_params(*p).with_context("candidate '" + std::string(text) + "'"));
  return SweepCandidate{std::string(text), canonical(*p)};
}

namespace {

// Rounds w ([rows][cols]) to p and back to f32, the rows cut across the pool; returns the error
// weighted per column by `weight` (null: 1), summed over rows.
Result<double> round_trip(const QuantParams& p, const std::vector<float>& w, int64_t rows, int64_t cols,
                          const std::vector<float>* weight, ThreadPool& pool, std::vector<float>& back) {
  const auto row_bytes = quantized_row_size(p, cols);
  if (!row_bytes) return invalid_argument(describe(p) + " does not fit " + std::to_string(cols) + " columns");
  back.resize(w.size());
  std::vector<double> err(static_cast<size_t>(pool.size()), 0.0);
  std::vector<Status> fail(static_cast<size_t>(pool.size()));
  pool.parallel_for(rows, [&](int64_t r0, int64_t r1, int t) {
    const int64_t n = r1 - r0;
    std::vector<uint8_t> q(static_cast<size_t>(*row_bytes * static_cast<uint64_t>(n)));
    const float* src = w.data() + r0 * cols;
    float* dst = back.data() + r0 * cols;
    Status s = round_to_nearest().quantize(p, src, n, cols, q);
    if (s) s = dequantize_matrix(p, q, n, cols, dst);
    if (!s) {
      fail[static_cast<size_t>(t)] = s;
      return;
    }
    double e = 0;
    for (int64_t i = 0; i < n * cols; ++i) {
      const double d = static_cast<double>(src[i]) - dst[i];
      e += (weight ? (*weight)[static_cast<size_t>(i % cols)] : 1.0) * d * d;
    }
    err[static_cast<size_t>(t)] = e;
  });
  double e = 0;
  for (size_t t = 0; t < err.size(); ++t) {
    if (!fail[t]) return fail[t];
    e += err[t];
  }
  return e;
}

}  // namespace

Result<CandidateBytes> plan_candidates(const Import& imp, const CompileOptions& options,
                                       const std::vector<SweepCandidate>& candidates) {
  CandidateBytes cb;
  const size_t nc = candidates.size();
  auto& planned = cb.per_weight;
  std::vector<std::string> matmuls;
  std::map<std::string, int64_t> cols;
  // A weight a candidate does not fit falls back to 8 bits in the plan: marked as not fitting.
  for (size_t ci = 0; ci < nc; ++ci) {
    CompileOptions po = options;
    po.quant = OverridesFile{candidates[ci].params, {}, /*auto_fallback=*/true};
    po.guard_classifier = false;
    po.fuse = false;
    po.importance = nullptr;
    po.progress = {};
    KILN_ASSIGN_OR_RETURN(std::vector<WeightPlan> plan, plan_weights(imp, po, nullptr));
    for (const WeightPlan& wp : plan) {
      const std::string& name = wp.weight.name;
      const size_t at = name.find('@');
      const std::string base = name.substr(0, at);
      auto& v = planned[base];
      v.resize(nc);
      if (at != std::string::npos) {  // a second copy in another layout: its bytes count too
        if (v[ci]) *v[ci] += wp.bytes;
        continue;
      }
      if (wp.weight.shape.size() != 2) {
        if (ci == 0) cb.fixed_bytes += wp.bytes;
        continue;
      }
      if (ci == 0) {
        matmuls.push_back(name);
        cols[name] = wp.weight.shape[1];
        cb.parameters += static_cast<uint64_t>(wp.weight.shape[0] * wp.weight.shape[1]);
      }
      KILN_ASSIGN_OR_RETURN(QuantParams got, weight_params(wp.weight));
      if (canonical(got) == candidates[ci].params) v[ci] = wp.bytes;
    }
  }

  // Before the runs: every weight chosen for has a candidate its shape takes.
  cb.smallest = cb.fixed_bytes;
  for (const std::string& name : matmuls) {
    const auto p = planned.find(name);
    if (p == planned.end() || std::none_of(p->second.begin(), p->second.end(), [](const auto& b) { return b.has_value(); })) {
      std::string names;
      for (const SweepCandidate& c : candidates) names += (names.empty() ? "" : ", ") + c.label;
      return invalid_argument("weight '" + name + "' (" + std::to_string(cols[name]) + " columns) fits none of the candidates (" +
                              names + "): add one that fits any width, as w8a16 or f16");
    }
    uint64_t least = UINT64_MAX;
    for (const auto& b : p->second)
      if (b) least = std::min(least, *b);
    cb.smallest += least;
  }
  return cb;
}

Result<SweepResult> sweep_sensitivity(const Import& imp, const CompileOptions& options, const ProgramImage& reference,
                                      std::span<const int> tokens, const SweepOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  SweepResult r;
  r.candidates = o.candidates.empty() ? default_sweep_candidates() : o.candidates;
  r.tokens = static_cast<int64_t>(tokens.size());
  const size_t nc = r.candidates.size();
  CandidateBytes own;
  if (!o.sizes) {
    KILN_ASSIGN_OR_RETURN(own, plan_candidates(imp, options, r.candidates));
  }
  const CandidateBytes& cb = o.sizes ? *o.sizes : own;
  r.fixed_bytes = cb.fixed_bytes;
  const auto& planned = cb.per_weight;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Model> ref_model, Model::create(reference));
  const size_t vocab = static_cast<size_t>(ref_model->config().vocab_size);
  std::vector<float> ref_logits;
  KILN_ASSIGN_OR_RETURN(ImportanceStats stats, importance_of_run(ref_model, tokens, o.threads, false, &ref_logits));
  r.reference_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int n_ctx = calibration_window(*ref_model);

  // KL(reference || the model with weight wi replaced by `values`), mean over every row.
  auto measure = [&](size_t wi, const std::vector<float>& values) -> Result<double> {
    const WeightDesc& w = reference.program.graph.weights[wi];
    auto packed = std::make_shared<std::vector<uint8_t>>();
    KILN_RETURN_IF_ERROR(pack_weight(
        w, {reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float)}, *packed));
    ProgramImage img = reference;
    img.weights[wi] = std::span<const uint8_t>(packed->data(), packed->size());
    img.owners.push_back(packed);
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<const Model> m, Model::create(std::move(img)));
    KILN_ASSIGN_OR_RETURN(auto session, Session::create(m, n_ctx, o.threads, DType::kF32));
    double kl = 0;
    KILN_RETURN_IF_ERROR(run_windows(*session, tokens, [&](size_t first, size_t rows, std::span<const float> logits) {
      for (size_t i = 0; i < rows; ++i)
        kl += kl_divergence(ref_logits.data() + (first + i) * vocab, logits.data() + i * vocab, vocab);
    }));
    ++r.runs;
    return std::max(0.0, kl / static_cast<double>(tokens.size()));  // rounding can leave -1e-12
  };

  const Graph& g = reference.program.graph;
  std::vector<size_t> chosen;
  for (size_t wi = 0; wi < g.weights.size(); ++wi)
    if (g.weights[wi].shape.size() == 2 && g.weights[wi].name.find('@') == std::string::npos) chosen.push_back(wi);
  const size_t runs_total = chosen.size() * (o.exact ? nc : 1);
  ThreadPool pool(std::max(1, o.threads));
  std::vector<uint8_t> raw;
  std::vector<float> w, back;
  for (size_t k = 0; k < chosen.size(); ++k) {
    const size_t wi = chosen[k];
    const WeightDesc& wd = g.weights[wi];
    const WeightRef ref = weight_ref(wd);
    TensorSensitivity t;
    t.name = wd.name;
    t.op = ref.op;
    t.layer = ref.layer;
    t.rows = ref.rows;
    t.cols = ref.cols;
    t.fits.assign(nc, false);
    t.bytes.assign(nc, 0);
    t.error.assign(nc, 0.0);
    t.kl.assign(nc, 0.0);
    t.measured.assign(nc, false);
    KILN_RETURN_IF_ERROR(unpack_weight(wd, reference.weights[wi], raw));
    if (raw.size() != static_cast<size_t>(t.rows * t.cols) * sizeof(float))
      return invalid_argument("weight '" + wd.name + "' is not f32 in the reference program");
    w.resize(static_cast<size_t>(t.rows * t.cols));
    std::memcpy(w.data(), raw.data(), raw.size());
    const auto s = stats.per_weight.find(wd.name);
    const std::vector<float>* imp_w =
        s != stats.per_weight.end() && s->second.size() == static_cast<size_t>(t.cols) ? &s->second : nullptr;
    auto p = planned.find(wd.name);
    int cheapest = -1;
    for (size_t ci = 0; ci < nc; ++ci) {
      if (p == planned.end() || ci >= p->second.size() || !p->second[ci]) continue;
      t.fits[ci] = true;
      t.bytes[ci] = *p->second[ci];
      if (cheapest < 0 || t.bytes[ci] < t.bytes[static_cast<size_t>(cheapest)]) cheapest = static_cast<int>(ci);
    }
    if (cheapest < 0) return invalid_argument("weight '" + wd.name + "' fits none of the candidates");
    for (size_t ci = 0; ci < nc; ++ci) {
      if (!t.fits[ci]) continue;
      KILN_ASSIGN_OR_RETURN(t.error[ci], round_trip(r.candidates[ci].params, w, t.rows, t.cols, imp_w, pool, back));
      if (o.exact || static_cast<int>(ci) == cheapest) {
        KILN_ASSIGN_OR_RETURN(t.kl[ci], measure(wi, back));
        t.measured[ci] = true;
        if (o.progress) o.progress(static_cast<double>(r.runs) / static_cast<double>(runs_total));
      }
    }
    // The others: the cheapest's KL scaled by their weighted error against its.
    const double e0 = t.error[static_cast<size_t>(cheapest)], kl0 = t.kl[static_cast<size_t>(cheapest)];
    for (size_t ci = 0; ci < nc; ++ci)
      if (t.fits[ci] && !t.measured[ci]) t.kl[ci] = e0 > 0 ? kl0 * t.error[ci] / e0 : 0.0;
    r.tensors.push_back(std::move(t));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace kiln
