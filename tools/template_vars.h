// --set NAME=JSON, the extra template variables of `kiln template` and `kiln chat`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "core/status.h"

namespace kiln::cli {

// "enable_thinking=false" -> {"enable_thinking", false}; a string value needs JSON quotes.
Result<std::pair<std::string, nlohmann::ordered_json>> parse_template_var(const std::string& flag);

}  // namespace kiln::cli
