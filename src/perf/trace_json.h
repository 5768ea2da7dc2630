// A profile as Chrome trace-event JSON (the "JSON Object Format" that Perfetto and
// chrome://tracing open): one track per thread that ran steps, a slice per step and per
// instruction within it (args: node, layer, back end, kernel, bytes, rates), and a counter of
// resident memory at the end of each step. Times in microseconds from the tracer's start.
#pragma once

#include <nlohmann/json.hpp>

#include "perf/profile.h"

namespace kiln {

nlohmann::ordered_json trace_to_json(const Profile& p);

}  // namespace kiln
