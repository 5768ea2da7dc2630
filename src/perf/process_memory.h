// This process's memory as the kernel counts it (Linux; zeros elsewhere).
#pragma once

#include <cstdint>

namespace kiln {

// getrusage's maximum resident set of this process.
uint64_t peak_rss_bytes();
// The largest peak among the child processes reaped so far (getrusage RUSAGE_CHILDREN).
uint64_t children_peak_rss_bytes();

// Resident memory now, by kind (/proc/self/status): where the peak went.
struct ResidentSplit {
  uint64_t total = 0, anon = 0, file = 0;
};
ResidentSplit resident_split_now();

// The machine's physical memory (sysconf); 0 when unknown.
uint64_t physical_memory_bytes();

}  // namespace kiln
