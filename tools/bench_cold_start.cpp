#include "tools/bench_cold_start.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/first_token.h"
#include "perf/page_cache.h"
#include "perf/process_memory.h"
#include "perf/sample_stats.h"
#include "tools/bench_common.h"
#include "tools/cli_common.h"

extern char** environ;

namespace kiln::cli {

namespace fs = std::filesystem;
using OJ = nlohmann::ordered_json;

// The child: open, tokenize, one prompt step, the first token; timestamps on steady_clock
// (CLOCK_MONOTONIC, shared with the parent).
int bench_first_token(const ColdStartArgs& c) {
  const double t_main = now_s();
  FirstTokenOptions fo;
  fo.open = c.open;
  fo.n_threads = c.threads > 0 ? c.threads : 1;
  fo.kv_dtype = kv_dtype(c.kv_type);
  fo.clock = now_s;
  Residency res;
  fo.after_open = [&] { res = page_cache_residency(model_files(c.model)); };
  auto first = first_token(c.model, c.prompt, fo);
  if (!first) return fail(first.status());
  std::printf("%s\n", OJ{{"t_main", t_main},
                         {"t_open", first->t_open},
                         {"t_session", first->t_session},
                         {"t_first", first->t_first},
                         {"first_token", first->token},
                         {"prompt_tokens", first->prompt_tokens},
                         {"resident_pages_after_open", res.resident},
                         {"file_pages", res.pages},
                         {"peak_rss_bytes", peak_rss_bytes()}}
                          .dump()
                          .c_str());
  return 0;
}

namespace {

Result<OJ> spawn_first_token(const ColdStartArgs& c) {
  int fds[2];
  if (::pipe(fds) != 0) return io_error(std::string("pipe: ") + std::strerror(errno));
  std::vector<std::string> args = {"kiln", "bench", "--first-token", c.model, "--group",
                                   std::to_string(c.group), "--prompt", c.prompt,
                                   "--threads", std::to_string(c.threads > 0 ? c.threads : 1), "--kv-type", c.kv_type};
  if (!c.scheme.empty()) {
    args.push_back("-q");
    args.push_back(c.scheme);
  }
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

}  // namespace

int bench_cold_start(const ColdStartArgs& c) {
  if (c.model.empty()) return usage_error("--cold-start needs a model");
  if (c.cache != "warm" && c.cache != "cold" && c.cache != "both")
    return usage_error("--cache must be warm, cold or both");
  const std::vector<std::string> files = model_files(c.model);
  uint64_t file_bytes = 0;
  for (const auto& f : files) {
    std::error_code ec;
    const auto size = fs::file_size(f, ec);
    if (ec) return fail(not_found("cannot read the model file " + f + ": " + ec.message()));
    file_bytes += size;
  }
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
        how = drop_from_page_cache(files, c.drop_all);
        const Residency b = page_cache_residency(files);
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
    const SampleStats f = summarize_samples(first), e = summarize_samples(exec), op = summarize_samples(open),
                      se = summarize_samples(session), pr = summarize_samples(prompt),
                      rf = summarize_samples(resident_frac);
    OJ m{{"first_token_s", stats_json(f)}, {"exec_s", stats_json(e)},    {"open_s", stats_json(op)},
         {"session_s", stats_json(se)},    {"prompt_s", stats_json(pr)}, {"peak_rss_bytes", rss}};
    if (mode == "cold") {
      m["drop"] = how;
      m["resident_before_fraction"] = stats_json(summarize_samples(before_frac));
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
                    how.c_str(), 100.0 * summarize_samples(before_frac).max, static_cast<unsigned long long>(resident_pages),
                    static_cast<unsigned long long>(file_pages), 100.0 * rf.median);
    }
  }
  if (c.json) std::printf("%s\n", result.dump().c_str());
  return 0;
}

}  // namespace kiln::cli
