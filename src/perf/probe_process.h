// The bandwidth probe in a helper process, forked before the model is opened (while the process
// has one thread): its buffer (1 GiB or more) is then no part of the benchmark's peak RSS, and its
// passes can run between decode repeats, so that bandwidth and decode see the same machine state
// (on a shared machine that drifts).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>

#include "core/status.h"

namespace kiln {

class ProbeProcess {
 public:
  // nullptr where fork or the probe's buffer fails (the caller then probes in its own process).
  static std::unique_ptr<ProbeProcess> start(uint64_t bytes, int threads);
  ~ProbeProcess();  // stops and reaps the helper: its peak is then among the children's
  ProbeProcess(const ProbeProcess&) = delete;
  ProbeProcess& operator=(const ProbeProcess&) = delete;

  // One timed pass over the buffer, in GB/s (1e9 bytes per second).
  Result<double> pass();
  uint64_t bytes() const { return bytes_; }

 private:
  ProbeProcess() = default;
  pid_t pid_ = -1;
  int cmd_ = -1, res_ = -1;
  uint64_t bytes_ = 0;
};

}  // namespace kiln
