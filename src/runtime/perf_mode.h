// Performance modes (Genie's and QNN's vocabulary) as concrete choices: how many threads, which
// cores, how long idle workers spin. On a heterogeneous ARM SoC the cores are grouped by
// /sys/devices/system/cpu/cpuN/cpu_capacity (or cpufreq/cpuinfo_max_freq where that is absent);
// the "fast" cores are those of the highest capacity the process may run on.
//
//   burst        every fast core; workers spin 1 ms between steps (lowest latency, most power)
//   balanced     the fast cores, at most 4; spin 100 us (the default)
//   sustained    half the fast cores (at least 1); spin 50 us: what a phone holds without throttling
//   power_saver  one thread, on the slowest class of cores; no spin
//
// Threads are pinned (sched_setaffinity) only where the cores differ; never more threads than
// the cores the process may use.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"

namespace kiln {

enum class PerfMode { kBalanced, kBurst, kSustained, kPowerSaver };

Result<PerfMode> parse_perf_mode(std::string_view name);
std::string_view perf_mode_name(PerfMode m);

struct CpuInfo {
  int id = 0;
  long capacity = 0;  // relative; 0 when the kernel does not say
};
// The CPUs this process may run on, with their capacities.
std::vector<CpuInfo> usable_cpus();

struct ThreadPlan {
  int n_threads = 1;
  PoolOptions pool;
  std::string summary;  // "2 threads on cpus 0-1 (balanced)"
};

// `requested` > 0 fixes the thread count (clamped to the usable cores); 0 lets the mode choose.
ThreadPlan plan_threads(PerfMode mode, int requested, const std::vector<CpuInfo>& cpus);
inline ThreadPlan plan_threads(PerfMode mode, int requested) { return plan_threads(mode, requested, usable_cpus()); }

}  // namespace kiln
