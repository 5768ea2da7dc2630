// kiln bench: prefill and decode speed in the spirit of llama-bench, against this machine's
// rooflines measured in the same run (prefill: the kernels' arithmetic, perf/compute_probe.h;
// decode: the memory bandwidth); and (--cold-start) the time from process start to the first
// generated token, page cache warm and cold.
//
// Decode reads every weight once per token, so its limit is bandwidth / bytes read per token.
// Bytes read per token = every weight byte of the compiled program (the embedding table counts
// one row unless it is also the classifier) + the KV cache read at the mean context of the
// decode run (from an empty cache, as llama-bench's tg test).
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <tuple>

#include "quant/weight_params.h"
#include "perf/bandwidth.h"
#include "perf/compute_probe.h"
#include "perf/profile.h"
#include "perf/weight_summary.h"
#include "runtime/program_session.h"
#include "tools/cli_common.h"
#include "engine/defaults.h"
#include "engine/open_model.h"
#include "runtime/perf_mode.h"
#include "tools/bench_sessions.h"
#include "tools/generation_flags.h"

extern char** environ;

namespace kiln::cli {

namespace {

namespace fs = std::filesystem;
using OJ = nlohmann::ordered_json;

struct BenchCmd {
  std::string model, scheme = "w4a16", tokenizer;
  std::vector<int> n_prompt = {128, 512};
  int n_gen = 64;
  int depth = 0;  // tokens in the KV cache when each prefill and decode test starts
  int repeats = 5;
  int threads = 0;
  int group = 32;
  std::string kv_type = "f32";
  bool json = false;
  bool no_warmup = false;
  int64_t bw_mib = 0;
  int bw_passes = 7;
  // --cold-start
  bool cold_start = false;
  std::string cache = "both";
  std::string prompt = "Once upon a time";
  bool drop_all = false;
  bool first_token = false;  // internal: the child process of --cold-start
  std::string perf;               // --perf MODE
  std::vector<int> sessions;      // --sessions N,...: concurrent sessions instead of the usual tests
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Stats {
  double median = 0, min = 0, max = 0, stddev = 0;
  std::vector<double> samples;
};

Stats stats_of(std::vector<double> v) {
  Stats s;
  s.samples = v;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front();
  s.max = v.back();
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(n);
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  s.stddev = n > 1 ? std::sqrt(ss / static_cast<double>(n - 1)) : 0.0;
  return s;
}

OJ stats_json(const Stats& s) {
  return OJ{{"median", s.median}, {"min", s.min}, {"max", s.max}, {"stddev", s.stddev}, {"samples", s.samples}};
}

// Resident memory now, by kind (Linux /proc/self/status; zeros elsewhere): where the peak went.
struct RssNow {
  uint64_t total = 0, anon = 0, file = 0;
};
RssNow rss_now() {
  RssNow r;
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return r;
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long kb = 0;
    if (std::sscanf(line, "VmRSS: %llu kB", &kb) == 1) r.total = kb * 1024;
    else if (std::sscanf(line, "RssAnon: %llu kB", &kb) == 1) r.anon = kb * 1024;
    else if (std::sscanf(line, "RssFile: %llu kB", &kb) == 1) r.file = kb * 1024;
  }
  std::fclose(f);
  return r;
}

std::string mib(double b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f MiB", b / (1024.0 * 1024.0));
  return s;
}

// The bandwidth probe runs in a helper process, forked before the model is opened (while kiln
// has one thread): its buffer (1 GiB or more) is then no part of kiln's peak RSS, and its passes
// can run between the decode repeats, so that bandwidth and decode see the same machine state
// (on a shared machine that drifts). Where fork fails the probe runs in this process, after the
// peak RSS has been read.
class ProbeProcess {
 public:
  static std::unique_ptr<ProbeProcess> start(uint64_t bytes, int threads) {
    int to_child[2], from_child[2];
    if (::pipe(to_child) != 0) return nullptr;
    if (::pipe(from_child) != 0) {
      ::close(to_child[0]);
      ::close(to_child[1]);
      return nullptr;
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
      return nullptr;
    }
    if (pid == 0) {  // the helper: make the buffer, then one pass per request
      ::close(to_child[1]);
      ::close(from_child[0]);
      auto probe = BandwidthProbe::create(bytes, threads);
      uint64_t made = probe ? (*probe)->bytes() : 0;
      if (!write_all(from_child[1], &made, sizeof made) || !probe) ::_exit(1);
      char cmd = 0;
      while (::read(to_child[0], &cmd, 1) == 1 && cmd == 'p') {
        const double gbs = (*probe)->pass_gbs();
        if (!write_all(from_child[1], &gbs, sizeof gbs)) break;
      }
      ::_exit(0);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    std::unique_ptr<ProbeProcess> p(new ProbeProcess());
    p->pid_ = pid;
    p->cmd_ = to_child[1];
    p->res_ = from_child[0];
    uint64_t made = 0;
    if (!read_all(p->res_, &made, sizeof made) || made == 0) return nullptr;  // the destructor reaps it
    p->bytes_ = made;
    return p;
  }
  ~ProbeProcess() {
    ::close(cmd_);
    ::close(res_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  Result<double> pass() {
    double gbs = 0;
    if (!write_all(cmd_, "p", 1) || !read_all(res_, &gbs, sizeof gbs)) return io_error("the bandwidth probe process stopped");
    return gbs;
  }
  uint64_t bytes() const { return bytes_; }

 private:
  ProbeProcess() = default;
  static bool write_all(int fd, const void* p, size_t n) {
    const auto* b = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = ::write(fd, b, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      b += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }
  static bool read_all(int fd, void* p, size_t n) {
    auto* b = static_cast<char*>(p);
    while (n > 0) {
      const ssize_t r = ::read(fd, b, n);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      b += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  }
  pid_t pid_ = -1;
  int cmd_ = -1, res_ = -1;
  uint64_t bytes_ = 0;
};

Result<OpenedModel> open_for_bench(const BenchCmd& c) {
  OpenOptions oo;
  oo.tokenizer_path = c.tokenizer;
  KILN_ASSIGN_OR_RETURN(oo.quant, source_scheme(c.scheme, c.group));
  return open_model(c.model, oo);
}

int bench(BenchCmd c) {
  if (c.model.empty()) c.model = default_model_path();
  // Every command's thread default, the C API's: --perf (balanced when not given) picks.
  auto plan = thread_plan_for(c.perf, c.threads);
  if (!plan) return fail(plan.status());
  c.threads = plan->n_threads;
  const PoolOptions pool = plan->pool;
  std::fprintf(stderr, "kiln: %s\n", plan->summary.c_str());
  if (c.repeats < 1) return usage_error("-r must be at least 1");
  for (int p : c.n_prompt)
    if (p < 0) return usage_error("-p sizes must be at least 0");
  c.n_prompt.erase(std::remove(c.n_prompt.begin(), c.n_prompt.end(), 0), c.n_prompt.end());

  std::unique_ptr<ProbeProcess> probe = ProbeProcess::start(static_cast<uint64_t>(c.bw_mib) << 20, c.threads);
  const double t_open0 = now_s();
  auto opened = open_for_bench(c);
  if (!opened) return fail(opened.status());
  const double open_s = now_s() - t_open0;
  const CompiledModel& model = *opened->model;
  const ModelConfig& cfg = model.config();
  const WeightSummary ws = summarize_weights(model);

  const int max_p = c.n_prompt.empty() ? 0 : *std::max_element(c.n_prompt.begin(), c.n_prompt.end());
  const int n_ctx = c.depth + std::max({max_p, c.n_gen, 1});
  if (n_ctx > cfg.max_seq_len)
    return fail(invalid_argument("a context of " + std::to_string(n_ctx) + " tokens exceeds the model's maximum of " +
                                 std::to_string(cfg.max_seq_len)));
  auto session_r =
      ProgramSession::create(opened->model, n_ctx, std::make_shared<StepExecutor>(c.threads, pool), kv_dtype(c.kv_type));
  if (!session_r) return fail(session_r.status());
  ProgramSession& s = **session_r;

  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> pick(0, cfg.vocab_size - 1);
  std::vector<int> tokens(static_cast<size_t>(n_ctx));
  for (int& t : tokens) t = pick(rng);

  // Each test starts from c.depth tokens already in the cache (prefilled untimed, as llama-bench's -d).
  auto fill_depth = [&]() -> Status {
    s.reset();
    if (c.depth > 0) KILN_RETURN_IF_ERROR(s.decode(std::span<const int>(tokens).first(static_cast<size_t>(c.depth))).status());
    return Status::ok();
  };
  auto run_pp = [&](int p) -> Result<double> {
    KILN_RETURN_IF_ERROR(fill_depth());
    const double t0 = now_s();
    KILN_RETURN_IF_ERROR(s.decode(std::span<const int>(tokens).subspan(static_cast<size_t>(c.depth), static_cast<size_t>(p))).status());
    return now_s() - t0;
  };
  auto run_tg = [&](int n) -> Result<double> {
    KILN_RETURN_IF_ERROR(fill_depth());
    const double t0 = now_s();
    for (int i = c.depth; i < c.depth + n; ++i)
      KILN_RETURN_IF_ERROR(s.decode(std::span<const int>(&tokens[static_cast<size_t>(i)], 1)).status());
    return now_s() - t0;
  };

  if (!c.no_warmup) {  // faults the weights in and warms the caches, as llama-bench does
    if (!c.n_prompt.empty()) {
      auto w = run_pp(std::min(c.n_prompt.front(), s.max_tokens()));
      if (!w) return fail(w.status());
    }
    if (c.n_gen > 0) {
      auto w = run_tg(std::min(c.n_gen, 4));
      if (!w) return fail(w.status());
    }
  }
  std::vector<Stats> pp;
  for (int p : c.n_prompt) {
    std::vector<double> tps;
    for (int r = 0; r < c.repeats; ++r) {
      auto secs = run_pp(p);
      if (!secs) return fail(secs.status());
      tps.push_back(p / *secs);
    }
    pp.push_back(stats_of(tps));
    if (!c.json && isatty(STDERR_FILENO)) std::fprintf(stderr, "kiln: pp%d done\n", p);
  }
  // The compute roofline of each prefill, measured between the prefill and the decode tests.
  const int session_threads = s.n_threads();
  ComputeProbe compute(model, session_threads);
  std::vector<Result<PrefillRoofline>> pp_roof;
  for (int p : c.n_prompt) pp_roof.push_back(compute.prefill(p, s.max_tokens(), c.depth));
  // Decode repeats with a bandwidth pass before the first and after each; the remaining passes
  // of --bw-passes at the end.
  std::vector<double> bw_passes, tg_tps;
  auto probe_pass = [&]() -> Status {
    if (!probe) return Status::ok();
    KILN_ASSIGN_OR_RETURN(double g, probe->pass());
    bw_passes.push_back(g);
    return Status::ok();
  };
  if (probe) {
    if (auto w = probe->pass(); !w) return fail(w.status());  // untimed warm-up pass
    if (Status st = probe_pass(); !st) return fail(st);
  }
  for (int r = 0; r < c.repeats && c.n_gen > 0; ++r) {
    auto secs = run_tg(c.n_gen);
    if (!secs) return fail(secs.status());
    tg_tps.push_back(c.n_gen / *secs);
    if (Status st = probe_pass(); !st) return fail(st);
  }
  while (probe && static_cast<int>(bw_passes.size()) < c.bw_passes)
    if (Status st = probe_pass(); !st) return fail(st);
  const Stats tg = stats_of(tg_tps);
  const uint64_t rss = peak_rss_bytes();
  const RssNow rss_end = rss_now();
  BandwidthResult bw;
  const bool probe_in_helper = probe != nullptr;
  // The whole run's peak as `/usr/bin/time -v` reports it (wait4's maximum over the process and the
  // children it reaped): the helper's buffer, or this process's after an in-process probe.
  uint64_t run_peak = rss;
  if (probe) {
    bw = summarize_bandwidth(bw_passes, probe->bytes(), c.threads);
    probe.reset();  // reaped: its peak is now among the children's
    run_peak = std::max(rss, children_peak_rss_bytes());
  } else {
    BandwidthOptions bo;
    bo.threads = c.threads;
    bo.passes = c.bw_passes;
    bo.bytes = static_cast<uint64_t>(c.bw_mib) << 20;
    auto m = measure_read_bandwidth(bo);
    if (!m) return fail(m.status());
    bw = *m;
    run_peak = peak_rss_bytes();
  }

  // The KV cache as the session keeps it (--kv-type), read in full up to the current position.
  const uint64_t kv_cache = s.kv_cache_bytes();
  const uint64_t kv_row = kv_cache / static_cast<uint64_t>(n_ctx);
  const double mean_ctx = c.n_gen > 0 ? c.depth + (c.n_gen + 1) / 2.0 : 0.0;
  const double kv_read = static_cast<double>(kv_row) * mean_ctx;
  const double bytes_per_token = static_cast<double>(ws.read_per_token) + kv_read;
  const double roofline = bw.median_gbs * 1e9 / bytes_per_token;
  const double ratio = c.n_gen > 0 ? tg.median / roofline : 0.0;
  // Each repeat against the mean of the passes on either side of it.
  std::vector<double> paired;
  if (probe_in_helper && bw_passes.size() >= tg_tps.size() + 1)
    for (size_t r = 0; r < tg_tps.size(); ++r)
      paired.push_back(tg_tps[r] / (0.5 * (bw_passes[r] + bw_passes[r + 1]) * 1e9 / bytes_per_token));
  const Stats paired_ratio = stats_of(paired);
  const uint64_t budget = ws.weight_bytes + kv_cache + (64ull << 20);
  const std::string scheme_desc = ws.scheme + (ws.group > 0 ? " g" + std::to_string(ws.group) : "");

  if (c.json) {
    OJ j;
    j["model"] = c.model;
    j["kind"] = opened->kind;
    j["arch"] = std::string(arch_name(cfg.arch));
    j["scheme"] = ws.scheme;
    j["group"] = ws.group;
    j["threads"] = c.threads;
    j["session_threads"] = session_threads;
    j["kv_type"] = c.kv_type;
    j["parameters"] = ws.parameters;
    j["weight_bytes"] = ws.weight_bytes;
    j["open_seconds"] = open_s;
    j["n_prompt"] = c.n_prompt;
    j["n_gen"] = c.n_gen;
    j["depth"] = c.depth;
    j["repeats"] = c.repeats;
    j["pp_tps"] = pp.empty() ? OJ(nullptr) : OJ(pp.back().median);  // the last -p size
    j["tg_tps"] = c.n_gen > 0 ? OJ(tg.median) : OJ(nullptr);
    j["bandwidth_gbs"] = bw.median_gbs;
    j["bytes_per_token"] = bytes_per_token;
    j["roofline_tps"] = roofline;
    j["roofline_ratio"] = ratio;
    j["roofline_ratio_paired"] = paired.empty() ? OJ(nullptr) : OJ(paired_ratio.median);
    j["prefill_roofline_tps"] = pp.empty() || !pp_roof.back() ? OJ(nullptr) : OJ(pp_roof.back()->tps);
    j["prefill_roofline_ratio"] = pp.empty() || !pp_roof.back() ? OJ(nullptr) : OJ(pp.back().median / pp_roof.back()->tps);
    OJ pj = OJ::array();
    for (size_t i = 0; i < pp.size(); ++i) {
      OJ e = stats_json(pp[i]);
      e["n_prompt"] = c.n_prompt[i];
      if (const auto& r = pp_roof[i]; r) {
        e["roofline_tps"] = r->tps;
        e["roofline_ratio"] = pp[i].median / r->tps;
        OJ products = OJ::array();
        for (size_t k = 0; k < r->counts.size(); ++k)
          products.push_back(OJ{{"backend", r->counts[k].backend},
                                {"scheme", std::string(scheme_name(r->counts[k].scheme))},
                                {"step_tokens", r->counts[k].step},
                                {"products_per_token", r->counts[k].products / c.n_prompt[i]},
                                {"products_per_second", r->rates[k]}});
        e["products"] = products;
      } else {
        e["roofline_tps"] = nullptr;
        e["roofline_error"] = r.status().message();
      }
      pj.push_back(e);
    }
    j["pp"] = pj;
    j["tg"] = stats_json(tg);
    j["weight_bytes_per_token"] = ws.read_per_token;
    j["kv_bytes_per_token"] = kv_read;
    j["bandwidth"] = OJ{{"median_gbs", bw.median_gbs}, {"min_gbs", bw.min_gbs}, {"max_gbs", bw.max_gbs},
                        {"passes", bw.pass_gbs}, {"buffer_bytes", bw.bytes}, {"llc_bytes", bw.llc_bytes},
                        {"threads", bw.threads}, {"process", probe_in_helper ? "helper" : "self"}};
    j["peak_rss_bytes"] = rss;
    j["run_peak_rss_bytes"] = run_peak;
    j["kv_cache_bytes"] = kv_cache;
    j["rss_budget_bytes"] = budget;
    j["rss_within_budget"] = rss <= budget;
    j["rss_end"] = OJ{{"total_bytes", rss_end.total}, {"anon_bytes", rss_end.anon}, {"file_bytes", rss_end.file}};
    j["session_reserved_bytes"] = s.reserved_bytes();
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }

  std::printf("model    %s (%s, %s, %d layers, dim %d, vocab %d), %.2f M parameters, opened in %.2f s\n", c.model.c_str(),
              opened->kind.c_str(), std::string(arch_name(cfg.arch)).c_str(), cfg.n_layers, cfg.dim, cfg.vocab_size,
              static_cast<double>(ws.parameters) / 1e6, open_s);
  std::printf("scheme   %s, weights %s\n", scheme_desc.c_str(), mib(static_cast<double>(ws.weight_bytes)).c_str());
  std::printf("threads  %d, KV cache %s\n", c.threads, c.kv_type.c_str());
  std::printf("\n| %-12s | %10s | %10s | %10s | %8s |\n", "test", "t/s median", "min", "max", "stddev");
  std::printf("| %-12s | %10s | %10s | %10s | %8s |\n", "------------", "----------", "----------", "----------", "--------");
  auto row = [](const std::string& name, const Stats& st) {
    std::printf("| %-12s | %10.2f | %10.2f | %10.2f | %8.2f |\n", name.c_str(), st.median, st.min, st.max, st.stddev);
  };
  const std::string at_depth = c.depth > 0 ? " @ d" + std::to_string(c.depth) : "";
  for (size_t i = 0; i < pp.size(); ++i) row("pp" + std::to_string(c.n_prompt[i]) + at_depth, pp[i]);
  if (c.n_gen > 0) row("tg" + std::to_string(c.n_gen) + at_depth, tg);
  for (size_t i = 0; i < pp.size(); ++i) {
    const auto& r = pp_roof[i];
    if (i == 0) std::printf("\n");
    if (!r) {
      std::printf("prefill    pp%d%s: no compute roofline (%s)\n", c.n_prompt[i], at_depth.c_str(), r.status().message().c_str());
      continue;
    }
    std::string parts;
    for (size_t k = 0; k < r->counts.size(); ++k) {
      // The step size only where a shorter last step has its own rate.
      const std::string step =
          r->counts[k].step == r->counts[0].step ? "" : " (" + std::to_string(r->counts[k].step) + "-token step)";
      char part[160];
      std::snprintf(part, sizeof part, "%s%s%s %.4g M products/token at %.1f G/s", k ? ", " : "",
                    std::string(scheme_name(r->counts[k].scheme)).c_str(), step.c_str(),
                    r->counts[k].products / c.n_prompt[i] / 1e6, r->rates[k] / 1e9);
      parts += part;
    }
    std::printf("prefill    pp%d%s: compute roofline %.2f tok/s (%s; %d threads); achieved %.2f tok/s = %.1f%%\n",
                c.n_prompt[i], at_depth.c_str(), r->tps, parts.c_str(), session_threads, pp[i].median, 100.0 * pp[i].median / r->tps);
  }
  std::printf("\nbandwidth  %.1f GB/s read (median of %d passes over %s, %d threads; %.1f..%.1f)\n", bw.median_gbs,
              static_cast<int>(bw.pass_gbs.size()), mib(static_cast<double>(bw.bytes)).c_str(), bw.threads,
              bw.min_gbs, bw.max_gbs);
  std::printf("per token  %.2f MB = %.2f MB weights + %.2f MB KV cache (mean context %.1f)\n", bytes_per_token / 1e6,
              static_cast<double>(ws.read_per_token) / 1e6, kv_read / 1e6, mean_ctx);
  if (c.n_gen > 0)
    std::printf("roofline   %.2f tok/s decode; achieved %.2f tok/s = %.1f%% (each repeat against the passes beside it: %.1f%%)\n",
                roofline, tg.median, 100.0 * ratio, 100.0 * paired_ratio.median);
  std::printf("peak RSS   %s; weights + KV cache + 64 MiB = %s: %s\n", mib(static_cast<double>(rss)).c_str(),
              mib(static_cast<double>(budget)).c_str(),
              rss <= budget ? "within"
              : opened->kind == "kiln" ? "OVER"
                                       : "over (a source model compiled in memory also holds its source's pages)");
  std::printf("           the run's peak, the bandwidth probe's %s buffer included, is %s (what /usr/bin/time -v "
              "reports; --bw-mib sets the buffer): the probe ran %s\n",
              mib(static_cast<double>(bw.bytes)).c_str(), mib(static_cast<double>(run_peak)).c_str(),
              probe_in_helper ? "in a helper process" : "in this process, after the peak above was read");
  if (rss_end.total > 0)
    std::printf("           at the end: %s resident = %s file-backed (mapped weights, binary) + %s anonymous "
                "(session %s: arena, scratch, KV cache; heap)\n",
                mib(static_cast<double>(rss_end.total)).c_str(), mib(static_cast<double>(rss_end.file)).c_str(),
                mib(static_cast<double>(rss_end.anon)).c_str(), mib(static_cast<double>(s.reserved_bytes())).c_str());
  return 0;
}

// ---- cold start ---------------------------------------------------------------------------

// The files a model consists of (a folder: every regular file in it).
std::vector<std::string> model_files(const std::string& path) {
  std::vector<std::string> out;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.is_regular_file(ec)) out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
  } else {
    out.push_back(path);
  }
  return out;
}

struct Residency {
  uint64_t resident = 0, pages = 0;
};

// Which pages of the files are in the page cache now (mincore on a fresh map; touches nothing).
Residency residency(const std::vector<std::string>& files) {
  Residency r;
  const long page = ::sysconf(_SC_PAGESIZE);
  for (const auto& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
      const size_t size = static_cast<size_t>(st.st_size);
      void* m = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
      if (m != MAP_FAILED) {
        const size_t n = (size + static_cast<size_t>(page) - 1) / static_cast<size_t>(page);
        std::vector<unsigned char> v(n);
        if (::mincore(m, size, v.data()) == 0) {
          r.pages += n;
          for (unsigned char b : v) r.resident += b & 1;
        }
        ::munmap(m, size);
      }
    }
    ::close(fd);
  }
  return r;
}

// Drops the model's files from the page cache with posix_fadvise(DONTNEED) (unprivileged; works
// for clean pages nobody maps), and with `all` the whole cache through /proc/sys/vm/drop_caches
// where this process may write it (root; evicts everyone's files, the kiln binary's too).
std::string drop_cache(const std::vector<std::string>& files, bool all) {
  std::string how = "posix_fadvise";
  if (all) {
    ::sync();
    if (FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w")) {
      const bool wrote = std::fputs("3\n", f) >= 0;
      if (std::fclose(f) == 0 && wrote) how = "drop_caches+posix_fadvise";
    }
  }
  for (const auto& p : files) {
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  return how;
}

// The child: open, tokenize, one prompt step, the first token; timestamps on steady_clock
// (CLOCK_MONOTONIC, shared with the parent).
int first_token(const BenchCmd& c) {
  const double t_main = now_s();
  auto opened = open_for_bench(c);
  if (!opened) return fail(opened.status());
  const double t_open = now_s();
  const Residency res = residency(model_files(c.model));
  auto prompt = opened->tokenizer->encode(c.prompt, opened->tokenizer->bos_id() >= 0);
  if (!prompt) return fail(prompt.status());
  const int n_ctx = std::min(opened->model->config().max_seq_len, static_cast<int>(prompt->size()) + 64);
  auto session = ProgramSession::create(opened->model, n_ctx, c.threads > 0 ? c.threads : 1, kv_dtype(c.kv_type));
  if (!session) return fail(session.status());
  const double t_session = now_s();
  auto logits = (*session)->decode(*prompt);
  if (!logits) return fail(logits.status());
  const auto best = std::max_element(logits->begin(), logits->end()) - logits->begin();
  const double t_first = now_s();
  std::printf("%s\n", OJ{{"t_main", t_main},
                         {"t_open", t_open},
                         {"t_session", t_session},
                         {"t_first", t_first},
                         {"first_token", best},
                         {"prompt_tokens", prompt->size()},
                         {"resident_pages_after_open", res.resident},
                         {"file_pages", res.pages},
                         {"peak_rss_bytes", peak_rss_bytes()}}
                          .dump()
                          .c_str());
  return 0;
}

Result<OJ> spawn_first_token(const BenchCmd& c) {
  int fds[2];
  if (::pipe(fds) != 0) return io_error(std::string("pipe: ") + std::strerror(errno));
  std::vector<std::string> args = {"kiln", "bench", "--first-token", c.model, "-q", c.scheme, "--group",
                                   std::to_string(c.group), "--prompt", c.prompt,
                                   "--threads", std::to_string(c.threads > 0 ? c.threads : 1), "--kv-type", c.kv_type};
  if (!c.tokenizer.empty()) {
    args.push_back("--tokenizer");
    args.push_back(c.tokenizer);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid = 0;
  const double t0 = now_s();
  const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return io_error(std::string("cannot start the child: ") + std::strerror(rc));
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return io_error("the first-token child failed (see its error above)");
  OJ j = OJ::parse(out, nullptr, false);
  if (j.is_discarded() || !j.contains("t_first")) return io_error("the first-token child printed no result");
  j["t_spawn"] = t0;
  return j;
}

int cold_start(const BenchCmd& c) {
  if (c.model.empty()) return usage_error("--cold-start needs a model");
  if (c.cache != "warm" && c.cache != "cold" && c.cache != "both")
    return usage_error("--cache must be warm, cold or both");
  const std::vector<std::string> files = model_files(c.model);
  uint64_t file_bytes = 0;
  for (const auto& f : files) file_bytes += fs::file_size(f);
  std::vector<std::string> modes;
  if (c.cache != "cold") modes.push_back("warm");
  if (c.cache != "warm") modes.push_back("cold");
  OJ result{{"model", c.model}, {"scheme", c.scheme}, {"files", files.size()}, {"file_bytes", file_bytes},
            {"repeats", c.repeats}};
  // One untimed run, so that "warm" is warm.
  if (auto w = spawn_first_token(c); !w) return fail(w.status());
  for (const std::string& mode : modes) {
    std::vector<double> first, exec, open, session, prompt;
    std::vector<double> resident_frac, before_frac;
    std::string how;
    uint64_t resident_pages = 0, file_pages = 0, rss = 0;
    for (int r = 0; r < c.repeats; ++r) {
      if (mode == "cold") {
        how = drop_cache(files, c.drop_all);
        const Residency b = residency(files);
        before_frac.push_back(b.pages ? static_cast<double>(b.resident) / static_cast<double>(b.pages) : 0.0);
      }
      auto j = spawn_first_token(c);
      if (!j) return fail(j.status());
      const OJ& o = *j;
      const double t0 = o["t_spawn"].get<double>();
      first.push_back(o["t_first"].get<double>() - t0);
      exec.push_back(o["t_main"].get<double>() - t0);
      open.push_back(o["t_open"].get<double>() - o["t_main"].get<double>());
      session.push_back(o["t_session"].get<double>() - o["t_open"].get<double>());
      prompt.push_back(o["t_first"].get<double>() - o["t_session"].get<double>());
      resident_pages = o["resident_pages_after_open"].get<uint64_t>();
      file_pages = o["file_pages"].get<uint64_t>();
      rss = o["peak_rss_bytes"].get<uint64_t>();
      resident_frac.push_back(file_pages ? static_cast<double>(resident_pages) / static_cast<double>(file_pages) : 0.0);
    }
    const Stats f = stats_of(first), e = stats_of(exec), op = stats_of(open), se = stats_of(session),
                pr = stats_of(prompt), rf = stats_of(resident_frac);
    OJ m{{"first_token_s", stats_json(f)}, {"exec_s", stats_json(e)},    {"open_s", stats_json(op)},
         {"session_s", stats_json(se)},    {"prompt_s", stats_json(pr)}, {"peak_rss_bytes", rss}};
    if (mode == "cold") {
      m["drop"] = how;
      m["resident_before_fraction"] = stats_json(stats_of(before_frac));
      m["resident_after_open_fraction"] = stats_json(rf);
      m["resident_after_open_pages"] = resident_pages;
      m["file_pages"] = file_pages;
    }
    result[mode] = m;
    if (!c.json) {
      std::printf("%-5s first token %8.1f ms (median of %d; %.1f..%.1f) = exec %.1f + open %.1f + session %.1f + prompt %.1f ms; peak RSS %s\n",
                  mode.c_str(), f.median * 1e3, c.repeats, f.min * 1e3, f.max * 1e3, e.median * 1e3, op.median * 1e3,
                  se.median * 1e3, pr.median * 1e3, mib(static_cast<double>(rss)).c_str());
      if (mode == "cold")
        std::printf("      cache dropped by %s (%.2f%% of the files' pages still resident before); after open %llu of %llu pages (%.2f%%) resident\n",
                    how.c_str(), 100.0 * stats_of(before_frac).max, static_cast<unsigned long long>(resident_pages),
                    static_cast<unsigned long long>(file_pages), 100.0 * rf.median);
    }
  }
  if (c.json) std::printf("%s\n", result.dump().c_str());
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<BenchCmd>();
  CLI::App* cmd = app.add_subcommand("bench", "Prefill/decode speed against the compute and memory-bandwidth rooflines; cold start");
  cmd->add_option("model,-m,--model", c->model, ".kiln file or source model (default: the shipped stories260K)");
  CLI::Option* n_prompt = cmd->add_option("-p,--n-prompt", c->n_prompt, "prompt sizes for the prefill tests, comma-separated (0: none)")
      ->delimiter(',');
  cmd->add_option("-n,--n-gen", c->n_gen, "tokens for the decode test (0: none)")->check(at_least(0));
  cmd->add_option("-d,--depth", c->depth, "tokens already in the KV cache when each test starts")
      ->check(at_least(0));
  cmd->add_option("-r,--repetitions", c->repeats, "repeats of each test (median and spread reported)")
      ->check(at_least(1));
  add_threads_flag(cmd, c->threads);
  add_kv_type_flag(cmd, c->kv_type);
  CLI::Option* quant = cmd->add_option("-q,--quant", c->scheme, "scheme for a source model compiled in memory (default w4a16)");
  CLI::Option* group = cmd->add_option("--group", c->group, "group size of a 4-bit scheme (default 32)");
  cmd->add_option("--tokenizer", c->tokenizer, "tokenizer file, if not the model's own");
  cmd->add_flag("--json", c->json, "print one JSON object");
  cmd->add_flag("--no-warmup", c->no_warmup, "skip the untimed warm-up run");
  cmd->add_option("--bw-mib", c->bw_mib, "bandwidth probe buffer in MiB (default: max(1 GiB, 4 x LLC))")
      ->check(at_least<int64_t>(0));
  cmd->add_option("--bw-passes", c->bw_passes, "timed passes of the bandwidth probe")->check(at_least(1));
  cmd->add_flag("--cold-start", c->cold_start,
                "time from process start to the first token (each repeat a new process), page cache warm and cold");
  cmd->add_option("--cache", c->cache, "--cold-start: warm, cold or both (default)");
  cmd->add_option("--prompt", c->prompt, "--cold-start: the prompt of the first token");
  cmd->add_flag("--drop-caches", c->drop_all,
                "--cold-start: also drop the whole page cache (root only; default: only the model's files)");
  cmd->add_flag("--first-token", c->first_token)->group("");  // the child of --cold-start
  add_perf_flag(cmd, c->perf);
  cmd->add_option("--sessions", c->sessions,
                  "N[,N...]: N sessions generating at once on N threads (aggregate decode tok/s, time to first "
                  "token); -p gives the prompt size (default 32), -n the tokens per session")
      ->delimiter(',');
  cmd->callback([c, n_prompt, quant, group, &exit_code] {
    // Usage errors before any work: an unknown scheme, and flags a .kiln cannot use.
    if (auto q = source_scheme(c->scheme, c->group); !q) {
      exit_code = usage_error(q.status().message());
      return;
    }
    // (The --cold-start child gets -q and --group whatever the model.)
    for (const auto& [opt, flag, what] : {std::tuple{quant->count() > 0, "-q", "quantization"},
                                          std::tuple{group->count() > 0, "--group", "quantization"},
                                          std::tuple{!c->tokenizer.empty(), "--tokenizer", "tokenizer"}}) {
      if (!opt || c->first_token) continue;
      if (std::string e = kiln_file_fixes(c->model, flag, what); !e.empty()) {
        exit_code = usage_error(e);
        return;
      }
    }
    if (!c->sessions.empty()) {
      BenchSessionsArgs a;
      a.model = c->model.empty() ? default_model_path() : c->model;
      a.scheme = c->scheme;
      a.tokenizer = c->tokenizer;
      a.kv_type = c->kv_type;
      a.perf = c->perf;
      a.sessions = c->sessions;
      a.n_prompt = n_prompt->count() > 0 && !c->n_prompt.empty() ? c->n_prompt.front() : 32;
      a.n_gen = c->n_gen;
      a.threads = c->threads;
      a.group = c->group;
      a.json = c->json;
      exit_code = bench_sessions(a);
      return;
    }
    if (c->first_token) exit_code = first_token(*c);
    else if (c->cold_start) exit_code = cold_start(*c);
    else exit_code = bench(*c);
  });
}

}  // namespace kiln::cli
