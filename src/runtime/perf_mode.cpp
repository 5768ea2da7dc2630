#include "runtime/perf_mode.h"

#include <algorithm>
#include <fstream>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

namespace kiln {

Result<PerfMode> parse_perf_mode(std::string_view name) {
  if (name == "balanced") return PerfMode::kBalanced;
  if (name == "burst") return PerfMode::kBurst;
  if (name == "sustained" || name == "sustained_high") return PerfMode::kSustained;
  if (name == "power_saver" || name == "power-saver") return PerfMode::kPowerSaver;
  return invalid_argument("unknown performance mode '" + std::string(name) +
                          "' (burst, balanced, sustained or power_saver)");
}

std::string_view perf_mode_name(PerfMode m) {
  switch (m) {
    case PerfMode::kBalanced: return "balanced";
    case PerfMode::kBurst: return "burst";
    case PerfMode::kSustained: return "sustained";
    case PerfMode::kPowerSaver: return "power_saver";
  }
  return "balanced";
}

namespace {
long read_long(const std::string& path) {
  std::ifstream in(path);
  long v = 0;
  return (in >> v) ? v : 0;
}
}  // namespace

std::vector<CpuInfo> usable_cpus() {
  std::vector<CpuInfo> out;
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (!CPU_ISSET(c, &set)) continue;
      const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/";
      long cap = read_long(base + "cpu_capacity");
      if (cap == 0) cap = read_long(base + "cpufreq/cpuinfo_max_freq");
      out.push_back({c, cap});
    }
  }
#endif
  if (out.empty()) {
    const int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int c = 0; c < n; ++c) out.push_back({c, 0});
  }
  return out;
}

ThreadPlan plan_threads(PerfMode mode, int requested, const std::vector<CpuInfo>& cpus_in) {
  std::vector<CpuInfo> cpus = cpus_in;
  if (cpus.empty()) cpus.push_back({0, 0});
  long hi = 0, lo = cpus.front().capacity;
  for (const CpuInfo& c : cpus) hi = std::max(hi, c.capacity), lo = std::min(lo, c.capacity);
  const bool mixed = hi != lo;
  std::vector<int> fast, slow;
  for (const CpuInfo& c : cpus) {
    if (c.capacity == hi) fast.push_back(c.id);
    if (c.capacity == lo) slow.push_back(c.id);
  }
  const int n_fast = static_cast<int>(fast.size());
  ThreadPlan p;
  std::vector<int> where = fast;
  switch (mode) {
    case PerfMode::kBurst:
      p.n_threads = n_fast;
      p.pool.spin_us = 1000;
      break;
    case PerfMode::kBalanced:
      p.n_threads = std::min(n_fast, 4);
      p.pool.spin_us = 100;
      break;
    case PerfMode::kSustained:
      p.n_threads = std::max(1, n_fast / 2);
      p.pool.spin_us = 50;
      break;
    case PerfMode::kPowerSaver:
      p.n_threads = 1;
      p.pool.spin_us = 0;
      where = slow;
      break;
  }
  if (requested > 0) {
    p.n_threads = std::min(requested, static_cast<int>(cpus.size()));
    // More threads than the chosen class has cores: let them run on every usable core.
    if (p.n_threads > static_cast<int>(where.size())) {
      where.clear();
      for (const CpuInfo& c : cpus) where.push_back(c.id);
    }
  }
  if (mixed) p.pool.cpus = where;
  p.summary = std::to_string(p.n_threads) + (p.n_threads == 1 ? " thread" : " threads") + " (" +
              std::string(perf_mode_name(mode)) + (mixed ? ", pinned to " + std::to_string(where.size()) + " of " +
                                                               std::to_string(cpus.size()) + " cores"
                                                         : "") +
              ")";
  return p;
}

}  // namespace kiln
