// A profile as the text summary `kiln profile` prints: prefill against decode, the top ops,
// layers and instructions by time, the share per back end and op kind, and where the memory is.
#pragma once

#include <string>

#include "perf/profile.h"

namespace kiln {

std::string profile_to_text(const Profile& p, size_t top = 10);

}  // namespace kiln
