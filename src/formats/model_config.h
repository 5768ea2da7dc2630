// The hyper-parameters of a decoder-only transformer, whatever file they came from.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kiln {

enum class Arch { kLlama, kQwen2, kMistral, kQwen3, kSmolLM3, kGemma3, kPhi3, kGemma2, kMiniCPM };
std::string_view arch_name(Arch a);

// How RoPE pairs the elements of a head. Both conventions describe the same model when the
// q/k rows are permuted accordingly, so importers keep the file's layout and record its style.
enum class RopeStyle {
  kAdjacentPairs,  // (2i, 2i+1): llama2.c, GGUF llama
  kHalfSplit,      // (i, i + d/2): Hugging Face rotate_half, GGUF qwen2 (NEOX)
};

struct RopeScaling {
  // kLongRope (Phi-3-mini-128k, Phi-3.5): each pair's frequency divided by its short factor, or by
  // its long factor in a session whose context is longer than original_max_position (for every
  // position, as llama.cpp does, so the KV cache never mixes the two), the scores scaled by
  // attention_factor squared (transformers scales cos and sin by it).
  enum class Type { kNone, kLinear, kLlama3, kLongRope };
  Type type = Type::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position = 8192;
  std::vector<float> short_factor, long_factor;  // kLongRope: head_dim / 2 each
  float attention_factor = 1.0f;                 // kLongRope

  // A session of n_ctx positions turns by the long factors.
  bool long_factors_for(int n_ctx) const { return type == Type::kLongRope && n_ctx > original_max_position; }
};

struct ModelConfig {
  Arch arch = Arch::kLlama;
  int dim = 0;         // residual width
  int hidden_dim = 0;  // FFN width
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int vocab_size = 0;
  int max_seq_len = 0;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  RopeStyle rope_style = RopeStyle::kAdjacentPairs;
  // RoPE turns the first rotary_dim elements of each head, the rest pass (Phi-4-mini's
  // partial_rotary_factor 0.75); 0: the whole head.
  int rotary_dim = 0;
  bool tie_embeddings = false;
  bool qkv_bias = false;
  // Qwen3: each head of q and k is RMS-normalised (a weight of head_dim) before RoPE.
  bool qk_norm = false;
  int sliding_window = 0;  // 0: attend to the whole context
  // Per layer, 1 where the sliding window applies (Gemma 3: five local layers, then a global
  // one); empty: every layer, when sliding_window is set (Mistral).
  std::vector<uint8_t> sliding_layers;
  // The RoPE base of the sliding-window layers, which use no scaling (Gemma 3's
  // rope_local_base_freq); 0: they share the global layers' frequencies.
  float rope_theta_local = 0.0f;
  // Attention scores are scaled by query_pre_attn_scalar^-0.5 (Gemma); 0: by head_dim^-0.5.
  float query_pre_attn_scalar = 0.0f;
  // Gemma 2's soft-capping, x -> cap * tanh(x / cap): of the attention scores (after their scale,
  // before the mask) and of the logits; 0: none.
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;
  // MiniCPM: the embedding times embed_scale (scale_emb; 0: none); each residual branch times
  // residual_scale (scale_depth / sqrt(layers)) and the classifier's input times logit_scale
  // (dim_model_base / hidden_size), both folded on import (folded_weights.h: into embed_scale and
  // rms_eps, and the final norm's weight), after which they read 0.
  float embed_scale = 0.0f;
  float residual_scale = 0.0f;
  float logit_scale = 0.0f;
  // Per layer, 0 where the layer applies no RoPE (SmolLM3's NoPE layers: position comes from
  // the causal mask alone); empty: RoPE in every layer.
  std::vector<uint8_t> rope_layers;
  int bos_id = -1;
  int eos_id = -1;
  std::vector<int> stop_ids;  // generation ends when one of these is sampled

  // The longest context the model runs with its RoPE as trained for short prompts: LongRoPE's
  // original context (a longer one switches to the long factors), else max_seq_len.
  int short_rope_context() const {
    return rope_scaling.type == RopeScaling::Type::kLongRope ? std::min(max_seq_len, rope_scaling.original_max_position)
                                                             : max_seq_len;
  }
  int q_dim() const { return n_heads * head_dim; }
  int rope_dim() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  bool layer_has_rope(int l) const { return rope_layers.empty() || rope_layers[static_cast<size_t>(l)] != 0; }
  bool layer_is_sliding(int l) const {
    return sliding_window > 0 && (sliding_layers.empty() || sliding_layers[static_cast<size_t>(l)] != 0);
  }
  // The window layer l attends through; 0: the whole context.
  int layer_window(int l) const { return layer_is_sliding(l) ? sliding_window : 0; }
  // Gemma's block: the embedding scaled by sqrt(dim), a norm after attention and after the FFN
  // (before each residual add), GELU (tanh) gating instead of SiLU.
  bool gemma_block() const { return arch == Arch::kGemma3 || arch == Arch::kGemma2; }
  // What the embedding rows are multiplied by: Gemma's sqrt(dim), MiniCPM's scale_emb; 0: nothing.
  float embedding_multiplier() const {
    return gemma_block() ? std::sqrt(static_cast<float>(dim)) : embed_scale;
  }
};

// LongRoPE's attention factor where the config gives none, as transformers derives it from
// factor = max_position_embeddings / original: sqrt(1 + ln(factor) / ln(original)), 1 when factor <= 1.
float longrope_attention_factor(double factor, int original_max_position);

// The most layers a model may have (far above any published one); readers check it before
// sizing per-layer lists.
inline constexpr int kMaxLayers = 4096;

// Checks the numbers for consistency and sane bounds, so that nothing is sized by a bad field.
Status validate_config(const ModelConfig& c, std::string_view file);

}  // namespace kiln
