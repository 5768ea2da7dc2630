#include "engine/profile_run.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "perf/bandwidth.h"
#include "perf/compute_probe.h"
#include "perf/sample_stats.h"
#include "runtime/session.h"
#include "runtime/step_trace.h"

namespace kiln {

namespace {

// The prompt (fixed pseudo-random tokens, as `kiln bench`'s) and greedy decoding after it.
Status run_workload(Session& s, const std::vector<int>& prompt, int n_gen) {
  s.reset();
  std::span<const float> logits;
  KILN_ASSIGN_OR_RETURN(logits, s.decode(prompt));
  for (int i = 0; i < n_gen; ++i) {
    const int next = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    KILN_ASSIGN_OR_RETURN(logits, s.decode(std::span<const int>(&next, 1)));
  }
  return Status::ok();
}

// The tracer's own cost: decode steps timed with the tracer off and at `level`, alternated token
// by token in one session (so that a shared machine's drift falls on both alike).
Result<TracerOverhead> measure_overhead(Session& s, const std::vector<int>& prompt, int steps, ProfileLevel level) {
  StepTracer t(level);
  std::vector<double> off, on;
  std::span<const float> logits;
  s.reset();
  KILN_ASSIGN_OR_RETURN(logits, s.decode(prompt));
  for (int i = 0; i < 2 * steps && s.position() < s.n_ctx(); ++i) {
    const bool traced = i % 2 == 1;
    s.set_tracer(traced ? &t : nullptr);
    const int next = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    const auto t0 = std::chrono::steady_clock::now();
    KILN_ASSIGN_OR_RETURN(logits, s.decode(std::span<const int>(&next, 1)));
    (traced ? on : off).push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  s.set_tracer(nullptr);
  // Each traced step against the mean of the untraced steps on either side of it: a step grows
  // with the context (attention), so neighbours are the fair pair; the median of those ratios.
  std::vector<double> ratios;
  for (size_t i = 0; i + 1 < off.size() && i < on.size(); ++i)
    if (off[i] + off[i + 1] > 0) ratios.push_back(2 * on[i] / (off[i] + off[i + 1]));
  TracerOverhead r;
  r.off_seconds = median_of(off);
  r.on_seconds = median_of(on);
  r.paired_ratio = ratios.empty() ? 1.0 : median_of(ratios);
  r.steps = on.size();
  return r;
}

Result<Ceilings> measure_ceilings(const ProfileRunOptions& o, const Profile& p, const Model& model) {
  Ceilings out;
  BandwidthOptions bo;
  bo.bytes = o.bandwidth_bytes;
  bo.threads = o.n_threads;
  bo.passes = o.bandwidth_passes;
  KILN_ASSIGN_OR_RETURN(BandwidthResult bw, measure_read_bandwidth(bo));
  out.bandwidth_gbs = bw.median_gbs;
  ComputeProbe probe(model, o.n_threads);
  for (const auto& key : needed_rates(p)) {
    auto r = probe.rate(std::get<0>(key), std::get<1>(key), std::get<2>(key));
    if (r) out.product_rate[key] = *r;  // a back end without a measure has no compute ceiling
  }
  return out;
}

}  // namespace

Result<ProfileRun> profile_model(const OpenedModel& m, const ProfileRunOptions& o) {
  const Model& model = *m.model;
  const ModelConfig& cfg = model.config();
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                        Session::create(m.model, profile_context(o), o.n_threads, o.kv_dtype));
  Session& s = *session;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> pick(0, cfg.vocab_size - 1);
  std::vector<int> prompt(static_cast<size_t>(o.n_prompt));
  for (int& t : prompt) t = pick(rng);

  StepTracer tracer(o.level, o.check_numerics);
  s.set_tracer(&tracer);
  ProfileRun out;
  Status& run = out.run;
  // The warm-up's records are dropped.
  if (o.warmup) {
    run = run_workload(s, prompt, std::min(o.n_gen, 4));
    if (run) tracer.clear();
  }
  if (run) run = run_workload(s, prompt, o.n_gen);
  s.set_tracer(nullptr);
  out.fault = tracer.fault().has_value();
  if (!run && !out.fault) return run;
  const MemoryParts memory = memory_parts(s);
  if (o.overhead > 0 && run) {
    KILN_ASSIGN_OR_RETURN(out.overhead, measure_overhead(s, prompt, o.overhead, o.level));
  }
  out.profile = build_profile(model, tracer, s.kv_dtype(), o.n_threads, memory, Ceilings{}, o.n_prompt);
  if (o.ceilings && o.level == ProfileLevel::kDetailed && !out.fault) {
    KILN_ASSIGN_OR_RETURN(Ceilings ceilings, measure_ceilings(o, out.profile, model));
    out.profile = build_profile(model, tracer, s.kv_dtype(), o.n_threads, memory, ceilings, o.n_prompt);
  }
  return out;
}

}  // namespace kiln
