// A memory read-bandwidth probe: what this machine can stream from DRAM, measured in the same run
// as a benchmark so that the decode roofline (bandwidth / bytes read per token) is this
// machine's, now.
//
// `threads` threads each read their share of one buffer much larger than the last-level cache,
// summing it in 64-bit words, once as eight streams side by side and once as one, each timed
// from a barrier before the first read to a barrier after the last; a pass is the faster of the
// two (which one wins depends on the core). measure_read_bandwidth() makes a probe, runs one
// untimed pass (warm-up), then `passes` timed ones, and reports their median.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"

namespace kiln {

// The size of the largest cache level of CPU 0 (Linux sysfs); 0 when unknown.
uint64_t last_level_cache_bytes();
// max(1 GiB, 4 x the last-level cache), at most a quarter of the RAM.
uint64_t default_probe_bytes();

// A mapped, filled buffer and the passes over it; the buffer is unmapped with the probe.
class BandwidthProbe {
 public:
  // bytes 0: default_probe_bytes(). Rounded down to a multiple of 64 x threads.
  static Result<std::unique_ptr<BandwidthProbe>> create(uint64_t bytes, int threads);
  ~BandwidthProbe();
  BandwidthProbe(const BandwidthProbe&) = delete;
  BandwidthProbe& operator=(const BandwidthProbe&) = delete;

  double pass_gbs();  // one timed pass (the faster way of reading), 1e9 bytes per second
  uint64_t bytes() const { return bytes_; }
  int threads() const { return threads_; }

 private:
  BandwidthProbe() = default;
  uint64_t* words_ = nullptr;
  uint64_t bytes_ = 0;
  void* map_ = nullptr;  // the whole mapping (words_ is its first 2 MiB boundary)
  uint64_t map_bytes_ = 0;
  int threads_ = 1;
  uint64_t sink_ = 0;
};

struct BandwidthOptions {
  uint64_t bytes = 0;  // 0: default_probe_bytes()
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

// Median, minimum and maximum of `passes` (must not be empty) into a result.
BandwidthResult summarize_bandwidth(std::vector<double> passes, uint64_t bytes, int threads);

Result<BandwidthResult> measure_read_bandwidth(const BandwidthOptions& options);

}  // namespace kiln
