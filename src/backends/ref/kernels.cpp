#include "backends/ref/kernels.h"

#include <cmath>

#include "backends/api/activation_math.h"
#include "core/dtype.h"

namespace kiln::ref {

void matvec(float* y, const float* w, const float* x, const float* bias, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const float* row = w + static_cast<int64_t>(r) * cols;
    float s = 0.0f;
    for (int c = 0; c < cols; ++c) s += row[c] * x[c];
    y[r] = bias ? s + bias[r] : s;
  }
}

void rmsnorm(float* y, const float* x, const float* weight, int n, float eps) {
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int i = 0; i < n; ++i) y[i] = weight[i] * (x[i] * inv);
}

void head_rmsnorm(float* y, const float* x, const float* weight, int n_heads, int head_dim, float eps) {
  for (int h = 0; h < n_heads; ++h) {
    const int64_t at = static_cast<int64_t>(h) * head_dim;
    rmsnorm(y + at, x + at, weight, head_dim, eps);
  }
}

void softmax(float* x, int n) {
  float mx = x[0];
  for (int i = 1; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  for (int i = 0; i < n; ++i) x[i] /= sum;
}

void rope(float* v, int n_heads, int head_dim, int pos, const float* inv_freq, bool half_split, int rotary_dim) {
  const int half = (rotary_dim > 0 ? rotary_dim : head_dim) / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* head = v + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(pos) * inv_freq[i];
      const float c = std::cos(angle), s = std::sin(angle);
      float* a = half_split ? head + i : head + 2 * i;
      float* b = half_split ? head + i + half : head + 2 * i + 1;
      const float a0 = *a, b0 = *b;
      *a = a0 * c - b0 * s;
      *b = a0 * s + b0 * c;
    }
  }
}

void swiglu(float* h, const float* gate, const float* up, int n) {
  for (int i = 0; i < n; ++i) {
    const float g = gate[i];
    h[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void add(float* y, const float* x, int n) {
  for (int i = 0; i < n; ++i) y[i] += x[i];
}

namespace {
inline float cache_value(float x) { return x; }
inline float cache_value(uint16_t h) { return f16_to_f32(h); }

template <class T>
void attend_cache(float* out, const float* q, const T* k, const T* v, int first, int last, int stride, int head_dim,
                  float scale, float* scores, float cap) {
  for (int t = first; t <= last; ++t) {
    const T* kt = k + static_cast<int64_t>(t) * stride;
    float s = 0.0f;
    for (int i = 0; i < head_dim; ++i) s += q[i] * cache_value(kt[i]);
    scores[t] = cap > 0.0f ? softcap(s * scale, cap) : s * scale;
  }
  softmax(scores + first, last - first + 1);
  for (int i = 0; i < head_dim; ++i) out[i] = 0.0f;
  for (int t = first; t <= last; ++t) {
    const T* vt = v + static_cast<int64_t>(t) * stride;
    const float p = scores[t];
    for (int i = 0; i < head_dim; ++i) out[i] += p * cache_value(vt[i]);
  }
}
}  // namespace

void attend(float* out, const float* q, const float* k, const float* v, int first, int last, int stride,
            int head_dim, float scale, float* scores, float cap) {
  attend_cache(out, q, k, v, first, last, stride, head_dim, scale, scores, cap);
}

void attend(float* out, const float* q, const uint16_t* k, const uint16_t* v, int first, int last, int stride,
            int head_dim, float scale, float* scores, float cap) {
  attend_cache(out, q, k, v, first, last, stride, head_dim, scale, scores, cap);
}

}  // namespace kiln::ref
