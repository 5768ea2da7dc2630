#include "formats/fused_projections.h"

namespace kiln {

Status split_fused_projections(ImportedModel& m, const std::string& qkv, const std::string& gate_up) {
  const ModelConfig& c = m.config;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const std::pair<std::string, std::vector<std::pair<std::string, int64_t>>> splits[] = {
        {qkv, {{p + "attn_q.weight", c.q_dim()}, {p + "attn_k.weight", c.kv_dim()}, {p + "attn_v.weight", c.kv_dim()}}},
        {gate_up, {{p + "ffn_gate.weight", c.hidden_dim}, {p + "ffn_up.weight", c.hidden_dim}}},
    };
    for (const auto& [fused_name, parts] : splits) {
      auto it = m.tensors.find(p + fused_name);
      if (it == m.tensors.end()) return corrupt(m.path + ": missing tensor '" + p + fused_name + "'");
      const TensorSource fused = it->second;
      m.tensors.erase(it);
      KILN_ASSIGN_OR_RETURN(std::vector<TensorSource> views, split_rows(fused, c.dim, parts));
      for (TensorSource& v : views) {
        if (m.tensors.count(v.name)) return corrupt(m.path + ": both a fused '" + fused.name + "' and '" + v.name + "'");
        m.tensors[v.name] = std::move(v);
      }
    }
  }
  return Status::ok();
}

}  // namespace kiln
