// A memory read-bandwidth probe: what this machine can stream from DRAM, measured in the same run
// as a benchmark so that the decode roofline (bandwidth / bytes read per token) is this
// machine's, now.
//
// `threads` threads each read their share of one buffer much larger than the last-level cache,
// summing it in 64-bit words; a pass is timed from a barrier before the first read to a barrier
// after the last; the first pass (page faults, warm-up) is not counted; the result is the median
// of the others. The buffer is mapped for the probe and unmapped before it returns.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace kiln {

struct BandwidthOptions {
  uint64_t bytes = 0;  // 0: max(1 GiB, 4 x the last-level cache), at most a quarter of the RAM
  int threads = 1;
  int passes = 7;      // timed passes, after one untimed
};

struct BandwidthResult {
  double median_gbs = 0;  // 1e9 bytes per second
  double min_gbs = 0;
  double max_gbs = 0;
  std::vector<double> pass_gbs;
  uint64_t bytes = 0;  // buffer size read per pass
  int threads = 0;
  uint64_t llc_bytes = 0;  // the last-level cache size found (0: unknown)
};

// The size of the largest cache level of CPU 0 (Linux sysfs); 0 when unknown.
uint64_t last_level_cache_bytes();

Result<BandwidthResult> measure_read_bandwidth(const BandwidthOptions& options);

}  // namespace kiln
