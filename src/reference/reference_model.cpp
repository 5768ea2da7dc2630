#include "reference/reference_model.h"

#include <cmath>
#include <cstring>

#include "graph/builder.h"
#include "layout/ggml_blocks.h"

namespace kiln {

Result<std::shared_ptr<const ReferenceModel>> ReferenceModel::create(ImportedModel m) {
  std::shared_ptr<ReferenceModel> model(new ReferenceModel());
  model->config_ = m.config;
  model->format_ = m.format;
  model->files_ = m.files;

  auto get = [&](const std::string& name) -> Result<const float*> {
    auto it = m.tensors.find(name);
    if (it == m.tensors.end()) return corrupt(m.path + ": missing tensor '" + name + "'");
    const TensorSource& t = it->second;
    const uint64_t n = t.elements();
    if (t.dtype == DType::kF32 && reinterpret_cast<uintptr_t>(t.bytes.data()) % alignof(float) == 0) {
      model->mapped_bytes_ += t.bytes.size();
      return reinterpret_cast<const float*>(t.bytes.data());
    }
    auto buf = std::make_unique<float[]>(n);
    KILN_RETURN_IF_ERROR(dequantize(t.dtype, t.bytes, {buf.get(), n}).with_context(t.file + ": tensor '" + t.name + "'"));
    const float* p = buf.get();
    model->converted_bytes_ += n * sizeof(float);
    model->converted_.push_back(std::move(buf));
    return p;
  };
  auto get_opt = [&](const std::string& name) -> Result<const float*> {
    if (!m.tensors.count(name)) return static_cast<const float*>(nullptr);
    return get(name);
  };

  const ModelConfig& c = model->config_;
  KILN_ASSIGN_OR_RETURN(model->token_embd_, get("token_embd.weight"));
  KILN_ASSIGN_OR_RETURN(model->output_norm_, get("output_norm.weight"));
  if (c.tie_embeddings) {
    model->output_ = model->token_embd_;
  } else {
    KILN_ASSIGN_OR_RETURN(model->output_, get("output.weight"));
  }
  model->layers_.resize(static_cast<size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    ReferenceLayerWeights& w = model->layers_[static_cast<size_t>(l)];
    KILN_ASSIGN_OR_RETURN(w.attn_norm, get(p + "attn_norm.weight"));
    KILN_ASSIGN_OR_RETURN(w.wq, get(p + "attn_q.weight"));
    KILN_ASSIGN_OR_RETURN(w.wk, get(p + "attn_k.weight"));
    KILN_ASSIGN_OR_RETURN(w.wv, get(p + "attn_v.weight"));
    KILN_ASSIGN_OR_RETURN(w.bq, get_opt(p + "attn_q.bias"));
    KILN_ASSIGN_OR_RETURN(w.bk, get_opt(p + "attn_k.bias"));
    KILN_ASSIGN_OR_RETURN(w.bv, get_opt(p + "attn_v.bias"));
    if (c.qk_norm) {
      KILN_ASSIGN_OR_RETURN(w.q_norm, get(p + "attn_q_norm.weight"));
      KILN_ASSIGN_OR_RETURN(w.k_norm, get(p + "attn_k_norm.weight"));
    }
    KILN_ASSIGN_OR_RETURN(w.wo, get(p + "attn_output.weight"));
    if (c.gemma_block()) {
      KILN_ASSIGN_OR_RETURN(w.post_attn_norm, get(p + "post_attention_norm.weight"));
      KILN_ASSIGN_OR_RETURN(w.post_ffn_norm, get(p + "post_ffw_norm.weight"));
    }
    KILN_ASSIGN_OR_RETURN(w.ffn_norm, get(p + "ffn_norm.weight"));
    KILN_ASSIGN_OR_RETURN(w.w_gate, get(p + "ffn_gate.weight"));
    KILN_ASSIGN_OR_RETURN(w.w_up, get(p + "ffn_up.weight"));
    KILN_ASSIGN_OR_RETURN(w.w_down, get(p + "ffn_down.weight"));
  }
  KILN_ASSIGN_OR_RETURN(const float* rope_freqs, get_opt("rope_freqs.weight"));
  const auto factors =
      rope_freqs ? std::span<const float>(rope_freqs, static_cast<size_t>(c.rope_dim() / 2)) : std::span<const float>();
  model->inv_freq_ = rope_inv_freq(c, factors);
  model->inv_freq_long_ = rope_inv_freq_long(c, factors);
  model->inv_freq_local_ = rope_inv_freq_local(c);
  return std::shared_ptr<const ReferenceModel>(std::move(model));
}

}  // namespace kiln
