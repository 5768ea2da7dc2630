// kiln cache list | clear | prune [--max-size SIZE]: the compile cache source models start from
// (engine/compile_cache.h).
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#include "engine/compile_cache.h"
#include "tools/cli_common.h"

namespace kiln::cli {

namespace {

struct CacheCmd {
  std::string dir;
  std::string max_size;  // prune: "" : KILN_CACHE_MAX_SIZE or 8G
};

std::string human(uint64_t bytes) {
  char s[32];
  if (bytes >= (1ull << 30)) std::snprintf(s, sizeof s, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  else std::snprintf(s, sizeof s, "%.1f MiB", static_cast<double>(bytes) / (1ull << 20));
  return s;
}

std::string when(int64_t ns) {
  const std::time_t t = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char s[32];
  std::strftime(s, sizeof s, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return s;
}

std::string dir_of(const CacheCmd& c) { return c.dir.empty() ? default_cache_dir() : c.dir; }

void print_removed(const std::vector<CacheEntry>& removed, const std::string& dir) {
  uint64_t total = 0;
  for (const auto& e : removed) {
    std::printf("removed %s (%s)\n", e.path.c_str(), human(e.bytes).c_str());
    total += e.bytes;
  }
  std::printf("%zu entries removed from %s, %s freed\n", removed.size(), dir.c_str(), human(total).c_str());
}

int list(const CacheCmd& c) {
  const std::string dir = dir_of(c);
  auto entries = list_cache(dir);
  if (!entries) return fail(entries.status());
  uint64_t total = 0;
  std::printf("%s (most recently used first):\n", dir.c_str());
  for (const auto& e : *entries) {
    std::printf("  %-12s  %s  %s\n", human(e.bytes).c_str(), when(e.last_used_ns).c_str(), e.path.c_str());
    total += e.bytes;
  }
  std::printf("%zu entries, %s (bound %s: KILN_CACHE_MAX_SIZE)\n", entries->size(), human(total).c_str(),
              human(default_cache_max_bytes()).c_str());
  return finish_stdout(0);
}

int prune(const CacheCmd& c) {
  uint64_t max = default_cache_max_bytes();
  if (!c.max_size.empty()) {
    auto m = parse_byte_size(c.max_size);
    if (!m) return usage_error("--max-size: " + m.status().message());
    max = *m;
  }
  const std::string dir = dir_of(c);
  auto removed = prune_cache(dir, max);
  if (!removed) return fail(removed.status());
  print_removed(*removed, dir);
  return finish_stdout(0);
}

int clear(const CacheCmd& c) {
  const std::string dir = dir_of(c);
  auto removed = clear_cache(dir);
  if (!removed) return fail(removed.status());
  print_removed(*removed, dir);
  return finish_stdout(0);
}

}  // namespace

void add_cache_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<CacheCmd>();
  CLI::App* cmd = app.add_subcommand("cache", "The compile cache source models start from: list, clear, prune");
  cmd->require_subcommand(1);
  auto with_dir = [c](CLI::App* sub) {
    sub->add_option("--cache-dir", c->dir,
                    "the cache folder (default: KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln)");
    return sub;
  };
  with_dir(cmd->add_subcommand("list", "each entry: size, last use, file"))->callback([c, &exit_code] { exit_code = list(*c); });
  with_dir(cmd->add_subcommand("clear", "remove every entry"))->callback([c, &exit_code] { exit_code = clear(*c); });
  CLI::App* p = with_dir(cmd->add_subcommand("prune", "remove the least recently used entries beyond the bound"));
  p->add_option("--max-size", c->max_size, "the bound: bytes, or with K, M, G, T (default: KILN_CACHE_MAX_SIZE, else 8G)");
  p->callback([c, &exit_code] { exit_code = prune(*c); });
}

}  // namespace kiln::cli
