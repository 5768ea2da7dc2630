// The float ops of a layer: the polynomial exp, RMS norms, SwiGLU, residual add, rotary
// embedding.
#pragma once

#include "backends/cpu/kernel_helpers.h"

namespace kiln::cpu {
namespace {

// ---- float ops ----

// exp(x) for the softmax and SiLU: Cephes' single-precision polynomial after the reduction
// x = n ln2 + r, |r| <= ln2 / 2; relative error about 2 ulp, exp(x < -87) = about 1e-38.
inline float fast_exp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

template <class S>
void rmsnorm(float* y, const float* x, const float* w, int64_t n, float eps) {
  typename S::F acc = S::zero();
  int64_t i = 0;
  for (; i + S::N <= n; i += S::N) {
    const auto v = S::load(x + i);
    acc = S::fma(v, v, acc);
  }
  float ss = S::sum(acc);
  for (; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t j = 0; j < n; ++j) y[j] = w[j] * (x[j] * inv);
}

template <class S>
void head_rmsnorm(float* y, const float* x, const float* w, int n_heads, int64_t head_dim, float eps) {
  for (int h = 0; h < n_heads; ++h) rmsnorm<S>(y + h * head_dim, x + h * head_dim, w, head_dim, eps);
}

inline void swiglu(float* y, const float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    y[i] = g / (1.0f + fast_exp(-g)) * up[i];
  }
}

inline void add(float* y, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

// As ref::rope, with the angles' cos/sin computed once per token by the caller; the first
// rotary_dim elements of each head turn (0: all of them).
inline void rope(float* x, int n_heads, int head_dim, int rotary_dim, const float* cs, const float* sn, bool half_split) {
  const int half = (rotary_dim > 0 ? rotary_dim : head_dim) / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* head = x + static_cast<int64_t>(h) * head_dim;
    if (half_split) {
      for (int i = 0; i < half; ++i) {
        const float a0 = head[i], b0 = head[i + half];
        head[i] = a0 * cs[i] - b0 * sn[i];
        head[i + half] = a0 * sn[i] + b0 * cs[i];
      }
    } else {
      for (int i = 0; i < half; ++i) {
        const float a0 = head[2 * i], b0 = head[2 * i + 1];
        head[2 * i] = a0 * cs[i] - b0 * sn[i];
        head[2 * i + 1] = a0 * sn[i] + b0 * cs[i];
      }
    }
  }
}

}  // namespace
}  // namespace kiln::cpu
