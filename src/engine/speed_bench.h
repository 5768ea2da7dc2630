// kiln bench's measurement, in the spirit of llama-bench: prefill and decode speed from random
// tokens, each against this machine's roofline measured in the same run (prefill: the kernels'
// arithmetic, perf/compute_probe.h; decode: the memory bandwidth, perf/bandwidth.h).
//
// Decode reads every weight once per token, so its limit is bandwidth / bytes read per token.
// Bytes read per token = every weight byte of the compiled program (the embedding table counts
// one row unless it is also the classifier) + the KV cache read at the mean context of the
// decode run (from an empty cache, as llama-bench's tg test).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/open_model.h"
#include "perf/bandwidth.h"
#include "perf/compute_probe.h"
#include "perf/process_memory.h"
#include "perf/sample_stats.h"
#include "perf/weight_summary.h"

namespace kiln {

struct SpeedBenchOptions {
  std::string model;
  OpenOptions open;
  std::vector<int> n_prompt = {128, 512};  // prefill tests (sizes > 0)
  int n_gen = 64;                          // decode test (0: none)
  int depth = 0;    // tokens in the KV cache when each test starts (prefilled untimed, as llama-bench's -d)
  int repeats = 5;
  int threads = 1;
  PoolOptions pool;
  DType kv_dtype = DType::kF32;
  bool warmup = true;          // an untimed run first: faults the weights in, warms the caches
  uint64_t bw_bytes = 0;       // the bandwidth probe's buffer (0: its default)
  int bw_passes = 7;
};

struct PrefillResult {
  int n_prompt = 0;
  SampleStats tps;
  std::optional<PrefillRoofline> roofline;
  std::string roofline_error;  // why there is none
};

// The decode test against the bandwidth roofline.
struct DecodeRoofline {
  double mean_ctx = 0;            // the KV cache's mean length over the decode run
  double kv_read = 0;             // KV cache bytes read per token at that length
  double bytes_per_token = 0;     // weights read per token + kv_read
  double roofline_tps = 0;        // bandwidth / bytes_per_token
  double ratio = 0;               // achieved median / roofline
  SampleStats paired_ratio;       // each repeat against the mean of the passes on either side of it
};

// Each scheme's share of a decode step (the scheme mix's other half: WeightSummary::mix has the
// bytes), from one more decode run of the same tokens, untimed, with the profiler's
// per-instruction records (runtime/step_trace.h). A matmul instruction's time goes to the schemes
// of its matrices in proportion to their bytes (a fused QKV can mix Q5_0 and Q8_0); every other
// instruction (attention, norms, the embedding's gather, ...) and the time between instructions
// is `other`.
struct DecodeSchemeTimes {
  int tokens = 0;                     // decoded in the profiled run (0: no decode test)
  double step_seconds = 0;            // per token, the whole step
  std::vector<std::pair<std::string, double>> matmul_seconds;  // per token, by scheme label, most first
  double other_seconds = 0;           // per token
};

struct SpeedBenchReport {
  std::string kind;  // what open_model said the file was
  ModelConfig config;
  WeightSummary weights;
  double open_seconds = 0;
  std::string kernels;  // Model::kernel_choice(): the table that ran, and why not a faster one
  int threads = 0, session_threads = 0;
  std::vector<PrefillResult> prefill;
  SampleStats decode_tps;  // empty without a decode test
  BandwidthResult bandwidth;
  bool probe_in_helper = false;  // the bandwidth probe ran in a forked helper (else in this process)
  DecodeRoofline decode;
  DecodeSchemeTimes decode_by_scheme;
  uint64_t peak_rss = 0;      // this process, before any in-process probe
  uint64_t run_peak_rss = 0;  // the whole run's, the probe's buffer included (as /usr/bin/time -v)
  uint64_t kv_cache_bytes = 0, session_reserved_bytes = 0;
  uint64_t rss_budget = 0;  // weights + KV cache + 64 MiB
  ResidentSplit rss_end;
};

Result<SpeedBenchReport> run_speed_bench(const SpeedBenchOptions& options);

}  // namespace kiln
