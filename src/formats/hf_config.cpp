#include "formats/hf_config.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "formats/json_util.h"

namespace kiln {

namespace {

// eos_token_id may be an int or a list of ints.
Status add_ids(const Json& obj, const std::string& key, std::vector<int>& out, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::ok();
  auto add = [&](const Json& v) -> Status {
    if (!v.is_number_integer()) return corrupt(where + ": '" + key + "' must be an integer or a list of integers");
    int64_t id = v.get<int64_t>();
    if (id < 0 || id > INT32_MAX) return corrupt(where + ": '" + key + "' value " + std::to_string(id) + " is out of range");
    if (std::find(out.begin(), out.end(), static_cast<int>(id)) == out.end()) out.push_back(static_cast<int>(id));
    return Status::ok();
  };
  if (it->is_array()) {
    for (const Json& v : *it) KILN_RETURN_IF_ERROR(add(v));
    return Status::ok();
  }
  return add(*it);
}

// A list of one number per pair RoPE turns.
Result<std::vector<float>> factor_list(const Json& rs, const char* key, const ModelConfig& c, const std::string& w) {
  auto it = rs.find(key);
  if (it == rs.end() || !it->is_array() || it->size() != static_cast<size_t>(c.rope_dim() / 2))
    return corrupt(w + ": " + key + " must be a list of " + std::to_string(c.rope_dim() / 2) +
                   " numbers (one per rotated pair of a head)");
  std::vector<float> out;
  for (const Json& v : *it) {
    if (!v.is_number()) return corrupt(w + ": " + key + " must hold numbers");
    out.push_back(v.get<float>());
  }
  return out;
}

// LongRoPE (Phi-3-mini-128k, Phi-3.5): the factors, the attention factor (given, or transformers'
// sqrt(1 + ln(factor) / ln(original)) with factor = max_position_embeddings / original) and the
// original context, past which a session turns by the long factors.
Status parse_longrope(const Json& rs, ModelConfig& c, const std::string& w) {
  RopeScaling& r = c.rope_scaling;
  r.type = RopeScaling::Type::kLongRope;
  KILN_ASSIGN_OR_RETURN(r.short_factor, factor_list(rs, "short_factor", c, w));
  KILN_ASSIGN_OR_RETURN(r.long_factor, factor_list(rs, "long_factor", c, w));
  // The original context is in the rope object (5.x) or beside it (4.x: read by parse_rope).
  KILN_ASSIGN_OR_RETURN(r.original_max_position, json_dim(rs, "original_max_position_embeddings", r.original_max_position, w));
  if (r.original_max_position <= 0) return corrupt(w + ": original_max_position_embeddings must be positive");
  KILN_ASSIGN_OR_RETURN(double factor, json_number(rs, "factor", static_cast<double>(c.max_seq_len) / r.original_max_position, w));
  r.factor = static_cast<float>(factor);
  KILN_ASSIGN_OR_RETURN(double af, json_number(rs, "attention_factor", longrope_attention_factor(factor, r.original_max_position), w));
  r.attention_factor = static_cast<float>(af);
  return Status::ok();
}

// One rope_scaling (4.x) or rope_parameters (5.x) object: its type, factor, base if it has one.
Status parse_rope_object(const Json& rs, ModelConfig& c, const std::string& w) {
  if (rs.contains("rope_theta")) {
    KILN_ASSIGN_OR_RETURN(double theta, json_number(rs, "rope_theta", 10000.0, w));
    c.rope_theta = static_cast<float>(theta);
  }
  KILN_ASSIGN_OR_RETURN(std::string type, json_string(rs, "rope_type", "", w));
  if (type.empty()) {
    KILN_ASSIGN_OR_RETURN(type, json_string(rs, "type", "default", w));
  }
  KILN_ASSIGN_OR_RETURN(double factor, json_number(rs, "factor", 1.0, w));
  c.rope_scaling.factor = static_cast<float>(factor);
  if (type == "default") {
    c.rope_scaling.type = RopeScaling::Type::kNone;
  } else if (type == "linear") {
    c.rope_scaling.type = RopeScaling::Type::kLinear;
  } else if (type == "llama3") {
    c.rope_scaling.type = RopeScaling::Type::kLlama3;
    KILN_ASSIGN_OR_RETURN(double lo, json_number(rs, "low_freq_factor", 1.0, w));
    KILN_ASSIGN_OR_RETURN(double hi, json_number(rs, "high_freq_factor", 4.0, w));
    KILN_ASSIGN_OR_RETURN(int orig, json_dim(rs, "original_max_position_embeddings", 8192, w));
    c.rope_scaling.low_freq_factor = static_cast<float>(lo);
    c.rope_scaling.high_freq_factor = static_cast<float>(hi);
    c.rope_scaling.original_max_position = orig;
  } else if (type == "longrope") {
    KILN_RETURN_IF_ERROR(parse_longrope(rs, c, w));
  } else {
    return unsupported(w + ": type '" + type + "' is not supported (default, linear, llama3, longrope are)");
  }
  return Status::ok();
}

// transformers 4.x writes `rope_theta` and `rope_scaling`; 5.x one `rope_parameters` object
// holding both, or (Gemma 3) one per kind of layer: full_attention and sliding_attention, where
// 4.x wrote rope_local_base_freq for the sliding layers.
Status parse_rope(const Json& j, ModelConfig& c, const std::string& where) {
  const bool gemma = c.arch == Arch::kGemma3;
  KILN_ASSIGN_OR_RETURN(double theta, json_number(j, "rope_theta", gemma ? 1e6 : 10000.0, where));
  c.rope_theta = static_cast<float>(theta);
  if (gemma) {
    KILN_ASSIGN_OR_RETURN(double local, json_number(j, "rope_local_base_freq", 10000.0, where));
    c.rope_theta_local = static_cast<float>(local);
  }
  KILN_ASSIGN_OR_RETURN(c.rope_scaling.original_max_position,
                        json_dim(j, "original_max_position_embeddings", c.rope_scaling.original_max_position, where));
  const char* key = j.contains("rope_parameters") ? "rope_parameters" : "rope_scaling";
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_object()) return corrupt(where + ": '" + key + "' must be an object or null");
  const std::string w = where + ": " + key;
  if (!gemma) return parse_rope_object(*it, c, w);
  if (!it->contains("full_attention")) return parse_rope_object(*it, c, w);
  const Json& full = (*it)["full_attention"];
  if (!full.is_object()) return corrupt(w + ": full_attention must be an object");
  KILN_RETURN_IF_ERROR(parse_rope_object(full, c, w + ".full_attention"));
  if (auto sl = it->find("sliding_attention"); sl != it->end()) {
    if (!sl->is_object()) return corrupt(w + ": sliding_attention must be an object");
    ModelConfig local;
    KILN_RETURN_IF_ERROR(parse_rope_object(*sl, local, w + ".sliding_attention"));
    if (local.rope_scaling.type != RopeScaling::Type::kNone)
      return unsupported(w + ".sliding_attention: only the default RoPE is supported on sliding-window layers");
    c.rope_theta_local = local.rope_theta;
  }
  return Status::ok();
}

// Gemma 2 and 3: which layers attend through the sliding window (layer_types, else every
// sliding_window_pattern-th layer, 1-based, is global: Gemma 3 6, Gemma 2 2), the window, the
// query scale; Gemma 2's soft-capping of the scores and the logits (refused in a Gemma 3 config,
// which has none).
Status parse_gemma(const Json& j, ModelConfig& c, const std::string& file) {
  const bool gemma2 = c.arch == Arch::kGemma2;
  for (auto [key, cap, fallback] : {std::tuple{"attn_logit_softcapping", &c.attn_softcap, 50.0},
                                    std::tuple{"final_logit_softcapping", &c.final_softcap, 30.0}}) {
    auto it = j.find(key);
    if (it == j.end() && gemma2) {
      *cap = static_cast<float>(fallback);  // Gemma2Config's defaults
      continue;
    }
    if (it == j.end() || it->is_null()) continue;
    if (!gemma2) return unsupported(file + ": " + key + " is not supported for Gemma 3 (Gemma 2 has it)");
    if (!it->is_number() || !(it->get<double>() > 0.0) || !(it->get<double>() < 1e30))
      return corrupt(file + ": " + key + " must be a positive number or null, not " + it->dump().substr(0, 80));
    *cap = static_cast<float>(it->get<double>());
  }
  KILN_ASSIGN_OR_RETURN(bool bidirectional, json_bool(j, "use_bidirectional_attention", false, file));
  if (bidirectional) return unsupported(file + ": use_bidirectional_attention true is not supported");
  KILN_ASSIGN_OR_RETURN(c.sliding_window, json_dim(j, "sliding_window", 4096, file));
  KILN_ASSIGN_OR_RETURN(double qpas, json_number(j, "query_pre_attn_scalar", 256.0, file));
  if (!(qpas > 0)) return corrupt(file + ": query_pre_attn_scalar must be positive");
  c.query_pre_attn_scalar = static_cast<float>(qpas);
  if (auto lt = j.find("layer_types"); lt != j.end() && !lt->is_null()) {
    if (!lt->is_array() || lt->size() != static_cast<size_t>(c.n_layers))
      return corrupt(file + ": layer_types must be a list of " + std::to_string(c.n_layers) +
                     " entries (one per layer), not " + lt->dump().substr(0, 80));
    for (const Json& v : *lt) {
      if (v == "sliding_attention") c.sliding_layers.push_back(1);
      else if (v == "full_attention") c.sliding_layers.push_back(0);
      else return corrupt(file + ": layer_types entries must be sliding_attention or full_attention, not " + v.dump());
    }
    return Status::ok();
  }
  KILN_ASSIGN_OR_RETURN(int pattern, json_dim(j, "sliding_window_pattern", gemma2 ? 2 : 6, file));
  if (pattern < 1) return corrupt(file + ": sliding_window_pattern must be at least 1");
  for (int l = 0; l < c.n_layers; ++l) c.sliding_layers.push_back((l + 1) % pattern != 0 ? 1 : 0);
  return Status::ok();
}

// MiniCPM's scales, MiniCPMConfig's defaults (1) where absent: the embedding times scale_emb, each
// residual branch times scale_depth / sqrt(num_hidden_layers), the logits' input divided by
// hidden_size / dim_model_base.
Status parse_minicpm_scales(const Json& j, ModelConfig& c, const std::string& file) {
  double v[3];
  const char* keys[3] = {"scale_emb", "scale_depth", "dim_model_base"};
  for (int i = 0; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(v[i], json_number(j, keys[i], 1.0, file));
    if (!(v[i] > 0.0 && v[i] < 1e30)) return corrupt(file + ": " + keys[i] + " must be a positive number");
  }
  c.embed_scale = static_cast<float>(v[0]);
  c.residual_scale = static_cast<float>(v[1] / std::sqrt(static_cast<double>(c.n_layers)));
  c.logit_scale = static_cast<float>(v[2] / c.dim);
  return Status::ok();
}

// SmolLM3: `no_rope_layers[i]` is 1 where layer i applies RoPE (transformers' name, inverted
// meaning), else every `no_rope_layer_interval`-th layer (1-based) has none.
Status parse_nope_layers(const Json& j, ModelConfig& c, const std::string& file) {
  if (auto l = j.find("no_rope_layers"); l != j.end() && !l->is_null()) {
    if (!l->is_array() || l->size() != static_cast<size_t>(c.n_layers))
      return corrupt(file + ": no_rope_layers must be a list of " + std::to_string(c.n_layers) +
                     " entries (one per layer), not " + l->dump().substr(0, 80));
    for (const Json& v : *l) {
      if (!v.is_number_integer() || (v.get<int64_t>() != 0 && v.get<int64_t>() != 1))
        return corrupt(file + ": no_rope_layers entries must be 0 or 1, not " + v.dump());
      c.rope_layers.push_back(static_cast<uint8_t>(v.get<int64_t>()));
    }
    return Status::ok();
  }
  KILN_ASSIGN_OR_RETURN(int interval, json_dim(j, "no_rope_layer_interval", 4, file));
  if (interval < 1) return corrupt(file + ": no_rope_layer_interval must be at least 1");
  for (int l = 0; l < c.n_layers; ++l) c.rope_layers.push_back((l + 1) % interval != 0 ? 1 : 0);
  return Status::ok();
}

// Gemma3ForConditionalGeneration (model_type gemma3): the language model's config is its
// text_config, read as a Gemma3ForCausalLM's; the vision config is not read (kiln runs the text part).
Result<Json> gemma3_text_config(const Json& j, const std::string& file) {
  auto t = j.find("text_config");
  if (t == j.end() || !t->is_object())
    return corrupt(file + ": text_config must be an object (the language model's config of a Gemma3ForConditionalGeneration)");
  Json text = *t;
  KILN_ASSIGN_OR_RETURN(std::string model_type, json_string(text, "model_type", "gemma3_text", file + ": text_config"));
  if (model_type != "gemma3_text")
    return unsupported(file + ": text_config model_type '" + model_type + "' is not supported (gemma3_text is)");
  text["architectures"] = Json::array({"Gemma3ForCausalLM"});
  for (const char* key : {"bos_token_id", "eos_token_id", "tie_word_embeddings"})
    if (!text.contains(key) && j.contains(key)) text[key] = j[key];
  return text;
}

}  // namespace

Result<ModelConfig> parse_hf_config(std::string_view config_json, std::string_view generation_json,
                                    const std::string& file) {
  KILN_ASSIGN_OR_RETURN(Json j, parse_json(config_json, file));
  if (!j.is_object()) return corrupt(file + ": not a JSON object");
  ModelConfig c;
  std::string arch_str;
  if (auto a = j.find("architectures"); a != j.end() && a->is_array() && !a->empty() && (*a)[0].is_string())
    arch_str = (*a)[0].get<std::string>();
  KILN_ASSIGN_OR_RETURN(std::string model_type, json_string(j, "model_type", "", file));
  if (arch_str == "Gemma3ForConditionalGeneration" || (arch_str.empty() && model_type == "gemma3")) {
    KILN_ASSIGN_OR_RETURN(Json text, gemma3_text_config(j, file));
    return parse_hf_config(text.dump(), generation_json, file);
  }
  if (arch_str == "LlamaForCausalLM" || (arch_str.empty() && model_type == "llama")) {
    c.arch = Arch::kLlama;
  } else if (arch_str == "Qwen2ForCausalLM" || (arch_str.empty() && model_type == "qwen2")) {
    c.arch = Arch::kQwen2;
  } else if (arch_str == "MistralForCausalLM" || (arch_str.empty() && model_type == "mistral")) {
    c.arch = Arch::kMistral;
  } else if (arch_str == "Qwen3ForCausalLM" || (arch_str.empty() && model_type == "qwen3")) {
    c.arch = Arch::kQwen3;
  } else if (arch_str == "SmolLM3ForCausalLM" || (arch_str.empty() && model_type == "smollm3")) {
    c.arch = Arch::kSmolLM3;
  } else if (arch_str == "Gemma3ForCausalLM" || (arch_str.empty() && model_type == "gemma3_text")) {
    c.arch = Arch::kGemma3;
  } else if (arch_str == "Gemma2ForCausalLM" || (arch_str.empty() && model_type == "gemma2")) {
    c.arch = Arch::kGemma2;
  } else if (arch_str == "MiniCPMForCausalLM" || (arch_str.empty() && model_type == "minicpm")) {
    c.arch = Arch::kMiniCPM;
  } else if (arch_str == "Phi3ForCausalLM" || (arch_str.empty() && model_type == "phi3")) {
    c.arch = Arch::kPhi3;
  } else {
    return unsupported(file + ": architecture '" + (arch_str.empty() ? model_type : arch_str) +
                       "' is not supported (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM, "
                       "SmolLM3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3ForConditionalGeneration (its language model), "
                       "Phi3ForCausalLM, MiniCPMForCausalLM are)");
  }
  const bool gemma = c.gemma_block();
  if (gemma) {
    KILN_ASSIGN_OR_RETURN(std::string act, json_string(j, "hidden_activation", "gelu_pytorch_tanh", file));
    if (act != "gelu_pytorch_tanh")
      return unsupported(file + ": hidden_activation '" + act + "' is not supported (gelu_pytorch_tanh is)");
  } else {
    KILN_ASSIGN_OR_RETURN(std::string act, json_string(j, "hidden_act", "silu", file));
    if (act != "silu") return unsupported(file + ": hidden_act '" + act + "' is not supported (silu is)");
  }
  KILN_ASSIGN_OR_RETURN(bool mlp_bias, json_bool(j, "mlp_bias", false, file));
  if (mlp_bias) return unsupported(file + ": mlp_bias true is not supported");

  KILN_ASSIGN_OR_RETURN(c.dim, json_dim(j, "hidden_size", 0, file));
  KILN_ASSIGN_OR_RETURN(c.hidden_dim, json_dim(j, "intermediate_size", 0, file));
  KILN_ASSIGN_OR_RETURN(c.n_layers, json_dim(j, "num_hidden_layers", 0, file));
  // Before the per-layer lists are sized by it.
  if (c.n_layers < 1 || c.n_layers > kMaxLayers)
    return corrupt(file + ": num_hidden_layers is " + std::to_string(c.n_layers) + ", must be in [1, " +
                   std::to_string(kMaxLayers) + "]");
  KILN_ASSIGN_OR_RETURN(c.n_heads, json_dim(j, "num_attention_heads", 0, file));
  KILN_ASSIGN_OR_RETURN(c.n_kv_heads, json_dim(j, "num_key_value_heads", c.n_heads, file));
  // transformers' Qwen3Config defaults head_dim to 128, whatever hidden_size / heads is.
  // Gemma2Config and Gemma3TextConfig to 256.
  const int default_head_dim = c.arch == Arch::kQwen3 ? 128 : gemma ? 256 : (c.n_heads > 0) ? c.dim / c.n_heads : 0;
  KILN_ASSIGN_OR_RETURN(c.head_dim, json_dim(j, "head_dim", default_head_dim, file));
  KILN_ASSIGN_OR_RETURN(c.vocab_size, json_dim(j, "vocab_size", 0, file));
  KILN_ASSIGN_OR_RETURN(c.max_seq_len, json_dim(j, "max_position_embeddings", c.arch == Arch::kGemma3 ? 131072 : gemma ? 8192 : 2048, file));
  KILN_ASSIGN_OR_RETURN(double eps, json_number(j, "rms_norm_eps", 1e-6, file));
  c.rms_eps = static_cast<float>(eps);
  // RoPE over part of each head (Phi-4-mini: 0.75), at the top level (4.x) or in rope_parameters:
  // transformers turns int(head_dim * factor) elements.
  for (const Json* o : {&j, j.contains("rope_parameters") && j["rope_parameters"].is_object() ? &j["rope_parameters"] : &j}) {
    KILN_ASSIGN_OR_RETURN(double partial, json_number(*o, "partial_rotary_factor", 1.0, file));
    if (!(partial > 0.0 && partial <= 1.0)) return corrupt(file + ": partial_rotary_factor must be in (0, 1]");
    const int rot = static_cast<int>(c.head_dim * partial);
    if (partial < 1.0) {
      if (rot < 2 || rot % 2 != 0)
        return unsupported(file + ": partial_rotary_factor " + std::to_string(partial) + " turns " + std::to_string(rot) +
                           " elements of a head of " + std::to_string(c.head_dim) + ", not an even number of at least 2");
      c.rotary_dim = rot;
    }
  }
  KILN_RETURN_IF_ERROR(parse_rope(j, c, file));
  KILN_ASSIGN_OR_RETURN(c.tie_embeddings, json_bool(j, "tie_word_embeddings", gemma || c.arch == Arch::kMiniCPM, file));
  if (c.arch == Arch::kMiniCPM) KILN_RETURN_IF_ERROR(parse_minicpm_scales(j, c, file));
  if (c.arch == Arch::kQwen2) {
    c.qkv_bias = true;
  } else {
    KILN_ASSIGN_OR_RETURN(c.qkv_bias, json_bool(j, "attention_bias", false, file));
  }
  if (c.arch == Arch::kSmolLM3) KILN_RETURN_IF_ERROR(parse_nope_layers(j, c, file));
  if (c.arch == Arch::kQwen2 || c.arch == Arch::kQwen3 || c.arch == Arch::kSmolLM3) {
    KILN_ASSIGN_OR_RETURN(bool use_sw, json_bool(j, "use_sliding_window", false, file));
    if (use_sw)
      return unsupported(file + ": use_sliding_window true is not supported for " + std::string(arch_name(c.arch)));
  }
  if (gemma) KILN_RETURN_IF_ERROR(parse_gemma(j, c, file));
  c.qk_norm = c.arch == Arch::kQwen3 || c.arch == Arch::kGemma3;
  if (c.arch == Arch::kMistral || c.arch == Arch::kPhi3) {  // every layer (Phi-3-mini-4k: 2047)
    KILN_ASSIGN_OR_RETURN(c.sliding_window, json_dim(j, "sliding_window", 0, file));
  }

  // Hugging Face checkpoints store q/k rows for rotate_half.
  c.rope_style = RopeStyle::kHalfSplit;

  KILN_ASSIGN_OR_RETURN(int64_t bos, json_int(j, "bos_token_id", -1, file));
  c.bos_id = (bos >= 0 && bos <= INT32_MAX) ? static_cast<int>(bos) : -1;
  KILN_RETURN_IF_ERROR(add_ids(j, "eos_token_id", c.stop_ids, file));
  if (!generation_json.empty()) {
    const std::string gfile = file.substr(0, file.rfind('/') + 1) + "generation_config.json";
    KILN_ASSIGN_OR_RETURN(Json g, parse_json(generation_json, gfile));
    KILN_RETURN_IF_ERROR(add_ids(g, "eos_token_id", c.stop_ids, gfile));
  }
  c.eos_id = c.stop_ids.empty() ? -1 : c.stop_ids.front();
  KILN_RETURN_IF_ERROR(validate_config(c, file));
  return c;
}

}  // namespace kiln
