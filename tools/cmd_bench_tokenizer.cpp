// kiln bench-tokenizer: encode throughput of a tokenizer on a text file, one thread.
#include <CLI/CLI.hpp>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/mapped_file.h"
#include "tools/cli_common.h"
#include "engine/open_tokenizer.h"

namespace kiln::cli {

namespace {

struct BenchTokenizerCmd {
  std::string tokenizer, file;
  double seconds = 2.0;
  int vocab_size = 0;
  bool json = false;
};

int bench(const BenchTokenizerCmd& c) {
  const auto t_load = std::chrono::steady_clock::now();
  auto tok = open_tokenizer(c.tokenizer, c.vocab_size);
  if (!tok) return fail(tok.status());
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  auto text = read_text_file(c.file);
  if (!text) return fail(text.status());
  if (text->empty()) return fail(invalid_argument(c.file + ": the file is empty"));
  // Encode the whole file again and again until `seconds` have passed (at least 3 runs); report
  // the best run, as benchmarks of a warm loop do.
  // The thread's CPU time too: on a busy machine the wall clock also counts time spent waiting
  // for a core.
  auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  };
  double best = 1e300, best_cpu = 1e300, total = 0;
  size_t tokens = 0;
  int runs = 0;
  while (runs < 3 || total < c.seconds) {
    const double c0 = cpu_now();
    const auto t0 = std::chrono::steady_clock::now();
    auto ids = (*tok)->encode(*text, EncodeOptions{});
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best_cpu = std::min(best_cpu, cpu_now() - c0);
    if (!ids) return fail(ids.status().with_context(c.file));
    tokens = ids->size();
    best = std::min(best, s);
    total += s;
    ++runs;
  }
  best_cpu = std::max(best_cpu, 1e-9);
  const double mb = static_cast<double>(text->size()) / 1e6;
  if (c.json) {
    std::printf("{\"bytes\": %zu, \"tokens\": %zu, \"runs\": %d, \"best_seconds\": %.6f, \"mb_per_s\": %.3f, "
                "\"cpu_mb_per_s\": %.3f, \"tokens_per_s\": %.0f, \"load_seconds\": %.3f}\n",
                text->size(), tokens, runs, best, mb / best, mb / best_cpu, static_cast<double>(tokens) / best, load_s);
  } else {
    std::printf("%s: %zu bytes -> %zu tokens (%.2f bytes/token); best of %d runs %.4f s: %.2f MB/s (%.2f MB/s of CPU "
                "time), %.0f tokens/s (one thread; load %.3f s)\n",
                c.file.c_str(), text->size(), tokens, static_cast<double>(text->size()) / static_cast<double>(tokens ? tokens : 1),
                runs, best, mb / best, mb / best_cpu, static_cast<double>(tokens) / best, load_s);
  }
  return 0;
}

}  // namespace

void add_bench_tokenizer_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<BenchTokenizerCmd>();
  CLI::App* cmd = app.add_subcommand("bench-tokenizer", "Encode throughput (MB/s, one thread) on a text file");
  cmd->add_option("tokenizer", c->tokenizer, "tokenizer.json, HF folder, .gguf, llama2.c tokenizer .bin or .kiln")
      ->required();
  cmd->add_option("--file", c->file, "the text to encode")->required();
  cmd->add_option("--seconds", c->seconds, "how long to keep encoding (default 2)")->check(greater_than(0.0));
  cmd->add_option("--vocab-size", c->vocab_size, "llama2.c .bin: its vocabulary size (default: count the records)")
      ->check(at_least(0));
  cmd->add_flag("--json", c->json, "print one JSON object");
  cmd->callback([c, &exit_code] { exit_code = bench(*c); });
}

}  // namespace kiln::cli
