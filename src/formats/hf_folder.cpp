#include "formats/hf_folder.h"

#include <cstring>
#include <filesystem>
#include <set>

#include "formats/folded_weights.h"
#include "formats/fused_projections.h"
#include "formats/hf_config.h"
#include "formats/json_util.h"
#include "formats/safetensors.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

constexpr std::pair<const char*, const char*> kTopNames[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};
constexpr std::pair<const char*, const char*> kLayerNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};
// Phi-3's fused projections, split once every tensor is read (fused_projections.h).
constexpr std::pair<const char*, const char*> kPhi3LayerNames[] = {
    {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
    {"mlp.gate_up_proj.weight", "ffn_gate_up.weight"},
};
// Gemma's four norms per layer (input_layernorm and the q/k norms as above).
constexpr std::pair<const char*, const char*> kGemmaLayerNames[] = {
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};

// Splits "<prefix><digits>.<rest>" into the layer number and rest.
bool split_layer(const std::string& n, const std::string& prefix, int& layer, std::string& rest) {
  if (n.compare(0, prefix.size(), prefix) != 0) return false;
  size_t dot = n.find('.', prefix.size());
  if (dot == std::string::npos) return false;
  std::string digits = n.substr(prefix.size(), dot - prefix.size());
  if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  layer = std::stoi(digits);
  rest = n.substr(dot + 1);
  return true;
}

}  // namespace

// A Gemma3ForConditionalGeneration checkpoint's language model: its tensors under
// language_model.model.* (the published files) or model.language_model.* (transformers 5 in memory),
// read as a Gemma3ForCausalLM's model.*; the vision tower and projector beside them map to nothing.
constexpr std::pair<const char*, const char*> kLanguageModelPrefixes[] = {
    {"language_model.model.", "model."},
    {"model.language_model.", "model."},
    {"language_model.lm_head.", "lm_head."},
};

std::string hf_to_canonical_name(const std::string& name, Arch arch) {
  std::string n = name;
  if (arch == Arch::kGemma3)
    for (auto [prefix, plain] : kLanguageModelPrefixes)
      if (n.compare(0, std::strlen(prefix), prefix) == 0) {
        n = plain + n.substr(std::strlen(prefix));
        break;
      }
  for (auto [hf, ours] : kTopNames)
    if (n == hf) return ours;
  int layer;
  std::string rest;
  if (!split_layer(n, "model.layers.", layer, rest)) return {};
  if (arch == Arch::kGemma3 || arch == Arch::kGemma2)
    for (auto [hf, ours] : kGemmaLayerNames)
      if (rest == hf) return "blk." + std::to_string(layer) + "." + ours;
  if (arch == Arch::kPhi3)
    for (auto [hf, ours] : kPhi3LayerNames)
      if (rest == hf) return "blk." + std::to_string(layer) + "." + ours;
  for (auto [hf, ours] : kLayerNames)
    if (rest == hf) return "blk." + std::to_string(layer) + "." + ours;
  return {};
}

std::string canonical_to_hf_name(const std::string& n, Arch arch) {
  for (auto [hf, ours] : kTopNames)
    if (n == ours) return hf;
  int layer;
  std::string rest;
  if (!split_layer(n, "blk.", layer, rest)) return {};
  if (arch == Arch::kGemma3 || arch == Arch::kGemma2)
    for (auto [hf, ours] : kGemmaLayerNames)
      if (rest == ours) return "model.layers." + std::to_string(layer) + "." + hf;
  for (auto [hf, ours] : kLayerNames)
    if (rest == ours) return "model.layers." + std::to_string(layer) + "." + hf;
  return {};
}

namespace {

Result<std::vector<std::string>> shard_files(const std::string& dir) {
  const std::string single = dir + "/model.safetensors";
  const std::string index = dir + "/model.safetensors.index.json";
  if (fs::exists(single)) return std::vector<std::string>{single};
  if (!fs::exists(index))
    return not_found(dir + ": no model.safetensors or model.safetensors.index.json in the folder");
  KILN_ASSIGN_OR_RETURN(std::string text, read_text_file(index));
  KILN_ASSIGN_OR_RETURN(Json j, parse_json(text, index));
  auto wm = j.find("weight_map");
  if (!j.is_object() || wm == j.end() || !wm->is_object()) return corrupt(index + ": 'weight_map' must be an object");
  std::set<std::string> names;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string()) return corrupt(index + ": weight_map entry '" + it.key() + "' is not a file name");
    const std::string f = it->get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
      return corrupt(index + ": weight_map names shard '" + f + "', which is not a file in the folder");
    names.insert(f);
  }
  if (names.empty()) return corrupt(index + ": weight_map is empty");
  std::vector<std::string> out;
  for (const auto& f : names) out.push_back(dir + "/" + f);
  return out;
}

}  // namespace

Result<ImportedModel> read_hf_folder(const std::string& dir_in) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string cfg_path = dir + "/config.json";
  KILN_ASSIGN_OR_RETURN(std::string cfg_text, read_text_file(cfg_path));
  std::string gen_text;
  if (fs::exists(dir + "/generation_config.json")) {
    KILN_ASSIGN_OR_RETURN(gen_text, read_text_file(dir + "/generation_config.json"));
  }
  ImportedModel m;
  m.format = "hf";
  m.path = dir;
  KILN_ASSIGN_OR_RETURN(m.config, parse_hf_config(cfg_text, gen_text, cfg_path));

  KILN_ASSIGN_OR_RETURN(auto shards, shard_files(dir));
  for (const std::string& path : shards) {
    KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
    KILN_ASSIGN_OR_RETURN(SafetensorsFile st, read_safetensors(file));
    for (TensorSource& t : st.tensors) {
      std::string canon = hf_to_canonical_name(t.name, m.config.arch);
      if (canon.empty()) continue;  // e.g. rotary_emb.inv_freq: derived, not a weight
      if (m.tensors.count(canon))
        return corrupt(path + ": tensor '" + t.name + "' appears in more than one shard");
      m.tensors[canon] = std::move(t);
    }
    m.files.push_back(st.file);
  }
  // A tied model may still ship lm_head.weight; the embedding is what it is tied to.
  if (m.config.tie_embeddings) m.tensors.erase("output.weight");
  if (m.config.arch == Arch::kPhi3) KILN_RETURN_IF_ERROR(split_fused_projections(m, "attn_qkv.weight", "ffn_gate_up.weight"));
  KILN_RETURN_IF_ERROR(check_model_tensors(m));
  if (m.config.gemma_block()) KILN_RETURN_IF_ERROR(fold_gemma_norms(m));
  if (m.config.arch == Arch::kMiniCPM) KILN_RETURN_IF_ERROR(fold_minicpm_scales(m));
  return m;
}

}  // namespace kiln
