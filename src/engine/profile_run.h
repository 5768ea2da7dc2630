// `kiln profile`'s measurement, behind the front door: a fixed workload (a pseudo-random prompt,
// then greedy decoding) run on a session with the step tracer on, an optional timing of the
// tracer's own cost, and the profile built from the records (with the machine's bandwidth and
// compute ceilings when asked). perf/ renders the result; the CLI only prints it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/open_model.h"
#include "perf/profile.h"

namespace kiln {

struct ProfileRunOptions {
  int n_prompt = 128, n_gen = 64;
  int n_threads = 1;
  DType kv_dtype = DType::kF32;
  ProfileLevel level = ProfileLevel::kDetailed;
  bool check_numerics = false;
  bool warmup = true;   // an untimed run first (page faults, the workers' first wake-up)
  int overhead = 0;     // decode steps timed with the tracer off and as many on, alternated
  bool ceilings = true;  // measure bandwidth and compute ceilings (detailed level, no fault)
  uint64_t bandwidth_bytes = 0;  // the bandwidth probe's buffer; 0: its default
  int bandwidth_passes = 3;
};

// The tracer's cost, from overhead steps: medians of the untraced and traced decode steps, and
// the median of each traced step against the mean of its untraced neighbours.
struct TracerOverhead {
  double off_seconds = 0, on_seconds = 0, paired_ratio = 1;
  size_t steps = 0;
};

struct ProfileRun {
  Profile profile;
  // The workload's own status: a NaN found by --check-numerics still gives a profile (up to it).
  Status run;
  bool fault = false;  // the tracer stopped at a non-finite value
  std::optional<TracerOverhead> overhead;
};

// The context the workload needs: the prompt plus the longer of the decode and overhead steps.
inline int profile_context(const ProfileRunOptions& o) { return o.n_prompt + std::max(o.n_gen, 2 * o.overhead); }

// Runs the workload on a session of `m` (a model opened with open_model). An error is a run that
// gave no profile (a session that cannot be made, a failed step without a numerics fault).
Result<ProfileRun> profile_model(const OpenedModel& m, const ProfileRunOptions& o);

}  // namespace kiln
