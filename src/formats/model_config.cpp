#include "formats/model_config.h"

#include <cmath>

namespace kiln {

std::string_view arch_name(Arch a) {
  switch (a) {
    case Arch::kLlama: return "llama";
    case Arch::kQwen2: return "qwen2";
    case Arch::kMistral: return "mistral";
    case Arch::kQwen3: return "qwen3";
    case Arch::kSmolLM3: return "smollm3";
    case Arch::kGemma3: return "gemma3";
    case Arch::kPhi3: return "phi3";
    case Arch::kGemma2: return "gemma2";
    case Arch::kMiniCPM: return "minicpm";
  }
  return "?";
}

float longrope_attention_factor(double factor, int original_max_position) {
  if (factor <= 1.0 || original_max_position <= 1) return 1.0f;
  return static_cast<float>(std::sqrt(1.0 + std::log(factor) / std::log(static_cast<double>(original_max_position))));
}

Status validate_config(const ModelConfig& c, std::string_view file) {
  if (!c.rope_layers.empty() && c.rope_layers.size() != static_cast<size_t>(c.n_layers))
    return corrupt(std::string(file) + ": the per-layer RoPE list has " + std::to_string(c.rope_layers.size()) +
                   " entries for " + std::to_string(c.n_layers) + " layers");
  if (!c.sliding_layers.empty() && c.sliding_layers.size() != static_cast<size_t>(c.n_layers))
    return corrupt(std::string(file) + ": the per-layer sliding-window list has " +
                   std::to_string(c.sliding_layers.size()) + " entries for " + std::to_string(c.n_layers) + " layers");
  auto bad = [&](const std::string& what) { return corrupt(std::string(file) + ": config: " + what); };
  constexpr int kMaxDim = 1 << 18;  // far above any published model; bounds every allocation
  auto in_range = [&](int v, const char* name, int lo, int hi) -> Status {
    if (v < lo || v > hi)
      return bad(std::string(name) + " is " + std::to_string(v) + ", must be in [" + std::to_string(lo) +
                 ", " + std::to_string(hi) + "]");
    return Status::ok();
  };
  KILN_RETURN_IF_ERROR(in_range(c.dim, "dim (hidden_size)", 1, kMaxDim));
  KILN_RETURN_IF_ERROR(in_range(c.hidden_dim, "hidden_dim (intermediate_size)", 1, 4 * kMaxDim));
  KILN_RETURN_IF_ERROR(in_range(c.n_layers, "n_layers", 1, kMaxLayers));
  KILN_RETURN_IF_ERROR(in_range(c.n_heads, "n_heads", 1, 4096));
  KILN_RETURN_IF_ERROR(in_range(c.n_kv_heads, "n_kv_heads", 1, c.n_heads));
  KILN_RETURN_IF_ERROR(in_range(c.head_dim, "head_dim", 2, 4096));
  KILN_RETURN_IF_ERROR(in_range(c.vocab_size, "vocab_size", 1, 1 << 24));
  KILN_RETURN_IF_ERROR(in_range(c.max_seq_len, "max_seq_len", 1, 1 << 24));
  if (c.n_heads % c.n_kv_heads != 0)
    return bad("n_heads " + std::to_string(c.n_heads) + " is not a multiple of n_kv_heads " +
               std::to_string(c.n_kv_heads));
  if (c.head_dim % 2 != 0) return bad("head_dim " + std::to_string(c.head_dim) + " is odd; RoPE needs pairs");
  if (c.rotary_dim < 0 || c.rotary_dim > c.head_dim || c.rotary_dim % 2 != 0)
    return bad("rotary_dim " + std::to_string(c.rotary_dim) + " must be even and at most head_dim " + std::to_string(c.head_dim));
  if (!(c.rms_eps > 0.0f) || c.rms_eps > 1.0f) return bad("rms_norm_eps must be in (0, 1]");
  if (!(c.rope_theta > 0.0f)) return bad("rope_theta must be positive");
  if (c.rope_scaling.type != RopeScaling::Type::kNone && !(c.rope_scaling.factor > 0.0f))
    return bad("rope_scaling factor must be positive");
  if (c.rope_scaling.type == RopeScaling::Type::kLlama3 &&
      (!(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor) ||
       c.rope_scaling.original_max_position <= 0))
    return bad("llama3 rope_scaling needs high_freq_factor > low_freq_factor and a positive original_max_position_embeddings");
  if (c.rope_scaling.type == RopeScaling::Type::kLongRope) {
    const RopeScaling& r = c.rope_scaling;
    const size_t half = static_cast<size_t>(c.rope_dim() / 2);
    if (r.short_factor.size() != half || r.long_factor.size() != half)
      return bad("longrope needs one factor per rotated pair, "  + std::to_string(half) + " short and long factors, not " +
                 std::to_string(r.short_factor.size()) + " and " + std::to_string(r.long_factor.size()));
    for (const auto* list : {&r.short_factor, &r.long_factor})
      for (float f : *list)
        if (!(f > 0.0f) || !(f < 1e30f)) return bad("longrope factors must be positive and finite");
    if (!(r.attention_factor > 0.0f) || !(r.attention_factor < 1e3f)) return bad("longrope attention_factor must be positive");
  }
  if (c.sliding_window < 0) return bad("sliding_window is negative");
  if (c.rope_theta_local < 0.0f || !(c.rope_theta_local == c.rope_theta_local)) return bad("the local RoPE base is negative");
  if (c.query_pre_attn_scalar < 0.0f || !(c.query_pre_attn_scalar == c.query_pre_attn_scalar))
    return bad("query_pre_attn_scalar is negative");
  for (auto [cap, name] : {std::pair{c.attn_softcap, "attn_logit_softcapping"}, std::pair{c.final_softcap, "final_logit_softcapping"},
                           std::pair{c.embed_scale, "scale_emb"}, std::pair{c.residual_scale, "the residual scale"},
                           std::pair{c.logit_scale, "the logit scale"}})
    if (!(cap >= 0.0f && cap < 1e30f)) return bad(std::string(name) + " must be a finite non-negative number");
  for (int id : c.stop_ids)
    if (id < 0 || id >= c.vocab_size) return bad("stop token id " + std::to_string(id) + " is outside the vocabulary");
  return Status::ok();
}

}  // namespace kiln
