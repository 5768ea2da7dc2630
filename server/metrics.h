// The server's counters, written as Prometheus text at GET /metrics.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::server {

// What one finished request adds.
struct RequestRecord {
  std::string model;
  bool ok = true;
  bool cancelled = false;  // the client went away
  int prompt_tokens = 0, reused_tokens = 0, generated_tokens = 0;
  double ttft_ms = 0, decode_tokens_per_second = 0;
};

// Gauges read when /metrics is asked.
struct ModelGauges {
  std::string model;
  int slots = 0, busy = 0, queued = 0;
};

class Metrics {
 public:
  void record(const RequestRecord& r);
  // `model` empty: the request was refused before a model was known.
  void record_rejected(const std::string& model, int http_status);
  std::string prometheus(const std::vector<ModelGauges>& gauges, const kiln_runtime_stats& rt) const;

 private:
  struct PerModel {
    std::string model;
    uint64_t requests = 0, failed = 0, cancelled = 0, rejected_busy = 0, rejected_bad = 0;
    uint64_t prompt_tokens = 0, reused_tokens = 0, generated_tokens = 0;
    std::vector<uint64_t> ttft_buckets;  // cumulative counts, one per kTtftBounds entry, then +Inf
    double ttft_sum_s = 0;
    uint64_t ttft_count = 0;
    double last_tokens_per_second = 0;
  };
  PerModel& at_locked(const std::string& model);

  mutable std::mutex mu_;
  std::vector<PerModel> models_;
  uint64_t invalid_ = 0;
};

}  // namespace kiln::server
