#include "tools/bench_speculative.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "engine/defaults.h"
#include "engine/runtime.h"
#include "engine/verify_cost.h"
#include "perf/sample_stats.h"
#include "tools/bench_common.h"
#include "tools/cli_common.h"
#include "tools/generation_flags.h"

namespace kiln::cli {

namespace {
using OJ = nlohmann::ordered_json;

struct Run {
  std::string text;
  GenerationStats stats;
  double tps() const { return stats.generate_seconds > 0 ? stats.generated_tokens / stats.generate_seconds : 0; }
};

// One greedy generation on a fresh session (nothing cached).
Result<Run> generate_once(RuntimeModel& m, const BenchSpeculativeArgs& a, const TurnOptions& turn) {
  SessionOptions so;
  so.kv_dtype = kv_dtype(a.kv_type);
  so.sampler.temperature = 0;
  KILN_ASSIGN_OR_RETURN(auto s, m.new_session(so));
  Run r;
  auto sink = [&r](std::string_view t, std::span<const int>) {
    r.text += t;
    return true;
  };
  if (a.chat) {
    nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
    msgs.push_back({{"role", "user"}, {"content", a.prompt}});
    KILN_ASSIGN_OR_RETURN(r.stats, s->chat(msgs, turn, sink));
  } else {
    KILN_ASSIGN_OR_RETURN(r.stats, s->generate(a.prompt, turn, sink));
  }
  return r;
}
}  // namespace

int bench_speculative(const BenchSpeculativeArgs& a) {
  GenerationFlags g;
  g.model = a.model.empty() ? default_model_path() : a.model;
  g.tokenizer = a.tokenizer;
  g.threads = a.threads;
  g.threads_given = a.threads > 0;
  g.perf = a.perf;
  g.scheme = a.scheme;
  g.group = a.group;
  g.draft = a.draft;
  g.lookup = a.lookup;
  g.draft_max = a.draft_max;
  auto rt = runtime_for(g);
  if (!rt) return fail(rt.status());
  std::fprintf(stderr, "kiln: %s\n", g.thread_summary.c_str());
  auto model = open_for_generation(**rt, g);
  if (!model) return fail(model.status());
  TurnOptions plain;
  plain.max_tokens = a.n_gen;
  TurnOptions spec = plain;
  if (Status s = speculation_for(**rt, g, spec); !s.is_ok()) return fail(s);

  // The arithmetic: a verification step of k drafts against a one-token step, on a session of
  // its own (the runtime's thread count) after 64 tokens of context.
  auto compiled = (*model)->compiled();
  if (!compiled) return fail(compiled.status());
  const ThreadPlan& plan = (*rt)->thread_plan();
  auto timing = Session::create(*compiled, 0, std::make_shared<StepExecutor>(plan.n_threads, plan.pool), kv_dtype(a.kv_type));
  if (!timing) return fail(timing.status());
  const double draft_ratio = spec.draft ? static_cast<double>(spec.draft->weight_bytes()) / (*model)->weight_bytes() : 0.0;
  auto cost = measure_verify_cost(**timing, 64, a.draft_max, std::max(a.repeats, 5), draft_ratio);
  timing->reset();
  if (!cost) return fail(cost.status());

  // Warm-up, then the repeats, plain and speculative in turn.
  std::vector<double> plain_tps, spec_tps;
  Run p, s;
  bool same = true;
  for (int r = -1; r < a.repeats; ++r) {
    auto rp = generate_once(**model, a, plain);
    if (!rp) return fail(rp.status());
    auto rs = generate_once(**model, a, spec);
    if (!rs) return fail(rs.status());
    if (r < 0) continue;
    p = std::move(*rp);
    s = std::move(*rs);
    same = same && p.text == s.text;
    plain_tps.push_back(p.tps());
    spec_tps.push_back(s.tps());
  }
  const SampleStats pt = summarize_samples(plain_tps), st = summarize_samples(spec_tps);
  const GenerationStats& ss = s.stats;
  const double acceptance = ss.drafted_tokens > 0 ? static_cast<double>(ss.accepted_tokens) / ss.drafted_tokens : 0;
  const double per_step = ss.target_steps > 0 ? static_cast<double>(ss.generated_tokens) / ss.target_steps : 0;
  const std::string how = spec.draft ? "draft " + a.draft : "lookup " + std::to_string(a.lookup);
  if (a.json) {
    OJ ks = OJ::array();
    for (const VerifyCost& c : cost->k)
      ks.push_back({{"k", c.k}, {"step_ms", c.step_ms}, {"ratio", c.ratio}, {"break_even_acceptance", c.break_even}});
    OJ j{{"model", g.model}, {"speculation", how}, {"threads", plan.n_threads}, {"n_gen", a.n_gen},
         {"one_token_ms", cost->one_token_ms}, {"verify", ks}, {"draft_ratio", draft_ratio},
         {"plain_tps", stats_json(pt)}, {"speculative_tps", stats_json(st)}, {"speedup", st.median / pt.median},
         {"generated_tokens", ss.generated_tokens}, {"drafted", ss.drafted_tokens}, {"accepted", ss.accepted_tokens},
         {"acceptance", acceptance}, {"target_steps", ss.target_steps}, {"tokens_per_step", per_step},
         {"same_text", same}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("model    %s (%s), %d threads; speculation: %s, draft-max %d\n", g.model.c_str(),
              (*model)->main_scheme().c_str(), plan.n_threads, how.c_str(), a.draft_max);
  std::printf("\nverification step after 64 tokens: one token %.3f ms (median)%s\n", cost->one_token_ms,
              draft_ratio > 0 ? "; a draft token costs its weight bytes' share of a target step" : "");
  std::printf("| %2s | %4s | %9s | %11s | %21s |\n", "k", "rows", "step ms", "x one token", "acceptance to win");
  std::printf("| -- | ---- | --------- | ----------- | --------------------- |\n");
  for (const VerifyCost& c : cost->k)
    std::printf("| %2d | %4d | %9.3f | %11.2f | %21.2f |\n", c.k, c.k + 1, c.step_ms, c.ratio, c.break_even);
  std::printf("\n| %-11s | %10s | %10s | %10s |\n", "run", "t/s median", "min", "max");
  std::printf("| ----------- | ---------- | ---------- | ---------- |\n");
  std::printf("| %-11s | %10.2f | %10.2f | %10.2f |\n", "plain", pt.median, pt.min, pt.max);
  std::printf("| %-11s | %10.2f | %10.2f | %10.2f |\n", "speculative", st.median, st.min, st.max);
  std::printf("\nspeedup %.2fx; %d tokens, %d drafted, %d accepted (%.1f%%), %d target steps, %.2f tokens per step; "
              "text %s\n",
              st.median / pt.median, ss.generated_tokens, ss.drafted_tokens, ss.accepted_tokens, 100.0 * acceptance,
              ss.target_steps, per_step, same ? "the same" : "DIFFERENT");
  return 0;
}

}  // namespace kiln::cli
