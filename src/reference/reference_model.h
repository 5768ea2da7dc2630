// An immutable model: config and FP32 weights, shared by any number of sessions.
#pragma once

#include <memory>
#include <vector>

#include "formats/tensor_source.h"

namespace kiln {

struct ReferenceLayerWeights {
  const float* attn_norm = nullptr;
  const float* wq = nullptr;
  const float* wk = nullptr;
  const float* wv = nullptr;
  const float* bq = nullptr;  // biases are null unless the architecture has them (Qwen2)
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* q_norm = nullptr;  // per-head norms [head_dim], null unless the architecture has them (Qwen3)
  const float* k_norm = nullptr;
  const float* wo = nullptr;
  const float* post_attn_norm = nullptr;  // Gemma's norms after attention and after the FFN; null elsewhere
  const float* post_ffn_norm = nullptr;
  const float* ffn_norm = nullptr;
  const float* w_gate = nullptr;
  const float* w_up = nullptr;
  const float* w_down = nullptr;
};

class ReferenceModel {
 public:
  // F32 tensors are used in place (the file stays mapped); other types are converted once here.
  static Result<std::shared_ptr<const ReferenceModel>> create(ImportedModel imported);

  const ModelConfig& config() const { return config_; }
  const std::string& format() const { return format_; }
  const float* token_embd() const { return token_embd_; }
  const float* output_norm() const { return output_norm_; }
  const float* output() const { return output_; }
  const ReferenceLayerWeights& layer(int l) const { return layers_[static_cast<size_t>(l)]; }
  // RoPE frequency of each pair in a head, with the config's scaling applied.
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  // Layer l's: the sliding-window layers' own where the model has them (Gemma 3).
  // LongRoPE's long factors' where `long_factors` (a session past the original context).
  const std::vector<float>& inv_freq(int l, bool long_factors = false) const {
    if (!inv_freq_local_.empty() && config_.layer_is_sliding(l)) return inv_freq_local_;
    return long_factors ? inv_freq_long_ : inv_freq_;
  }

  uint64_t mapped_weight_bytes() const { return mapped_bytes_; }
  uint64_t converted_weight_bytes() const { return converted_bytes_; }

 private:
  ReferenceModel() = default;
  ModelConfig config_;
  std::string format_;
  const float* token_embd_ = nullptr;
  const float* output_norm_ = nullptr;
  const float* output_ = nullptr;
  std::vector<ReferenceLayerWeights> layers_;
  std::vector<float> inv_freq_;
  std::vector<float> inv_freq_local_;
  std::vector<float> inv_freq_long_;
  std::vector<std::shared_ptr<const MappedFile>> files_;
  std::vector<std::unique_ptr<float[]>> converted_;
  uint64_t mapped_bytes_ = 0;
  uint64_t converted_bytes_ = 0;
};

}  // namespace kiln
