#include "reference/reference_session.h"

#include <cmath>
#include <cstring>

#include "backends/api/activation_math.h"
#include "backends/ref/kernels.h"
#include "graph/builder.h"

namespace kiln {

Result<std::unique_ptr<ReferenceSession>> ReferenceSession::create(std::shared_ptr<const ReferenceModel> model, int n_ctx) {
  const ModelConfig& c = model->config();
  if (n_ctx <= 0) n_ctx = c.short_rope_context();
  if (n_ctx > c.max_seq_len)
    return invalid_argument("context of " + std::to_string(n_ctx) + " exceeds the model's maximum of " +
                            std::to_string(c.max_seq_len));
  std::unique_ptr<ReferenceSession> s(new ReferenceSession());
  s->model_ = std::move(model);
  s->n_ctx_ = n_ctx;
  s->long_rope_ = c.rope_scaling.long_factors_for(n_ctx);
  const size_t kv = static_cast<size_t>(c.n_layers) * static_cast<size_t>(n_ctx) * static_cast<size_t>(c.kv_dim());
  s->key_cache_.assign(kv, 0.0f);
  s->value_cache_.assign(kv, 0.0f);
  const auto d = static_cast<size_t>(c.dim);
  s->x_.resize(d);
  s->xb_.resize(std::max(d, static_cast<size_t>(c.q_dim())));
  s->xb2_.resize(d);
  s->q_.resize(static_cast<size_t>(c.q_dim()));
  s->k_.resize(static_cast<size_t>(c.kv_dim()));
  s->v_.resize(static_cast<size_t>(c.kv_dim()));
  s->att_out_.resize(static_cast<size_t>(c.q_dim()));
  s->gate_.resize(static_cast<size_t>(c.hidden_dim));
  s->up_.resize(static_cast<size_t>(c.hidden_dim));
  s->scores_.resize(static_cast<size_t>(n_ctx));
  s->logits_.resize(static_cast<size_t>(c.vocab_size));
  return s;
}

Result<std::span<const float>> ReferenceSession::forward(int token) {
  const ReferenceModel& m = *model_;
  const ModelConfig& c = m.config();
  if (token < 0 || token >= c.vocab_size)
    return invalid_argument("token id " + std::to_string(token) + " is outside the vocabulary");
  if (pos_ >= n_ctx_) return invalid_argument("the context of " + std::to_string(n_ctx_) + " tokens is full");
  const int pos = pos_;
  const int d = c.dim, kv_dim = c.kv_dim(), hd = c.head_dim;
  const int group = c.n_heads / c.n_kv_heads;
  const float scale = attention_scale(c);
  const bool half_split = c.rope_style == RopeStyle::kHalfSplit;
  const bool gemma = c.gemma_block();

  std::memcpy(x_.data(), m.token_embd() + static_cast<int64_t>(token) * d, sizeof(float) * static_cast<size_t>(d));
  if (const float s = c.embedding_multiplier(); s != 0.0f)  // Gemma's sqrt(dim), MiniCPM's scale_emb
    for (float& v : x_) v *= s;
  for (int l = 0; l < c.n_layers; ++l) {
    // With a sliding window a query sees only the last `sliding_window` positions, itself included.
    const int first = (c.layer_is_sliding(l) && pos >= c.sliding_window) ? pos - c.sliding_window + 1 : 0;
    const ReferenceLayerWeights& w = m.layer(l);
    float* kc = key_cache_.data() + static_cast<size_t>(l) * static_cast<size_t>(n_ctx_) * static_cast<size_t>(kv_dim);
    float* vc = value_cache_.data() + static_cast<size_t>(l) * static_cast<size_t>(n_ctx_) * static_cast<size_t>(kv_dim);

    // Attention block.
    ref::rmsnorm(xb_.data(), x_.data(), w.attn_norm, d, c.rms_eps);
    ref::matvec(q_.data(), w.wq, xb_.data(), w.bq, c.q_dim(), d);
    ref::matvec(k_.data(), w.wk, xb_.data(), w.bk, kv_dim, d);
    ref::matvec(v_.data(), w.wv, xb_.data(), w.bv, kv_dim, d);
    if (w.q_norm != nullptr) {  // Qwen3: each head normalised before RoPE
      ref::head_rmsnorm(q_.data(), q_.data(), w.q_norm, c.n_heads, hd, c.rms_eps);
      ref::head_rmsnorm(k_.data(), k_.data(), w.k_norm, c.n_kv_heads, hd, c.rms_eps);
    }
    if (c.layer_has_rope(l)) {  // SmolLM3's NoPE layers have none
      ref::rope(q_.data(), c.n_heads, hd, pos, m.inv_freq(l, long_rope_).data(), half_split, c.rotary_dim);
      ref::rope(k_.data(), c.n_kv_heads, hd, pos, m.inv_freq(l, long_rope_).data(), half_split, c.rotary_dim);
    }
    std::memcpy(kc + static_cast<size_t>(pos) * kv_dim, k_.data(), sizeof(float) * static_cast<size_t>(kv_dim));
    std::memcpy(vc + static_cast<size_t>(pos) * kv_dim, v_.data(), sizeof(float) * static_cast<size_t>(kv_dim));
    for (int h = 0; h < c.n_heads; ++h) {
      const int kvh = h / group;
      ref::attend(att_out_.data() + h * hd, q_.data() + h * hd, kc + kvh * hd, vc + kvh * hd, first, pos, kv_dim, hd,
                  scale, scores_.data(), c.attn_softcap);
    }
    ref::matvec(xb2_.data(), w.wo, att_out_.data(), nullptr, d, c.q_dim());
    if (gemma) ref::rmsnorm(xb2_.data(), xb2_.data(), w.post_attn_norm, d, c.rms_eps);
    ref::add(x_.data(), xb2_.data(), d);

    // Feed-forward block.
    ref::rmsnorm(xb_.data(), x_.data(), w.ffn_norm, d, c.rms_eps);
    ref::matvec(gate_.data(), w.w_gate, xb_.data(), nullptr, c.hidden_dim, d);
    ref::matvec(up_.data(), w.w_up, xb_.data(), nullptr, c.hidden_dim, d);
    if (gemma) {
      geglu(gate_.data(), gate_.data(), up_.data(), c.hidden_dim);
    } else {
      ref::swiglu(gate_.data(), gate_.data(), up_.data(), c.hidden_dim);
    }
    ref::matvec(xb2_.data(), w.w_down, gate_.data(), nullptr, d, c.hidden_dim);
    if (gemma) ref::rmsnorm(xb2_.data(), xb2_.data(), w.post_ffn_norm, d, c.rms_eps);
    ref::add(x_.data(), xb2_.data(), d);
  }
  ref::rmsnorm(x_.data(), x_.data(), m.output_norm(), d, c.rms_eps);
  ref::matvec(logits_.data(), m.output(), x_.data(), nullptr, c.vocab_size, d);
  if (c.final_softcap > 0.0f) softcap_rows(logits_.data(), logits_.data(), c.vocab_size, c.final_softcap);
  ++pos_;
  return std::span<const float>(logits_);
}

Result<std::span<const float>> ReferenceSession::decode(std::span<const int> tokens) {
  if (tokens.empty()) return invalid_argument("decode: no tokens");
  std::span<const float> logits;
  for (int t : tokens) {
    KILN_ASSIGN_OR_RETURN(logits, forward(t));
  }
  return logits;
}

}  // namespace kiln
