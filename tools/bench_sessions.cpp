#include "tools/bench_sessions.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/defaults.h"
#include "engine/runtime.h"
#include "tools/bench_common.h"
#include "tools/cli_common.h"

namespace kiln::cli {

namespace {

struct Run {
  int sessions = 0;
  double aggregate_tps = 0;     // every session's decoded tokens over the span they decoded in
  // The decoded tokens over the span in which every session decodes (from the last first token
  // to the first end): the rate of the batched steps alone, as llama-batched-bench's S_TG
  // (the whole span also holds the other sessions' prompts, which are not batched).
  double together_tps = 0;
  double mean_ttft_ms = 0;      // time to first token, averaged over the sessions
  double max_ttft_ms = 0;
  double per_session_tps = 0;   // mean of each session's own decode rate
  int generated = 0;
  double mean_batch = 0;        // decode tokens per step
};
}  // namespace

int bench_sessions(const BenchSessionsArgs& a) {
  RuntimeOptions ro;
  ro.n_threads = a.threads;
  // n_threads 0: the runtime's perf mode picks, as for every command (balanced by default).
  if (!a.perf.empty()) {
    auto mode = parse_perf_mode(a.perf);
    if (!mode) return fail(mode.status());
    ro.perf_mode = *mode;
  }
  auto rt = Runtime::create(ro);
  ModelLoadOptions lo;
  lo.open.tokenizer_path = a.tokenizer;
  lo.open.cache = a.cache;
  if (!a.scheme.empty()) {  // else a source in its own precision
    auto q = source_scheme(a.scheme, a.group);
    if (!q) return fail(q.status());
    lo.open.quant = *q;
  }
  auto model = rt->load_model(a.model, lo);
  if (!model) return fail(model.status());
  // A prompt of about n_prompt tokens, different for each session so that none shares a prefix.
  auto prompt_for = [&](int i) {
    std::string p = "Session " + std::to_string(i) + ":";
    while (true) {
      auto ids = (*model)->tokenizer().encode(p + " once upon a time", false);
      if (!ids || static_cast<int>(ids->size()) >= a.n_prompt) break;
      p += " once upon a time";
    }
    return p;
  };
  std::vector<Run> runs;
  for (int n : a.sessions) {
    if (n < 1 || n > 64) return fail(invalid_argument("--sessions takes counts from 1 to 64"));
    SessionOptions so;
    so.n_ctx = a.n_prompt + a.n_gen + 16;
    so.kv_dtype = kv_dtype(a.kv_type);
    so.sampler.temperature = 0;
    std::vector<std::shared_ptr<RuntimeSession>> ss;
    for (int i = 0; i < n; ++i) {
      auto s = (*model)->new_session(so);
      if (!s) return fail(s.status());
      ss.push_back(*s);
    }
    std::vector<GenerationStats> st(static_cast<size_t>(n));
    std::vector<double> start(static_cast<size_t>(n)), end(static_cast<size_t>(n));
    std::vector<std::vector<double>> token_times(static_cast<size_t>(n));
    for (auto& t : token_times) t.reserve(static_cast<size_t>(a.n_gen) + 1);
    std::vector<Status> errs(static_cast<size_t>(n));
    const RuntimeStats before = rt->stats();
    std::vector<std::thread> threads;
    TurnOptions turn;
    turn.max_tokens = a.n_gen;
    for (int i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        const std::string p = prompt_for(i);
        const auto k = static_cast<size_t>(i);
        start[k] = now_s();
        auto r = ss[k]->generate(p, turn, [&, k](std::string_view, std::span<const int> ids) {
          const double t = now_s();
          for (size_t j = 0; j < ids.size(); ++j) token_times[k].push_back(t);
          return true;
        });
        end[k] = now_s();
        if (r) st[k] = *r;
        else errs[k] = r.status();
      });
    for (auto& t : threads) t.join();
    for (const Status& e : errs)
      if (!e) return fail(e);
    Run r;
    r.sessions = n;
    const RuntimeStats after = rt->stats();
    if (after.decode_steps > before.decode_steps)
      r.mean_batch = static_cast<double>(after.decode_tokens - before.decode_tokens) /
                     static_cast<double>(after.decode_steps - before.decode_steps);
    double first = 1e300, last = 0, sum_rate = 0;
    for (int i = 0; i < n; ++i) {
      const auto k = static_cast<size_t>(i);
      const double ttft = st[k].first_token_seconds;
      first = std::min(first, start[k] + ttft);
      last = std::max(last, end[k]);
      r.generated += st[k].generated_tokens;
      r.mean_ttft_ms += ttft * 1e3 / n;
      r.max_ttft_ms = std::max(r.max_ttft_ms, ttft * 1e3);
      sum_rate += st[k].generate_seconds > 0 ? st[k].generated_tokens / st[k].generate_seconds : 0;
    }
    r.per_session_tps = sum_rate / n;
    r.aggregate_tps = last > first ? (r.generated - n) / (last - first) : 0;  // the first tokens came with the prefill
    double all_in = 0, first_out = 1e300;
    for (const auto& t : token_times)
      if (!t.empty()) {
        all_in = std::max(all_in, t.front());
        first_out = std::min(first_out, t.back());
      }
    int together = 0;
    for (const auto& t : token_times)
      together += static_cast<int>(std::count_if(t.begin(), t.end(), [&](double x) { return x > all_in && x <= first_out; }));
    r.together_tps = first_out > all_in ? together / (first_out - all_in) : 0;
    runs.push_back(r);
  }
  if (a.json) {
    nlohmann::json j;
    j["model"] = a.model;
    j["threads"] = rt->thread_plan().n_threads;
    j["n_prompt"] = a.n_prompt;
    j["n_gen"] = a.n_gen;
    for (const Run& r : runs)
      j["runs"].push_back({{"sessions", r.sessions}, {"aggregate_decode_tps", r.aggregate_tps},
                           {"all_decoding_tps", r.together_tps},
                           {"per_session_decode_tps", r.per_session_tps}, {"mean_ttft_ms", r.mean_ttft_ms},
                           {"max_ttft_ms", r.max_ttft_ms}, {"generated", r.generated},
                           {"mean_decode_batch", r.mean_batch}});
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model    %s\nthreads  %s; prompt %d tokens, %d generated per session\n", a.model.c_str(),
              rt->thread_plan().summary.c_str(), a.n_prompt, a.n_gen);
  std::printf("sessions  aggregate decode tok/s  all decoding tok/s  per session tok/s  TTFT mean / max ms  tokens per decode step\n");
  for (const Run& r : runs)
    std::printf("%8d  %22.1f  %18.1f  %17.1f  %8.1f / %-8.1f  %22.2f\n", r.sessions, r.aggregate_tps, r.together_tps,
                r.per_session_tps, r.mean_ttft_ms, r.max_ttft_ms, r.mean_batch);
  std::printf("aggregate: every session's tokens after its first, from the first session's first token to the last end\n"
              "           (it includes the later sessions' prompts); all decoding: the tokens while every session decodes\n");
  return 0;
}

}  // namespace kiln::cli
