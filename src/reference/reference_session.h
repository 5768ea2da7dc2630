// A conversation with a model: its own KV cache and scratch, all allocated when it is created.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "runtime/decoder.h"
#include "reference/reference_model.h"

namespace kiln {

// The FP32 reference: one token at a time, written like the paper; the oracle of the compiled path.
class ReferenceSession final : public Decoder {
 public:
  // n_ctx <= 0 takes ModelConfig::short_rope_context(). The KV cache for n_ctx positions is allocated here,
  // once; forward() allocates nothing.
  static Result<std::unique_ptr<ReferenceSession>> create(std::shared_ptr<const ReferenceModel> model, int n_ctx);

  // Runs one token at the next position and returns the logits for the token after it.
  Result<std::span<const float>> forward(int token);

  Result<std::span<const float>> decode(std::span<const int> tokens) override;
  int position() const override { return pos_; }
  int n_ctx() const override { return n_ctx_; }
  const ModelConfig& config() const override { return model_->config(); }
  const ReferenceModel& model() const { return *model_; }
  void reset() override { pos_ = 0; }
  void rewind(int position) override { pos_ = position < 0 ? 0 : position < pos_ ? position : pos_; }
  size_t kv_cache_bytes() const { return (key_cache_.size() + value_cache_.size()) * sizeof(float); }

 private:
  ReferenceSession() = default;
  std::shared_ptr<const ReferenceModel> model_;
  int n_ctx_ = 0;
  bool long_rope_ = false;  // LongRoPE's long factors: n_ctx is past the original context
  int pos_ = 0;
  // key_cache_[layer][pos][kv_dim], value_cache_ likewise.
  std::vector<float> key_cache_, value_cache_;
  std::vector<float> x_, xb_, xb2_, q_, k_, v_, att_out_, gate_, up_, scores_, logits_;
};

}  // namespace kiln
