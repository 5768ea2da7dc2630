// What the bench commands print alike: the clock, sizes in MiB, a measurement's median and spread.
#pragma once

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "perf/sample_stats.h"

namespace kiln::cli {

// steady_clock (CLOCK_MONOTONIC): a parent and its child processes read the same clock.
inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline std::string mib(double bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f MiB", bytes / (1024.0 * 1024.0));
  return s;
}

inline nlohmann::ordered_json stats_json(const SampleStats& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"stddev", s.stddev}, {"samples", s.samples}};
}

}  // namespace kiln::cli
