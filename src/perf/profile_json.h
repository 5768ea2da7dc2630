// A profile as JSON: what `kiln profile --json` prints and kiln_session_profile_json() returns.
#pragma once

#include <nlohmann/json.hpp>

#include "perf/profile.h"

namespace kiln {

// `top`: rows of each table (0: all). The per-instruction records are not included (the trace
// has them).
nlohmann::ordered_json profile_to_json(const Profile& p, size_t top = 0);

}  // namespace kiln
