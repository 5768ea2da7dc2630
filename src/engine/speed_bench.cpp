#include "engine/speed_bench.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <random>

#include "perf/probe_process.h"
#include "runtime/session.h"
#include "runtime/step_executor.h"

namespace kiln {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The prefill and decode runs over one session and one random token sequence; each run starts
// from `depth` tokens already in the cache.
class BenchRuns {
 public:
  BenchRuns(Session& s, std::vector<int> tokens, int depth) : s_(s), tokens_(std::move(tokens)), depth_(depth) {}

  Result<double> prefill_seconds(int n) {
    KILN_RETURN_IF_ERROR(fill_depth());
    const double t0 = now_s();
    KILN_RETURN_IF_ERROR(s_.decode(span(depth_, n)).status());
    return now_s() - t0;
  }
  Result<double> decode_seconds(int n) {
    KILN_RETURN_IF_ERROR(fill_depth());
    const double t0 = now_s();
    for (int i = depth_; i < depth_ + n; ++i) KILN_RETURN_IF_ERROR(s_.decode(span(i, 1)).status());
    return now_s() - t0;
  }

 private:
  std::span<const int> span(int from, int n) const {
    return std::span<const int>(tokens_).subspan(static_cast<size_t>(from), static_cast<size_t>(n));
  }
  Status fill_depth() {
    s_.reset();
    if (depth_ > 0) KILN_RETURN_IF_ERROR(s_.decode(span(0, depth_)).status());
    return Status::ok();
  }
  Session& s_;
  std::vector<int> tokens_;
  int depth_;
};

Status warm_up(const SpeedBenchOptions& o, BenchRuns& runs, int max_step) {
  if (!o.n_prompt.empty()) KILN_RETURN_IF_ERROR(runs.prefill_seconds(std::min(o.n_prompt.front(), max_step)).status());
  if (o.n_gen > 0) KILN_RETURN_IF_ERROR(runs.decode_seconds(std::min(o.n_gen, 4)).status());
  return Status::ok();
}

Result<std::vector<PrefillResult>> measure_prefills(const SpeedBenchOptions& o, BenchRuns& runs) {
  std::vector<PrefillResult> out;
  for (int p : o.n_prompt) {
    std::vector<double> tps;
    for (int r = 0; r < o.repeats; ++r) {
      KILN_ASSIGN_OR_RETURN(double secs, runs.prefill_seconds(p));
      tps.push_back(p / secs);
    }
    PrefillResult pr;
    pr.n_prompt = p;
    pr.tps = summarize_samples(std::move(tps));
    out.push_back(std::move(pr));
  }
  return out;
}

// The compute roofline of each prefill, measured between the prefill and the decode tests.
void add_prefill_rooflines(const Model& model, const Session& s, int depth,
                           std::vector<PrefillResult>& pp) {
  ComputeProbe compute(model, s.n_threads());
  for (PrefillResult& r : pp) {
    auto roof = compute.prefill(r.n_prompt, s.max_tokens(), depth);
    if (roof) r.roofline = *roof;
    else r.roofline_error = roof.status().message();
  }
}

// Decode repeats with a bandwidth pass before the first and after each, the remaining passes of
// bw_passes at the end; without a helper process the probe runs here afterwards.
struct DecodeRun {
  std::vector<double> tps, bw_passes;
};
Result<DecodeRun> measure_decode(const SpeedBenchOptions& o, BenchRuns& runs, ProbeProcess* probe) {
  DecodeRun d;
  auto probe_pass = [&]() -> Status {
    if (probe == nullptr) return Status::ok();
    KILN_ASSIGN_OR_RETURN(double g, probe->pass());
    d.bw_passes.push_back(g);
    return Status::ok();
  };
  if (probe != nullptr) {
    KILN_RETURN_IF_ERROR(probe->pass().status());  // untimed warm-up pass
    KILN_RETURN_IF_ERROR(probe_pass());
  }
  for (int r = 0; r < o.repeats && o.n_gen > 0; ++r) {
    KILN_ASSIGN_OR_RETURN(double secs, runs.decode_seconds(o.n_gen));
    d.tps.push_back(o.n_gen / secs);
    KILN_RETURN_IF_ERROR(probe_pass());
  }
  while (probe != nullptr && static_cast<int>(d.bw_passes.size()) < o.bw_passes) KILN_RETURN_IF_ERROR(probe_pass());
  return d;
}

// DecodeSchemeTimes: one more decode run of n_gen tokens with a detailed tracer on the session.
Result<DecodeSchemeTimes> decode_scheme_times(const SpeedBenchOptions& o, Session& s, BenchRuns& runs) {
  DecodeSchemeTimes out;
  if (o.n_gen <= 0) return out;
  StepTracer tracer(ProfileLevel::kDetailed);
  StepTracer* before = s.tracer();
  s.set_tracer(&tracer);
  auto ran = runs.decode_seconds(o.n_gen);
  s.set_tracer(before);
  KILN_RETURN_IF_ERROR(ran.status());
  const Graph& g = s.model()->program().graph;
  const auto& weights = s.model()->image().weights;
  std::vector<std::string> label(g.weights.size());
  for (size_t i = 0; i < g.weights.size(); ++i) label[i] = weight_scheme_label(g.weights[i]);
  std::map<std::string, double> by;
  double step_s = 0, matmul_s = 0;
  for (const StepRecord& st : tracer.steps()) {
    if (st.tokens != 1 || st.first_pos < o.depth) continue;  // the depth's prefill is not decode
    ++out.tokens;
    step_s += static_cast<double>(st.end_ns - st.begin_ns) * 1e-9;
    for (uint32_t k = st.first_instruction; k < st.first_instruction + st.n_instructions; ++k) {
      const InstructionRecord& ins = tracer.instructions()[k];
      const Node& n = g.nodes[static_cast<size_t>(ins.node)];
      if (n.op == OpCode::kEmbed) continue;  // a gather: other
      double total = 0;
      for (int wi : n.weights)
        if (g.weights[static_cast<size_t>(wi)].shape.size() == 2) total += static_cast<double>(weights[static_cast<size_t>(wi)].size());
      if (total <= 0) continue;
      const double secs = static_cast<double>(ins.end_ns - ins.begin_ns) * 1e-9;
      matmul_s += secs;
      for (int wi : n.weights)
        if (g.weights[static_cast<size_t>(wi)].shape.size() == 2)
          by[label[static_cast<size_t>(wi)]] += secs * static_cast<double>(weights[static_cast<size_t>(wi)].size()) / total;
    }
  }
  if (out.tokens == 0) return out;
  out.step_seconds = step_s / out.tokens;
  out.other_seconds = std::max(0.0, step_s - matmul_s) / out.tokens;
  for (const auto& [scheme, secs] : by) out.matmul_seconds.emplace_back(scheme, secs / out.tokens);
  std::stable_sort(out.matmul_seconds.begin(), out.matmul_seconds.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

DecodeRoofline decode_roofline(const SpeedBenchOptions& o, const SpeedBenchReport& r, const DecodeRun& d,
                               uint64_t kv_row_bytes) {
  DecodeRoofline dr;
  dr.mean_ctx = o.n_gen > 0 ? o.depth + (o.n_gen + 1) / 2.0 : 0.0;
  dr.kv_read = static_cast<double>(kv_row_bytes) * dr.mean_ctx;
  dr.bytes_per_token = static_cast<double>(r.weights.read_per_token) + dr.kv_read;
  dr.roofline_tps = r.bandwidth.median_gbs * 1e9 / dr.bytes_per_token;
  dr.ratio = o.n_gen > 0 ? r.decode_tps.median / dr.roofline_tps : 0.0;
  std::vector<double> paired;
  if (r.probe_in_helper && d.bw_passes.size() >= d.tps.size() + 1)
    for (size_t i = 0; i < d.tps.size(); ++i)
      paired.push_back(d.tps[i] / (0.5 * (d.bw_passes[i] + d.bw_passes[i + 1]) * 1e9 / dr.bytes_per_token));
  dr.paired_ratio = summarize_samples(std::move(paired));
  return dr;
}

}  // namespace

Result<SpeedBenchReport> run_speed_bench(const SpeedBenchOptions& o) {
  if (o.repeats < 1) return invalid_argument("at least one repeat");
  for (int p : o.n_prompt)
    if (p < 1) return invalid_argument("prompt sizes must be at least 1");
  // Forked first, while this process has one thread (probe_process.h).
  std::unique_ptr<ProbeProcess> probe = ProbeProcess::start(o.bw_bytes, o.threads);
  SpeedBenchReport r;
  const double t_open0 = now_s();
  KILN_ASSIGN_OR_RETURN(OpenedModel opened, open_model(o.model, o.open));
  r.open_seconds = now_s() - t_open0;
  r.kind = opened.kind;
  r.kernels = opened.model->kernel_choice();
  r.config = opened.model->config();
  r.weights = summarize_weights(*opened.model);
  r.threads = o.threads;

  const int max_p = o.n_prompt.empty() ? 0 : *std::max_element(o.n_prompt.begin(), o.n_prompt.end());
  const int n_ctx = o.depth + std::max({max_p, o.n_gen, 1});
  if (n_ctx > r.config.max_seq_len)
    return invalid_argument("a context of " + std::to_string(n_ctx) + " tokens exceeds the model's maximum of " +
                            std::to_string(r.config.max_seq_len));
  KILN_ASSIGN_OR_RETURN(auto session, Session::create(opened.model, n_ctx,
                                                             std::make_shared<StepExecutor>(o.threads, o.pool), o.kv_dtype));
  Session& s = *session;
  r.session_threads = s.n_threads();

  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> pick(0, r.config.vocab_size - 1);
  std::vector<int> tokens(static_cast<size_t>(n_ctx));
  for (int& t : tokens) t = pick(rng);
  BenchRuns runs(s, std::move(tokens), o.depth);

  if (o.warmup) KILN_RETURN_IF_ERROR(warm_up(o, runs, s.max_tokens()));
  KILN_ASSIGN_OR_RETURN(r.prefill, measure_prefills(o, runs));
  add_prefill_rooflines(*opened.model, s, o.depth, r.prefill);
  KILN_ASSIGN_OR_RETURN(DecodeRun d, measure_decode(o, runs, probe.get()));
  r.decode_tps = summarize_samples(d.tps);
  KILN_ASSIGN_OR_RETURN(r.decode_by_scheme, decode_scheme_times(o, s, runs));
  r.peak_rss = peak_rss_bytes();
  r.rss_end = resident_split_now();
  r.probe_in_helper = probe != nullptr;
  if (probe) {
    r.bandwidth = summarize_bandwidth(d.bw_passes, probe->bytes(), o.threads);
    probe.reset();  // reaped: its peak is now among the children's
    r.run_peak_rss = std::max(r.peak_rss, children_peak_rss_bytes());
  } else {
    BandwidthOptions bo;
    bo.threads = o.threads;
    bo.passes = o.bw_passes;
    bo.bytes = o.bw_bytes;
    KILN_ASSIGN_OR_RETURN(r.bandwidth, measure_read_bandwidth(bo));
    r.run_peak_rss = peak_rss_bytes();
  }
  // The KV cache as the session keeps it, read in full up to the current position.
  r.kv_cache_bytes = s.kv_cache_bytes();
  r.session_reserved_bytes = s.reserved_bytes();
  r.decode = decode_roofline(o, r, d, r.kv_cache_bytes / static_cast<uint64_t>(n_ctx));
  r.rss_budget = r.weights.weight_bytes + r.kv_cache_bytes + (64ull << 20);
  return r;
}

}  // namespace kiln
