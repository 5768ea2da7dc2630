// A profile as one self-contained HTML page (inline SVG and CSS, no script, nothing fetched):
// time per layer stacked by op kind, a roofline chart (each instruction's arithmetic intensity
// against its achieved rate, under the measured bandwidth and compute ceilings), resident memory
// over the steps, and the summary tables.
#pragma once

#include <string>

#include "perf/profile.h"

namespace kiln {

std::string profile_to_html(const Profile& p);

}  // namespace kiln
