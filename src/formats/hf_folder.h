// A Hugging Face model folder: config.json plus model.safetensors or shards with an index.
#pragma once

#include <string>

#include "formats/tensor_source.h"

namespace kiln {

Result<ImportedModel> read_hf_folder(const std::string& dir);

// Maps a Hugging Face tensor name to kiln's canonical name; empty when it is not a weight kiln uses.
// The architecture decides what post_attention_layernorm is: the FFN's norm (Llama and most), or
// Gemma's norm after attention (its FFN norm is pre_feedforward_layernorm).
std::string hf_to_canonical_name(const std::string& hf_name, Arch arch = Arch::kLlama);
// The inverse: model.layers.N.* for blk.N.*; empty when there is none.
std::string canonical_to_hf_name(const std::string& canonical, Arch arch = Arch::kLlama);

}  // namespace kiln
