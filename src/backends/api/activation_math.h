// The scalar definitions every back end (and the FP32 reference) computes alike where an op has
// no faster kernel of its own.
#pragma once

#include <cmath>
#include <cstdint>

#include "graph/graph.h"

namespace kiln {

// GELU, tanh approximation, as PyTorch's gelu(approximate="tanh") (Gemma's gelu_pytorch_tanh):
// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), in f32.
inline float gelu_tanh(float x) {
  constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
  constexpr float kKappa = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kBeta * (x + kKappa * x * x * x)));
}

// y = gelu_tanh(g) * u over n elements (y may be g).
inline void geglu(float* y, const float* g, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = gelu_tanh(g[i]) * u[i];
}

// Gemma 2's soft-cap: x -> cap * tanh(x / cap), in f32 (as transformers divides, tanh, multiplies).
inline float softcap(float x, float cap) { return cap * std::tanh(x / cap); }

// y = softcap(x) over n elements (y may be x).
inline void softcap_rows(float* y, const float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) y[i] = softcap(x[i], cap);
}

// The attention node's score scale: its own (Gemma's query_pre_attn_scalar^-0.5), else
// head_dim^-0.5.
inline float attention_scale(const Node& n) {
  return n.scale > 0.0f ? n.scale : 1.0f / std::sqrt(static_cast<float>(n.head_dim));
}

// Gemma's embedding scale, applied to the rows an embed node wrote (none where its scale is 0).
inline void scale_embedding(const Node& n, float* y, int64_t count) {
  if (n.scale == 0.0f) return;
  for (int64_t i = 0; i < count; ++i) y[i] *= n.scale;
}

}  // namespace kiln
