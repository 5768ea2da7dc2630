// The .kiln config section: the model's configuration as JSON, validated when read.
#pragma once

#include <string>
#include <string_view>

#include "formats/model_config.h"

namespace kiln {

std::string config_to_json(const ModelConfig& c);
Result<ModelConfig> config_from_json(std::string_view text, const std::string& where);

}  // namespace kiln
