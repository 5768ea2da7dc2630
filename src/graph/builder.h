// Builds the decoder graph of a Llama-family model (Llama, Qwen2, Qwen3, Mistral, SmolLM3) or of
// Gemma 3 from its config.
#pragma once

#include <span>
#include <vector>

#include "formats/model_config.h"
#include "graph/graph.h"

namespace kiln {

// Every weight starts as "f32"; the compiler's precision pass assigns schemes.
Result<Graph> build_decoder_graph(const ModelConfig& c);

// The frequencies RoPE uses for each pair of a head of `head_dim`, after `rope_scaling`, and
// divided by a GGUF's `rope_freqs.weight` factors where the file has them (Llama 3.1 GGUFs
// carry their scaling that way: head_dim / 2 of them, checked by the reader). LongRoPE: by the
// short factors, or the long ones where `long_factors`.
std::vector<float> rope_inv_freq(const ModelConfig& c, std::span<const float> rope_freqs = {}, bool long_factors = false);
// LongRoPE's long-factor frequencies, for sessions longer than the original context; empty when
// the model has none or no session can be that long.
std::vector<float> rope_inv_freq_long(const ModelConfig& c, std::span<const float> rope_freqs = {});
// The sliding-window layers' own frequencies (base rope_theta_local, no scaling); empty when the
// model has none (every layer uses rope_inv_freq).
std::vector<float> rope_inv_freq_local(const ModelConfig& c);
// The attention scores' scale: query_pre_attn_scalar^-1/2 (Gemma) or head_dim^-1/2, times
// LongRoPE's attention factor squared (q and k are each scaled by it).
float attention_scale(const ModelConfig& c);

}  // namespace kiln
