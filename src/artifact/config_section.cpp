#include "artifact/config_section.h"

#include <limits>

#include "formats/json_util.h"

namespace kiln {

std::string config_to_json(const ModelConfig& c) {
  Json j = {{"arch", std::string(arch_name(c.arch))},
            {"dim", c.dim},
            {"hidden_dim", c.hidden_dim},
            {"n_layers", c.n_layers},
            {"n_heads", c.n_heads},
            {"n_kv_heads", c.n_kv_heads},
            {"head_dim", c.head_dim},
            {"vocab_size", c.vocab_size},
            {"max_seq_len", c.max_seq_len},
            {"rms_eps", c.rms_eps},
            {"rope_theta", c.rope_theta},
            {"rope_half_split", c.rope_style == RopeStyle::kHalfSplit},
            {"rope_scaling",
             {{"type", c.rope_scaling.type == RopeScaling::Type::kNone       ? "none"
                       : c.rope_scaling.type == RopeScaling::Type::kLinear   ? "linear"
                       : c.rope_scaling.type == RopeScaling::Type::kLongRope ? "longrope"
                                                                             : "llama3"},
              {"factor", c.rope_scaling.factor},
              {"low_freq_factor", c.rope_scaling.low_freq_factor},
              {"high_freq_factor", c.rope_scaling.high_freq_factor},
              {"original_max_position", c.rope_scaling.original_max_position}}},
            {"tie_embeddings", c.tie_embeddings},
            {"qkv_bias", c.qkv_bias},
            {"qk_norm", c.qk_norm},
            {"sliding_window", c.sliding_window},
            {"rope_layers", c.rope_layers},
            {"bos_id", c.bos_id},
            {"eos_id", c.eos_id},
            {"stop_ids", c.stop_ids}};
  // Gemma's keys, only where set: the files of the other architectures stay as they were.
  if (c.rope_scaling.type == RopeScaling::Type::kLongRope) {
    j["rope_scaling"]["short_factor"] = c.rope_scaling.short_factor;
    j["rope_scaling"]["long_factor"] = c.rope_scaling.long_factor;
    j["rope_scaling"]["attention_factor"] = c.rope_scaling.attention_factor;
  }
  if (c.rotary_dim > 0) j["rotary_dim"] = c.rotary_dim;
  if (!c.sliding_layers.empty()) j["sliding_layers"] = c.sliding_layers;
  if (c.rope_theta_local > 0.0f) j["rope_theta_local"] = c.rope_theta_local;
  if (c.query_pre_attn_scalar > 0.0f) j["query_pre_attn_scalar"] = c.query_pre_attn_scalar;
  if (c.attn_softcap > 0.0f) j["attn_softcap"] = c.attn_softcap;
  if (c.final_softcap > 0.0f) j["final_softcap"] = c.final_softcap;
  if (c.embed_scale > 0.0f) j["embed_scale"] = c.embed_scale;
  return j.dump();
}

Result<ModelConfig> config_from_json(std::string_view text, const std::string& where) {
  KILN_ASSIGN_OR_RETURN(Json j, parse_json(text, where));
  if (!j.is_object()) return corrupt(where + ": not an object");
  ModelConfig c;
  KILN_ASSIGN_OR_RETURN(std::string arch, json_string(j, "arch", "", where));
  if (arch == "llama") c.arch = Arch::kLlama;
  else if (arch == "qwen2") c.arch = Arch::kQwen2;
  else if (arch == "mistral") c.arch = Arch::kMistral;
  else if (arch == "qwen3") c.arch = Arch::kQwen3;
  else if (arch == "smollm3") c.arch = Arch::kSmolLM3;
  else if (arch == "gemma3") c.arch = Arch::kGemma3;
  else if (arch == "gemma2") c.arch = Arch::kGemma2;
  else if (arch == "minicpm") c.arch = Arch::kMiniCPM;
  else if (arch == "phi3") c.arch = Arch::kPhi3;
  else return corrupt(where + ": unknown arch '" + arch + "'");
  KILN_ASSIGN_OR_RETURN(c.dim, json_dim(j, "dim", 0, where));
  KILN_ASSIGN_OR_RETURN(c.hidden_dim, json_dim(j, "hidden_dim", 0, where));
  KILN_ASSIGN_OR_RETURN(c.n_layers, json_dim(j, "n_layers", 0, where));
  KILN_ASSIGN_OR_RETURN(c.n_heads, json_dim(j, "n_heads", 0, where));
  KILN_ASSIGN_OR_RETURN(c.n_kv_heads, json_dim(j, "n_kv_heads", 0, where));
  KILN_ASSIGN_OR_RETURN(c.head_dim, json_dim(j, "head_dim", 0, where));
  KILN_ASSIGN_OR_RETURN(c.vocab_size, json_dim(j, "vocab_size", 0, where));
  KILN_ASSIGN_OR_RETURN(c.max_seq_len, json_dim(j, "max_seq_len", 0, where));
  KILN_ASSIGN_OR_RETURN(double eps, json_number(j, "rms_eps", 0, where));
  KILN_ASSIGN_OR_RETURN(double theta, json_number(j, "rope_theta", 0, where));
  c.rms_eps = static_cast<float>(eps);
  c.rope_theta = static_cast<float>(theta);
  KILN_ASSIGN_OR_RETURN(bool half, json_bool(j, "rope_half_split", false, where));
  c.rope_style = half ? RopeStyle::kHalfSplit : RopeStyle::kAdjacentPairs;
  if (auto rs = j.find("rope_scaling"); rs != j.end() && rs->is_object()) {
    KILN_ASSIGN_OR_RETURN(std::string type, json_string(*rs, "type", "none", where));
    if (type == "none") c.rope_scaling.type = RopeScaling::Type::kNone;
    else if (type == "linear") c.rope_scaling.type = RopeScaling::Type::kLinear;
    else if (type == "llama3") c.rope_scaling.type = RopeScaling::Type::kLlama3;
    else if (type == "longrope") c.rope_scaling.type = RopeScaling::Type::kLongRope;
    else return corrupt(where + ": unknown rope scaling '" + type + "'");
    KILN_ASSIGN_OR_RETURN(double f, json_number(*rs, "factor", 1, where));
    KILN_ASSIGN_OR_RETURN(double lo, json_number(*rs, "low_freq_factor", 1, where));
    KILN_ASSIGN_OR_RETURN(double hi, json_number(*rs, "high_freq_factor", 4, where));
    KILN_ASSIGN_OR_RETURN(c.rope_scaling.original_max_position, json_dim(*rs, "original_max_position", 8192, where));
    c.rope_scaling.factor = static_cast<float>(f);
    c.rope_scaling.low_freq_factor = static_cast<float>(lo);
    c.rope_scaling.high_freq_factor = static_cast<float>(hi);
    if (c.rope_scaling.type == RopeScaling::Type::kLongRope) {
      for (auto [key, out] : {std::pair{"short_factor", &c.rope_scaling.short_factor},
                              std::pair{"long_factor", &c.rope_scaling.long_factor}}) {
        auto f = rs->find(key);
        if (f == rs->end() || !f->is_array() || f->size() > 4096) return corrupt(where + ": longrope '" + key + "' must be an array");
        for (const Json& v : *f) {
          if (!v.is_number()) return corrupt(where + ": longrope '" + key + "' must hold numbers");
          out->push_back(v.get<float>());
        }
      }
      KILN_ASSIGN_OR_RETURN(double af, json_number(*rs, "attention_factor", 1, where));
      c.rope_scaling.attention_factor = static_cast<float>(af);
    }
  }
  KILN_ASSIGN_OR_RETURN(c.tie_embeddings, json_bool(j, "tie_embeddings", false, where));
  KILN_ASSIGN_OR_RETURN(c.qkv_bias, json_bool(j, "qkv_bias", false, where));
  KILN_ASSIGN_OR_RETURN(c.qk_norm, json_bool(j, "qk_norm", false, where));
  KILN_ASSIGN_OR_RETURN(c.sliding_window, json_dim(j, "sliding_window", 0, where));
  std::vector<int64_t> rope_layers;  // absent in files written before SmolLM3: RoPE everywhere
  if (j.contains("rope_layers")) KILN_RETURN_IF_ERROR(json_int_array(j, "rope_layers", 0, 1, rope_layers, where));
  c.rope_layers.assign(rope_layers.begin(), rope_layers.end());
  KILN_ASSIGN_OR_RETURN(c.rotary_dim, json_dim(j, "rotary_dim", 0, where));
  std::vector<int64_t> sliding_layers;
  if (j.contains("sliding_layers")) KILN_RETURN_IF_ERROR(json_int_array(j, "sliding_layers", 0, 1, sliding_layers, where));
  c.sliding_layers.assign(sliding_layers.begin(), sliding_layers.end());
  KILN_ASSIGN_OR_RETURN(double theta_local, json_number(j, "rope_theta_local", 0, where));
  c.rope_theta_local = static_cast<float>(theta_local);
  KILN_ASSIGN_OR_RETURN(double qpas, json_number(j, "query_pre_attn_scalar", 0, where));
  c.query_pre_attn_scalar = static_cast<float>(qpas);
  KILN_ASSIGN_OR_RETURN(double attn_cap, json_number(j, "attn_softcap", 0, where));
  c.attn_softcap = static_cast<float>(attn_cap);
  KILN_ASSIGN_OR_RETURN(double final_cap, json_number(j, "final_softcap", 0, where));
  c.final_softcap = static_cast<float>(final_cap);
  KILN_ASSIGN_OR_RETURN(double embed_scale, json_number(j, "embed_scale", 0, where));
  c.embed_scale = static_cast<float>(embed_scale);
  KILN_ASSIGN_OR_RETURN(c.bos_id, json_dim(j, "bos_id", -1, where));
  KILN_ASSIGN_OR_RETURN(c.eos_id, json_dim(j, "eos_id", -1, where));
  std::vector<int64_t> stops;
  KILN_RETURN_IF_ERROR(json_int_array(j, "stop_ids", 0, std::numeric_limits<int32_t>::max(), stops, where));
  c.stop_ids.assign(stops.begin(), stops.end());
  KILN_RETURN_IF_ERROR(validate_config(c, where));
  return c;
}

}  // namespace kiln
