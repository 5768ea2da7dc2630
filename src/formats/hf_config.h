// Hugging Face `config.json` (Llama, Qwen2, Qwen3, Mistral) to ModelConfig.
#pragma once

#include <string>
#include <string_view>

#include "formats/model_config.h"

namespace kiln {

// `generation_config` may be empty; when present its eos_token_id list adds stop tokens.
Result<ModelConfig> parse_hf_config(std::string_view config_json, std::string_view generation_json,
                                    const std::string& file);

}  // namespace kiln
