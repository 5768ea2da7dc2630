// Builds the decoder graph of a Llama-family model (Llama, Qwen2, Qwen3, Mistral) from its config.
#pragma once

#include <vector>

#include "formats/model_config.h"
#include "graph/graph.h"

namespace kiln {

// Every weight starts as "f32"; the compiler's precision pass assigns schemes.
Result<Graph> build_decoder_graph(const ModelConfig& c);

// The frequencies RoPE uses for each pair of a head of `head_dim`, after `rope_scaling`.
std::vector<float> rope_inv_freq(const ModelConfig& c);

}  // namespace kiln
